package flow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
)

// A subworkflow step acts for its workflow's owner: a step of tester's
// workflow may not start u1's workflow (the child is never created and the
// step fails naming the target), unless tester may start it directly (an
// administrator); the child then records who caused it.
func TestSubworkflowNeedsTheParentOwnersRight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		admins []string
		owner  string // the target's owner (and operators) properties
		want   instance.WorkflowStatus
	}{
		{"owner of the parent may not start the target", nil, `"owner":"u1"`, instance.WorkflowFailed},
		{"administrator owns the parent", []string{"tester"}, `"owner":"u1"`, instance.WorkflowSucceeded},
		{"owner of the parent is an operator of the target", nil, `"owner":"u1","access_control":{"operators":["tester"]}`, instance.WorkflowSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.push(strings.Replace(childDef("azp", "NoOp", ""), `"owner":"tester"`, tc.owner, 1))
			e.push(parentDef("evil", "azp", ""))
			e.engine(flow.Config{Admins: tc.admins})
			parent := e.start("evil", nil)
			got := e.wait(parent, 30*time.Second)
			if got.Status != tc.want {
				t.Fatalf("parent %s, want %s: %s", got.Status, tc.want, got.Timeline)
			}
			cs := e.children(parent)
			if tc.want == instance.WorkflowFailed {
				if len(cs) != 0 {
					t.Fatalf("a child of u1's workflow was created: %+v", cs)
				}
				step := e.stepAttempt(parent, "sw")
				if step.Status != instance.StepFatallyFailed || !strings.Contains(string(step.Timeline), "subworkflow azp may not be started by a step of evil") {
					t.Fatalf("step %s: %s", step.Status, step.Timeline)
				}
				return
			}
			if len(cs) != 1 {
				t.Fatalf("%d children, want 1", len(cs))
			}
			var initiator map[string]any
			if err := e.pool.QueryRow(context.Background(), `SELECT initiator FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2`,
				cs[0].WorkflowID, cs[0].InstanceID).Scan(&initiator); err != nil {
				t.Fatal(err)
			}
			if initiator["type"] != "SUBWORKFLOW" || initiator["user"] != "tester" {
				t.Errorf("child initiator %v, want SUBWORKFLOW for tester", initiator)
			}
		})
	}
}
