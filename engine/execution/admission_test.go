package execution

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A start that queues its run behind a run ending at that very moment:
// the end commits and looks for queued runs before the start commits, so
// it cannot see the new run. The start's second admission, after its
// commit, must admit it (else it would wait for the sweep).
func TestStartQueuedBehindEndingRunIsAdmitted(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	d, err := workflow.DecodeJSON([]byte(`{"workflow":{"id":"racy","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(ctx, d, "tester"); err != nil {
		t.Fatal(err)
	}
	svc := New(pool, defs, 4)
	first, err := svc.Start(ctx, StartRequest{WorkflowID: "racy", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Instance.Queued {
		t.Fatal("the first run of an idle SEQUENTIAL workflow was queued")
	}
	// The engine picked the first run up.
	if _, err := pool.Exec(ctx, `UPDATE workflow_instance SET status = 'IN_PROGRESS', seq = seq + 1
        WHERE workflow_id = 'racy' AND instance_id = 1`); err != nil {
		t.Fatal(err)
	}
	testHookQueued = func() {
		// The first run ends now, as the engine ends it (no workflow lock),
		// and its end looks for queued runs: the new one is not committed.
		if _, err := pool.Exec(ctx, `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now()
            WHERE workflow_id = 'racy' AND instance_id = 1`); err != nil {
			t.Error(err)
		}
		var queued bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = 'racy' AND queued)`).Scan(&queued); err != nil || queued {
			t.Errorf("the end saw a queued run (%v, %v): the race was not set up", queued, err)
		}
	}
	t.Cleanup(func() { testHookQueued = nil })
	second, err := svc.Start(ctx, StartRequest{WorkflowID: "racy", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	testHookQueued = nil
	var queued bool
	var messages int
	if err := pool.QueryRow(ctx, `SELECT queued, (SELECT count(*) FROM maestro_queue WHERE queue_id = 1 AND payload->>'instance_id' = '2')
        FROM workflow_instance WHERE workflow_id = 'racy' AND instance_id = $1`, second.Instance.InstanceID).Scan(&queued, &messages); err != nil {
		t.Fatal(err)
	}
	if queued || messages != 1 {
		t.Errorf("second run queued=%v with %d start messages; want admitted with one", queued, messages)
	}
}
