package execution

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
)

// Listings stay within MaxListBytes however large each run's params are
// (up to 750 KB): an instance page ends early with a cursor that goes on,
// and a step list leaves out the detail of the attempts past the bound.
func TestListingsStayWithinTheirBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	big := `{"blob": {"type": "STRING", "value": "` + strings.Repeat("b", 700_000) + `"}}`
	if _, err := pool.Exec(ctx, `INSERT INTO workflow (workflow_id, owner, created_by) VALUES ('wf', 'a', 'a')`); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		if _, err := pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
            group_count, group_id, status, definition, params, timeout_seconds)
            VALUES ('wf', $1, 1, 1, gen_random_uuid(), 4, 0, 'SUCCEEDED', '{}', $2, 3600)`, i, big); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id,
            uuid, status, step_type, params) VALUES ('wf', 1, 1, $1, 1, gen_random_uuid(), 'SUCCEEDED', 'NoOp', $2)`,
			fmt.Sprintf("s%02d", i), big); err != nil {
			t.Fatal(err)
		}
	}
	svc := New(pool, definition.NewStore(pool), 4)
	// Pages of up to 100 instances, each going on below the last one read
	// (as Maestro's pagination does with end_cursor).
	seen := map[int64]bool{}
	high := int64(12)
	for pages := 0; high >= 1; pages++ {
		items, err := svc.InstancesBetween(ctx, "wf", max(1, high-99), high)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, inst := range items {
			seen[inst.InstanceID] = true
			size += inst.size()
		}
		if len(items) == 0 || size > MaxListBytes+800_000 || pages > 12 {
			t.Fatalf("page of %d runs holds %d bytes", len(items), size)
		}
		high = items[len(items)-1].InstanceID - 1
	}
	if len(seen) != 12 {
		t.Fatalf("the pages listed %d of 12 runs", len(seen))
	}
	steps, err := svc.Steps(ctx, "wf", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	omitted := 0
	for _, s := range steps {
		if s.DetailOmitted {
			omitted++
			if s.Params != nil {
				t.Fatalf("step %s: detail omitted but params kept", s.StepID)
			}
		}
	}
	if len(steps) != 12 || omitted == 0 || omitted == 12 {
		t.Fatalf("%d steps, %d without detail", len(steps), omitted)
	}
}
