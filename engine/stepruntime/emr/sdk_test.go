package emr_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr/emrtest"
)

// emrtest's HTTP face speaks the protocol the SDK's client speaks (the
// crash test's engine process reaches it that way): a step added, run to
// its end, a failing one, a cancelled one.
func TestFakeOverTheSDK(t *testing.T) {
	fake := emrtest.New()
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	client := awsemr.New(awsemr.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	rt := newRuntime(t, client)
	a := attempt("--run-for=100ms")
	if r := runToEndSlowly(t, rt, a); r.State != stepruntime.Done || a.Data[emr.KeyStepID] != "s-00001" {
		t.Fatalf("state %s: %s %v", r.State, r.Message, a.Data)
	}
	if r := runToEndSlowly(t, rt, attempt("--fail")); r.State != stepruntime.UserError {
		t.Fatalf("failing step: %s %s", r.State, r.Message)
	}
	b := attempt("--run-for=1h")
	call(b, rt.Start)
	call(b, rt.Execute)
	if r := call(b, rt.Terminate); r.State != stepruntime.Stopped || fake.Calls("CancelSteps") != 1 {
		t.Fatalf("cancel: %s %s", r.State, r.Message)
	}
	// A lost answer is found again over the wire too.
	c := attempt("--run-for=1h")
	call(c, rt.Start)
	c.Data = map[string]any{"launch": "intended", "idempotency_key": c.UUID}
	if _, err := client.AddJobFlowSteps(t.Context(), &awsemr.AddJobFlowStepsInput{JobFlowId: aws.String("j-1"),
		Steps: stepConfig(emr.StepName("daily agg", "spark", c.UUID))}); err != nil {
		t.Fatal(err)
	}
	if r := call(c, rt.Execute); r.State != stepruntime.Continue || c.Data[emr.KeyStepID] != "s-00004" {
		t.Fatalf("recover: %s %s %v", r.State, r.Message, c.Data)
	}
	if added := fake.Added()[emr.StepName("daily agg", "spark", c.UUID)]; added != 1 {
		t.Fatal(errors.New("added twice"))
	}
}
