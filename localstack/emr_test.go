package localstack_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"
	emrtypes "github.com/aws/aws-sdk-go-v2/service/emr/types"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/localstack"
)

// The Emr runtime against the emulator's EMR API, as far as it goes:
// ministack completes a step the moment it is added (a control plane
// only), so this adds a step and maps its end, finds a step again by its
// name as a new owner would, and runs a workflow whose Emr step's outputs
// feed the next step. Steps that run, fail or are cancelled are covered
// against the in-memory EMR of engine/stepruntime/emr's tests.
func TestEmrStepInEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := localstack.Config(t)
	cfg.HTTPClient = &http.Client{Transport: epochTimes{http.DefaultTransport}}
	client := awsemr.NewFromConfig(cfg)
	cl, err := client.RunJobFlow(ctx, &awsemr.RunJobFlowInput{Name: aws.String(fmt.Sprintf("steps-%d", time.Now().UnixNano())),
		ReleaseLabel: aws.String("emr-7.1.0"), Instances: &emrtypes.JobFlowInstancesConfig{KeepJobFlowAliveWhenNoSteps: aws.Bool(true),
			MasterInstanceType: aws.String("m5.xlarge"), InstanceCount: aws.Int32(1)},
		JobFlowRole: aws.String("EMR_EC2_DefaultRole"), ServiceRole: aws.String("EMR_DefaultRole")})
	if err != nil {
		t.Fatalf("run job flow: %v", err)
	}
	cluster := aws.ToString(cl.JobFlowId)
	rt, err := emr.New(emr.Config{Client: client, PollInterval: 200 * time.Millisecond, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	newAttempt := func(uuid string) *stepruntime.Attempt {
		return &stepruntime.Attempt{WorkflowID: "wf", StepID: "spark", UUID: uuid,
			Params: map[string]any{emr.ParamEMR: map[string]any{"cluster_id": cluster, "step": map[string]any{
				"name": "agg", "args": []any{"spark-submit", "s3://code/agg.py"}}}},
			Record: func(context.Context, map[string]any) error { return nil }}
	}
	call := func(a *stepruntime.Attempt, f func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
		r := f(ctx, a)
		if r.Data != nil {
			a.Data = r.Data
		}
		return r
	}
	stepsNamed := func(name string) []emrtypes.StepSummary {
		var named []emrtypes.StepSummary
		p := awsemr.NewListStepsPaginator(client, &awsemr.ListStepsInput{ClusterId: aws.String(cluster)})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("list steps: %v", err)
			}
			for _, s := range out.Steps {
				if aws.ToString(s.Name) == name {
					named = append(named, s)
				}
			}
		}
		return named
	}

	t.Run("add and end", func(t *testing.T) {
		a := newAttempt("2d9f5e3a-7c6f-4a4d-9eaf-9b8a7f6e5d4c")
		if r := call(a, rt.Start); r.State != stepruntime.Done {
			t.Fatalf("start: %s %s", r.State, r.Message)
		}
		if r := call(a, rt.Execute); r.State != stepruntime.Continue || a.Data[emr.KeyStepID] == nil {
			t.Fatalf("add: %s %v %s", r.State, a.Data, r.Message)
		}
		r := call(a, rt.Execute)
		if r.State != stepruntime.Done || r.Outputs[emr.OutputState] == nil {
			t.Fatalf("poll: %s %s", r.State, r.Message)
		}
		named := stepsNamed(emr.StepName("agg", "spark", a.UUID))
		if len(named) != 1 || aws.ToString(named[0].Id) != a.Data[emr.KeyStepID] {
			t.Fatalf("steps named for the attempt: %+v", named)
		}
	})

	t.Run("a new owner finds the step", func(t *testing.T) {
		a := newAttempt("3e0a6f4b-8d7a-4b5e-8fb0-0c9b8a7f6e5d")
		name := emr.StepName("agg", "spark", a.UUID)
		added, err := client.AddJobFlowSteps(ctx, &awsemr.AddJobFlowStepsInput{JobFlowId: aws.String(cluster),
			Steps: []emrtypes.StepConfig{{Name: aws.String(name), HadoopJarStep: &emrtypes.HadoopJarStepConfig{Jar: aws.String(emr.DefaultJar)}}}})
		if err != nil {
			t.Fatal(err)
		}
		a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: a.UUID}
		r := call(a, rt.Execute)
		if r.State != stepruntime.Continue || a.Data[emr.KeyStepID] != added.StepIds[0] || !strings.Contains(r.Message, "found EMR step") {
			t.Fatalf("recover: %s %v %s", r.State, a.Data, r.Message)
		}
		if r := call(a, rt.Execute); r.State != stepruntime.Done {
			t.Fatalf("poll: %s %s", r.State, r.Message)
		}
		if n := len(stepsNamed(name)); n != 1 {
			t.Fatalf("%d steps under the attempt's name, want 1", n)
		}
	})

	t.Run("workflow", func(t *testing.T) {
		env := flowtest.New(t)
		env.Engine(stepruntime.Registry{emr.Type: rt}, flow.Config{})
		env.Push(fmt.Sprintf(`{"workflow":{"id":"emuemr","params":{"cluster":{"type":"STRING","value":%q}},"steps":[
		  {"step":{"id":"spark","type":"Emr","transition":{"successors":{"after":"true"}},
		    "params":{"emr":{"type":"MAP","value":{"cluster_id":{"type":"STRING","expression":"cluster"},
		      "poll_interval":{"type":"STRING","value":"200ms"},
		      "step":{"type":"MAP","value":{"name":{"type":"STRING","value":"agg"},"args":{"type":"STRING_ARRAY","value":["spark-submit","s3://code/agg.py"]}}}}}}}},
		  {"step":{"id":"after","type":"NoOp","params":{"id":{"type":"STRING","expression":"params.getFromStep('spark', 'emr_step_id')"},
		    "state":{"type":"STRING","expression":"params.getFromStep('spark', 'state')"}}}}]}}`, cluster))
		inst := env.Start("emuemr")
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowSucceeded {
			a := env.Attempts(inst, "spark")
			t.Fatalf("run ended %s: %s %s", got.Status, a[len(a)-1].Status, a[len(a)-1].Timeline)
		}
		job := env.Attempts(inst, "spark")[0]
		if n := len(stepsNamed(emr.StepName("agg", "spark", job.UUID))); n != 1 {
			t.Fatalf("%d EMR steps for the attempt", n)
		}
		if after := string(env.Attempts(inst, "after")[0].Params); !strings.Contains(after, `"COMPLETED"`) {
			t.Errorf("downstream params %s", after)
		}
	})
}

// epochTimes works around the emulator's EMR answers, whose timestamps
// are ISO 8601 strings where EMR's JSON protocol (and so the SDK) has
// epoch seconds: it rewrites them on the way in, and changes nothing else.
type epochTimes struct{ next http.RoundTripper }

var isoTime = regexp.MustCompile(`"(\w*DateTime)":\s*"(\d{4}-\d\d-\d\dT[^"]+)"`)

func (e epochTimes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.next.RoundTrip(r)
	if err != nil || !strings.Contains(r.Header.Get("X-Amz-Target"), "ElasticMapReduce") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = isoTime.ReplaceAllFunc(body, func(m []byte) []byte {
		sub := isoTime.FindSubmatch(m)
		ts, err := time.Parse(time.RFC3339Nano, string(sub[2]))
		if err != nil {
			return m
		}
		return []byte(`"` + string(sub[1]) + `":` + strconv.FormatInt(ts.Unix(), 10))
	})
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}
