package localstack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	batchtypes "github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/localstack"
)

// batchQueue creates a compute environment, a job queue and a job
// definition in the emulator and returns the queue's and definition's
// names.
func batchQueue(t *testing.T, client *awsbatch.Client) (queue, def string) {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("steps-%d", time.Now().UnixNano())
	ce, err := client.CreateComputeEnvironment(ctx, &awsbatch.CreateComputeEnvironmentInput{
		ComputeEnvironmentName: aws.String(base + "-ce"), Type: batchtypes.CETypeManaged,
		ComputeResources: &batchtypes.ComputeResource{Type: batchtypes.CRTypeFargate, MaxvCpus: aws.Int32(4),
			Subnets: []string{"subnet-1"}}})
	if err != nil {
		t.Fatalf("create compute environment: %v", err)
	}
	if _, err := client.CreateJobQueue(ctx, &awsbatch.CreateJobQueueInput{JobQueueName: aws.String(base + "-q"), Priority: aws.Int32(1),
		ComputeEnvironmentOrder: []batchtypes.ComputeEnvironmentOrder{{ComputeEnvironment: ce.ComputeEnvironmentArn, Order: aws.Int32(1)}}}); err != nil {
		t.Fatalf("create job queue: %v", err)
	}
	if _, err := client.RegisterJobDefinition(ctx, &awsbatch.RegisterJobDefinitionInput{JobDefinitionName: aws.String(base + "-etl"),
		Type: batchtypes.JobDefinitionTypeContainer, ContainerProperties: &batchtypes.ContainerProperties{Image: aws.String("busybox"),
			Command: []string{"echo", "hi"}}}); err != nil {
		t.Fatalf("register job definition: %v", err)
	}
	return base + "-q", base + "-etl"
}

// The Batch runtime against the emulator's Batch API, as far as it goes:
// ministack's jobs succeed the moment they are submitted (it is a control
// plane only), so this submits a job and maps its end, finds a job again
// by its name as a new owner would, and runs a workflow whose Batch step's
// outputs feed the next step. Jobs that run for a while, fail, or are
// terminated are covered against batchtest's fake (engine/stepruntime/batch
// and cmd/maestro's crash test).
func TestBatchStepInEmulator(t *testing.T) {
	ctx := context.Background()
	client := awsbatch.NewFromConfig(localstack.Config(t))
	queue, def := batchQueue(t, client)
	rt, err := batch.New(batch.Config{Client: client, JobQueue: queue, PollInterval: 200 * time.Millisecond, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	newAttempt := func(uuid string) *stepruntime.Attempt {
		return &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "job", AttemptID: 1, UUID: uuid,
			Params: map[string]any{batch.ParamBatch: map[string]any{"job_definition": def,
				"container_overrides": map[string]any{"command": []any{"echo", "day"}}}},
			Record: func(context.Context, map[string]any) error { return nil }}
	}
	call := func(a *stepruntime.Attempt, f func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
		r := f(ctx, a)
		if r.Data != nil {
			a.Data = r.Data
		}
		return r
	}
	jobsNamed := func(name string) []batchtypes.JobSummary {
		out, err := client.ListJobs(ctx, &awsbatch.ListJobsInput{JobQueue: aws.String(queue),
			Filters: []batchtypes.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{name}}}})
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		var named []batchtypes.JobSummary
		for _, j := range out.JobSummaryList {
			if aws.ToString(j.JobName) == name {
				named = append(named, j)
			}
		}
		return named
	}

	t.Run("submit and end", func(t *testing.T) {
		a := newAttempt("0b7f3c1e-5a4d-4e2b-9c8d-7f6e5d4c3b2a")
		if r := call(a, rt.Start); r.State != stepruntime.Done {
			t.Fatalf("start: %s %s", r.State, r.Message)
		}
		if r := call(a, rt.Execute); r.State != stepruntime.Continue || a.Data[batch.KeyJobID] == nil {
			t.Fatalf("submit: %s %v %s", r.State, a.Data, r.Message)
		}
		r := call(a, rt.Execute)
		if r.State != stepruntime.Done || r.Outputs[batch.OutputStatus] == nil {
			t.Fatalf("poll: %s %s", r.State, r.Message)
		}
		named := jobsNamed(batch.JobName("", "job", a.UUID))
		if len(named) != 1 || aws.ToString(named[0].JobId) != a.Data[batch.KeyJobID] {
			t.Fatalf("jobs named for the attempt: %+v", named)
		}
		desc, err := client.DescribeJobs(ctx, &awsbatch.DescribeJobsInput{Jobs: []string{a.Data[batch.KeyJobID].(string)}})
		if err != nil || len(desc.Jobs) != 1 {
			t.Fatalf("describe: %v", err)
		}
		if tags := desc.Jobs[0].Tags; tags[batch.TagStepInstanceUUID] != a.UUID {
			t.Errorf("tags %v", tags)
		}
	})

	t.Run("a new owner finds the job", func(t *testing.T) {
		a := newAttempt("1c8e4d2f-6b5e-4f3c-8d9e-8a7f6e5d4c3b")
		name := batch.JobName("", "job", a.UUID)
		// The earlier owner recorded its intent and submitted, then died
		// before it wrote the job's id.
		sub, err := client.SubmitJob(ctx, &awsbatch.SubmitJobInput{JobName: aws.String(name), JobQueue: aws.String(queue), JobDefinition: aws.String(def)})
		if err != nil {
			t.Fatal(err)
		}
		a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: a.UUID}
		r := call(a, rt.Execute)
		if r.State != stepruntime.Continue || a.Data[batch.KeyJobID] != aws.ToString(sub.JobId) || !strings.Contains(r.Message, "found Batch job") {
			t.Fatalf("recover: %s %v %s", r.State, a.Data, r.Message)
		}
		if r := call(a, rt.Execute); r.State != stepruntime.Done {
			t.Fatalf("poll: %s %s", r.State, r.Message)
		}
		if n := len(jobsNamed(name)); n != 1 {
			t.Fatalf("%d jobs under the attempt's name, want 1", n)
		}
	})

	t.Run("workflow", func(t *testing.T) {
		env := flowtest.New(t)
		env.Engine(stepruntime.Registry{batch.Type: rt}, flow.Config{})
		env.Push(fmt.Sprintf(`{"workflow":{"id":"emubatch","params":{"def":{"type":"STRING","value":%q}},"steps":[
		  {"step":{"id":"job","type":"Batch","transition":{"successors":{"after":"true"}},
		    "params":{"batch":{"type":"MAP","value":{"job_definition":{"type":"STRING","expression":"def"},
		      "poll_interval":{"type":"STRING","value":"200ms"}}}}}},
		  {"step":{"id":"after","type":"NoOp","params":{"id":{"type":"STRING","expression":"params.getFromStep('job', 'job_id')"},
		    "status":{"type":"STRING","expression":"params.getFromStep('job', 'status')"}}}}]}}`, def))
		inst := env.Start("emubatch")
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run ended %s", got.Status)
		}
		job := env.Attempts(inst, "job")[0]
		if n := len(jobsNamed(batch.JobName("", "job", job.UUID))); n != 1 {
			t.Fatalf("%d jobs for the attempt", n)
		}
		if after := string(env.Attempts(inst, "after")[0].Params); !strings.Contains(after, `"SUCCEEDED"`) {
			t.Errorf("downstream params %s", after)
		}
	})
}
