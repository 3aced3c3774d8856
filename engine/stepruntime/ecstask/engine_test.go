package ecstask_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask/ecstasktest"
)

const taskWorkflow = `{"workflow":{"id":"containers","steps":[
	{"step":{"id":"job","type":"EcsTask","timeout":"%TIMEOUT%","transition":{"successors":{"after":"true"}},
	  "params":{"ecs_task":{"type":"MAP","value":{
	    "task_definition":{"type":"STRING","value":"etl"},
	    "command":{"type":"STRING_ARRAY","value":["run"]},
	    "poll_interval":{"type":"STRING","value":"200ms"},
	    "env":{"type":"STRING_MAP","value":{"RUN_FOR":"%RUN_FOR%"}}}}}}},
	{"step":{"id":"after","type":"NoOp","params":{"code":{"type":"LONG","expression":"params.getFromStep('job', 'exit_code')"}}}}]}}`

func taskEngine(t *testing.T, fake *ecstasktest.Fake, runFor, timeout string) *flowtest.Env {
	t.Helper()
	env := flowtest.New(t)
	env.Engine(stepruntime.Registry{ecstask.Type: newRuntime(t, fake)}, flow.Config{})
	env.Push(strings.NewReplacer("%RUN_FOR%", runFor, "%TIMEOUT%", timeout).Replace(taskWorkflow))
	return env
}

func TestEcsTaskStepRunsToTheEnd(t *testing.T) {
	t.Parallel()
	fake := ecstasktest.New()
	fake.Define("etl", "main")
	env := taskEngine(t, fake, "1s", "1h")
	inst := env.Start("containers")
	data := env.WaitData(inst, "job", ecstask.KeyTaskARN, 30*time.Second)
	if url, _ := data[ecstask.KeyLogURL].(string); !strings.HasPrefix(url, "https://us-east-1.console.aws.amazon.com/cloudwatch/") {
		t.Errorf("a running step's details lack its logs: %v", data)
	}
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	job := env.Attempts(inst, "job")
	if len(job) != 1 || fake.Launches(job[0].UUID) != 1 {
		t.Fatalf("%d attempts, %d launches", len(job), fake.Launches(job[0].UUID))
	}
	if after := env.Attempts(inst, "after")[0]; !strings.Contains(string(after.Params), `"code": {"type": "LONG", "value": 0}`) {
		t.Errorf("downstream params %s", after.Params)
	}
}

// The step's timeout stops the task.
func TestEcsTaskStepTimeoutStopsTheTask(t *testing.T) {
	t.Parallel()
	fake := ecstasktest.New()
	fake.Define("etl", "main")
	env := taskEngine(t, fake, "1h", "2s")
	inst := env.Start("containers")
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
	job := env.Attempts(inst, "job")[0]
	if job.Status != instance.StepTimedOut || fake.Calls("StopTask") != 1 {
		t.Fatalf("step %s, StopTask calls %d", job.Status, fake.Calls("StopTask"))
	}
	var rs struct{ Data map[string]any }
	_ = json.Unmarshal(job.RuntimeState, &rs)
	task, _ := fake.Task(rs.Data[ecstask.KeyTaskARN].(string))
	if *task.LastStatus != "STOPPED" {
		t.Errorf("task %s", *task.LastStatus)
	}
}
