package localstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"
	emrtypes "github.com/aws/aws-sdk-go-v2/service/emr/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/notebook"
	"github.com/maestro-aws/maestro/localstack"
)

// examples/batch-emr-notebook.json against the emulator: a Batch job, an
// EMR step and a notebook carried by a Batch job, each step's outputs in
// the next one's params. The emulator's Batch and EMR end their work as it
// is submitted and runs no papermill, so the test puts the executed
// notebook where papermill would write it, in the emulator's S3.
func TestBatchEmrNotebookExampleInEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := localstack.Config(t)
	bc := awsbatch.NewFromConfig(cfg)
	queue, def := batchQueue(t, bc)
	emrCfg := cfg.Copy()
	emrCfg.HTTPClient = &http.Client{Transport: epochTimes{http.DefaultTransport}}
	ec := awsemr.NewFromConfig(emrCfg)
	cl, err := ec.RunJobFlow(ctx, &awsemr.RunJobFlowInput{Name: aws.String("example"), ReleaseLabel: aws.String("emr-7.1.0"),
		Instances: &emrtypes.JobFlowInstancesConfig{KeepJobFlowAliveWhenNoSteps: aws.Bool(true), MasterInstanceType: aws.String("m5.xlarge"),
			InstanceCount: aws.Int32(1)}})
	if err != nil {
		t.Fatalf("run job flow: %v", err)
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("notebooks-%d", time.Now().UnixNano())
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	executed := `{"cells":[{"cell_type":"code","outputs":[{"output_type":"stream","name":"stdout",` +
		`"text":"MAESTRO_OUTPUT_START{\"params\":{\"report_rows\":{\"type\":\"LONG\",\"value\":128}}}MAESTRO_OUTPUT_END\n"}]}]}`
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("out/report-20240101.ipynb"),
		Body: bytes.NewReader([]byte(executed))}); err != nil {
		t.Fatalf("put notebook: %v", err)
	}

	bj, err := batch.NewJob(batch.Config{Client: bc, JobQueue: queue, PollInterval: 200 * time.Millisecond, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	er, err := emr.New(emr.Config{Client: ec, PollInterval: 200 * time.Millisecond, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	nr, err := notebook.New(notebook.Config{Carrier: notebook.CarrierBatch, Job: bj, JobQueue: queue, JobDefinition: def,
		OutputPrefix: "s3://" + bucket + "/out/", Objects: notebook.S3Objects{Client: s3c}, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	env := flowtest.New(t)
	env.Engine(stepruntime.Registry{batch.Type: external.Runtime{Job: bj}, emr.Type: er, notebook.Type: nr}, flow.Config{})

	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(root + "/examples/batch-emr-notebook.json")
	if err != nil {
		t.Fatal(err)
	}
	// The emulator's cluster, job definition and an output name the test
	// knows; the rest is the example as shipped.
	example := strings.NewReplacer("j-2AXXXXXXGAPLF", aws.ToString(cl.JobFlowId), `"value": "extract"}`, `"value": "`+def+`"}`,
		`"value": "s3://notebooks/daily-report.ipynb"}`, `"value": "s3://notebooks/daily-report.ipynb"}, "output_path": {"type": "STRING", "value": "report-${day}.ipynb"}`,
	).Replace(string(raw))
	if example == string(raw) || !strings.Contains(example, def) || !strings.Contains(example, "output_path") {
		t.Fatal("the example no longer has the fields the test replaces")
	}
	env.Push(example)
	inst := env.Start("nightly-batch-emr-notebook")
	if got := env.Wait(inst, 2*time.Minute); got.Status != instance.WorkflowSucceeded {
		for _, s := range []string{"extract", "aggregate", "report"} {
			for _, a := range env.Attempts(inst, s) {
				t.Logf("%s: %s %s", s, a.Status, a.Timeline)
			}
		}
		t.Fatalf("run ended %s", got.Status)
	}
	extract := env.Attempts(inst, "extract")[0]
	var rs struct{ Data map[string]any }
	_ = json.Unmarshal(extract.RuntimeState, &rs)
	jobID, _ := rs.Data[batch.KeyJobID].(string)
	aggregate := env.Attempts(inst, "aggregate")[0]
	if jobID == "" || !strings.Contains(string(aggregate.Params), jobID) {
		t.Errorf("the EMR step's params lack the Batch job id %q: %s", jobID, aggregate.Params)
	}
	_ = json.Unmarshal(aggregate.RuntimeState, &rs)
	stepID, _ := rs.Data[emr.KeyStepID].(string)
	steps, err := ec.ListSteps(ctx, &awsemr.ListStepsInput{ClusterId: cl.JobFlowId})
	if err != nil || len(steps.Steps) != 1 || !strings.Contains(strings.Join(steps.Steps[0].Config.Args, " "), "--source-job "+jobID) {
		t.Errorf("EMR steps %+v (%v)", steps, err)
	}
	report := env.Attempts(inst, "report")[0]
	if stepID == "" || !strings.Contains(string(report.Params), stepID) {
		t.Errorf("the notebook step's params lack the EMR step id %q: %s", stepID, report.Params)
	}
	out := string(report.Outputs)
	if !strings.Contains(out, `"report_rows"`) || !strings.Contains(out, "s3://"+bucket+"/out/report-20240101.ipynb") {
		t.Errorf("notebook outputs %s", out)
	}
}
