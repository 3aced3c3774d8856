package flow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// An engine that stops between a run's start write (IN_PROGRESS, with no
// params because they failed to evaluate) and its flow's FAILED write
// leaves the run IN_PROGRESS with no params and no steps. The next owner
// must end it FAILED with the param failure, not run it without params;
// and a run whose params evaluate on the second try runs with them.
func TestRunStartedWithoutItsParamsIsNotRunWithoutThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"lost_params","params":{
	    "n":{"type":"LONG","value":1},
	    "q":{"type":"LONG","expression":"10 / (n - 2)"}},
	  "steps":[{"step":{"id":"s","type":"NoOp","params":{"got":{"type":"LONG","expression":"q"}}}}]}}`)
	failing := e.start("lost_params", workflow.Params{"n": {Type: "LONG", Value: int64(2)}})
	passing := e.start("lost_params", workflow.Params{"n": {Type: "LONG", Value: int64(7)}})
	// The state the stopped engine left: started, no params, no steps, no
	// start message.
	ctx := context.Background()
	for _, inst := range []int64{failing.InstanceID, passing.InstanceID} {
		tag, err := e.pool.Exec(ctx, `UPDATE workflow_instance SET status = 'IN_PROGRESS', seq = seq + 1, start_time = now(), params = '{}'
            WHERE workflow_id = 'lost_params' AND instance_id = $1 AND status = 'CREATED'`, inst)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("stage run %d: %v (%d rows)", inst, err, tag.RowsAffected())
		}
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM maestro_queue`); err != nil {
		t.Fatal(err)
	}

	e.engine(flow.Config{})
	got := e.wait(failing, 30*time.Second)
	if got.Status != instance.WorkflowFailed || !strings.Contains(string(got.Timeline), "params failed to evaluate") {
		t.Fatalf("the run whose params fail ended %s: %s", got.Status, got.Timeline)
	}
	got = e.wait(passing, 30*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("the run whose params evaluate ended %s: %s", got.Status, got.Timeline)
	}
	var q, stepGot int64
	if err := e.pool.QueryRow(ctx, `SELECT (i.params->'q'->>'value')::bigint, (s.params->'got'->>'value')::bigint
        FROM workflow_instance i JOIN step_instance s USING (workflow_id, instance_id, run_id)
        WHERE i.workflow_id = 'lost_params' AND i.instance_id = $1`, passing.InstanceID).Scan(&q, &stepGot); err != nil {
		t.Fatal(err)
	}
	if q != 2 || stepGot != 2 {
		t.Fatalf("stored params q = %d, the step's got = %d; want 2 and 2 (10 / (7 - 2))", q, stepGot)
	}
}
