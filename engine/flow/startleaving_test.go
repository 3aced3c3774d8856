package flow_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A start whose flow cannot begin here, because the group is leaving this
// node, writes nothing: the run stays CREATED and its message is offered
// again. Were the start written IN_PROGRESS with no flow to carry it on, the
// group's next owner would resume the run from its row alone, and a run
// whose params failed to evaluate would go on without them and succeed
// (seen in CI: TestHugeParamRunUnderAOneGiBCap's run SUCCEEDED under load).
func TestStartInALeavingGroupWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var leaving atomic.Bool
	var refused atomic.Int32
	leaving.Store(true)
	e.engineBefore(flow.Config{}, func(eng *flow.Engine) {
		eng.SetGroupsLeaving(func() bool {
			if leaving.Load() {
				refused.Add(1)
				return true
			}
			return false
		})
	})
	e.push(`{"workflow":{"id":"leaving","params":{
	    "n":{"type":"LONG","value":1},
	    "q":{"type":"LONG","expression":"10 / (n - 2)"}},
	  "steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	inst := e.start("leaving", workflow.Params{"n": {Type: "LONG", Value: int64(2)}})
	for deadline := time.Now().Add(30 * time.Second); refused.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the start was tried %d times", refused.Load())
		}
	}
	got, err := e.runs.Instance(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != instance.WorkflowCreated {
		t.Fatalf("a start whose flow did not begin wrote the run %s: %s", got.Status, got.Timeline)
	}
	leaving.Store(false)
	got = e.wait(inst, 30*time.Second)
	if got.Status != instance.WorkflowFailed || !strings.Contains(string(got.Timeline), "params failed to evaluate") {
		t.Fatalf("run ended %s: %s", got.Status, got.Timeline)
	}
}
