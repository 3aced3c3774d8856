package batch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
)

// The job's queue and definition come from workflow params through SEL;
// its outputs feed the next step's params.
const batchWorkflow = `{"workflow":{"id":"batchjobs","params":{"queue":{"type":"STRING","value":"etl-queue"}},"steps":[
	{"step":{"id":"job","type":"Batch","timeout":"%TIMEOUT%","transition":{"successors":{"after":"true"}},
	  "params":{"batch":{"type":"MAP","value":{
	    "job_queue":{"type":"STRING","expression":"queue"},
	    "job_definition":{"type":"STRING","value":"etl:1"},
	    "poll_interval":{"type":"STRING","value":"200ms"},
	    "container_overrides":{"type":"MAP","value":{"environment":{"type":"STRING_MAP","value":{"RUN_FOR":"%RUN_FOR%"}}}}}}}}},
	{"step":{"id":"after","type":"NoOp","params":{
	  "code":{"type":"LONG","expression":"params.getFromStep('job', 'exit_code')"},
	  "id":{"type":"STRING","expression":"params.getFromStep('job', 'job_id')"}}}}]}}`

func batchEngine(t *testing.T, fake *batchtest.Fake, runFor, timeout string) *flowtest.Env {
	t.Helper()
	env := flowtest.New(t)
	env.Engine(stepruntime.Registry{batch.Type: newRuntime(t, fake)}, flow.Config{})
	env.Push(strings.NewReplacer("%RUN_FOR%", runFor, "%TIMEOUT%", timeout).Replace(batchWorkflow))
	return env
}

func TestBatchStepRunsToTheEnd(t *testing.T) {
	t.Parallel()
	fake := batchtest.New()
	env := batchEngine(t, fake, "1s", "1h")
	inst := env.Start("batchjobs")
	data := env.WaitData(inst, "job", batch.KeyJobID, 30*time.Second)
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	job := env.Attempts(inst, "job")
	if len(job) != 1 || fake.Submits(batch.JobName("", "job", job[0].UUID)) != 1 || fake.Calls("SubmitJob") != 1 {
		t.Fatalf("%d attempts, %d SubmitJob calls", len(job), fake.Calls("SubmitJob"))
	}
	after := string(env.Attempts(inst, "after")[0].Params)
	if !strings.Contains(after, `"code": {"type": "LONG", "value": 0}`) || !strings.Contains(after, data[batch.KeyJobID].(string)) {
		t.Errorf("downstream params %s", after)
	}
}

// The step's timeout terminates the job.
func TestBatchStepTimeoutTerminatesTheJob(t *testing.T) {
	t.Parallel()
	fake := batchtest.New()
	env := batchEngine(t, fake, "1h", "2s")
	inst := env.Start("batchjobs")
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
	job := env.Attempts(inst, "job")[0]
	if job.Status != instance.StepTimedOut || fake.Calls("TerminateJob") != 1 {
		t.Fatalf("step %s, TerminateJob calls %d", job.Status, fake.Calls("TerminateJob"))
	}
}
