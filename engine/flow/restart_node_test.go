package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
)

// Issue 15, defect 6: an engine restarted under the same node id takes back
// at once the groups its earlier process still leased and the queue claims
// it held, instead of waiting out the lease and the claims' 30 s
// time-to-live.
func TestRestartUnderSameNodeIDReclaimsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"w","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	ctx := context.Background()
	// The earlier process "node-a" leased every group for 30 s, claimed
	// the start messages of two runs, and died.
	if _, err := e.pool.Exec(ctx, `INSERT INTO flow_group (group_id, owner, generation, heartbeat_at, expires_at)
        SELECT g, 'node-a', 7, now(), now() + interval '30 seconds' FROM generate_series(0, $1 - 1) AS g`, testGroups); err != nil {
		t.Fatal(err)
	}
	runs := []*execution.Instance{e.start("w", nil), e.start("w", nil)}
	tag, err := e.pool.Exec(ctx, `UPDATE maestro_queue SET owned_by = 'node-a', owned_until = now() + interval '30 seconds'`)
	if err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("claim the start messages: %v (%d)", err, tag.RowsAffected())
	}
	restarted := time.Now()
	e.engine(flow.Config{NodeID: "node-a", Lease: 30 * time.Second})
	for _, r := range runs {
		if got := e.wait(r, 10*time.Second); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run %d %s", r.InstanceID, got.Status)
		}
	}
	if d := time.Since(restarted); d > 10*time.Second {
		t.Fatalf("runs finished %s after the restart", d)
	}
	var gen int64
	if err := e.pool.QueryRow(ctx, `SELECT min(generation) FROM flow_group WHERE owner = 'node-a'`).Scan(&gen); err != nil || gen <= 7 {
		t.Fatalf("groups not reclaimed with a new generation: %d %v", gen, err)
	}
}
