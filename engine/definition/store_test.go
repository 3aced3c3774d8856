package definition_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func decode(t testing.TB, id, variant string, extra string) *workflow.Definition {
	t.Helper()
	d, err := workflow.DecodeJSON(fmt.Appendf(nil, `{%s"workflow": {"id": %q, "description": %q,
	    "steps": [{"step": {"id": "a", "type": "NoOp", "transition": {"successors": {"b": "true"}}}}, {"step": {"id": "b", "type": "NoOp"}}]}}`,
		extra, id, variant))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCreateAndGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := definition.NewStore(dbtest.Pool(t))
	c, err := s.Create(ctx, decode(t, "wf", "one", `"properties": {"owner": "alice"},`), "carol")
	if err != nil {
		t.Fatal(err)
	}
	if !c.New || !c.Activated || !c.PropertiesChanged || c.Version.Version != 1 || !c.Version.Active ||
		c.Version.CreatedBy != "carol" || c.Version.Snapshot == nil || c.Version.Snapshot.Version != 1 {
		t.Fatalf("create: %+v %+v", c, c.Version)
	}
	// carol gave the workflow to alice: only alice may push it now.
	if _, err := s.Create(ctx, decode(t, "wf", "one", ""), "carol"); !errors.Is(err, definition.ErrForbidden) {
		t.Fatalf("push by a non-owner: %v", err)
	}
	c, err = s.Create(ctx, decode(t, "wf", "one", ""), "alice")
	if err != nil || c.New || c.Activated || c.PropertiesChanged || c.Version.Version != 1 || c.Version.CreatedBy != "carol" {
		t.Fatalf("unchanged push: %+v %v", c, err)
	}
	if _, err := s.Create(ctx, decode(t, "wf", "two", `"is_active": false,`), "alice"); err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]int64{"": 1, "default": 1, "active": 1, "latest": 2, "2": 2} {
		v, err := s.Get(ctx, "wf", sel)
		if err != nil || v.Version != want {
			t.Fatalf("Get(%q) = %v, %v; want version %d", sel, v, err, want)
		}
		if v.Workflow.ID != "wf" || len(v.Workflow.Steps) != 2 || v.LatestVersion != 2 || *v.ActiveVersion != 1 ||
			v.Active != (want == 1) || string(v.Properties) != `{"owner": "alice"}` {
			t.Fatalf("Get(%q) = %+v", sel, v)
		}
	}
	for sel, want := range map[string]error{"3": definition.ErrNotFound, "x": definition.ErrInvalidSelector, "0": definition.ErrInvalidSelector} {
		if _, err := s.Get(ctx, "wf", sel); !errors.Is(err, want) {
			t.Errorf("Get(%q): %v, want %v", sel, err, want)
		}
	}
	if _, err := s.Get(ctx, "nope", "latest"); !errors.Is(err, definition.ErrNotFound) {
		t.Errorf("unknown workflow: %v", err)
	}
}

func TestConcurrentCreatesNumberWithoutGaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := definition.NewStore(dbtest.Pool(t))
	const n = 20
	got := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := s.Create(ctx, decode(t, "wf", fmt.Sprint(i), ""), "alice")
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = c.Version.Version
		})
	}
	wg.Wait()
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("versions %v", got)
		}
	}
}

func addRuns(t testing.TB, pool *pgxpool.Pool, workflowID string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
        group_count, group_id, status, definition, timeout_seconds)
        SELECT $1, i, 1, 1, gen_random_uuid(), 8, 0, 'SUCCEEDED', '{}', 60 FROM generate_series(1, $2) i`, workflowID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, step_type)
        SELECT $1, i, 1, 'a', 1, gen_random_uuid(), 'SUCCEEDED', 'NoOp' FROM generate_series(1, $2) i`, workflowID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE workflow SET latest_instance_id = $2 WHERE workflow_id = $1`, workflowID, n); err != nil {
		t.Fatal(err)
	}
}

func count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProcessDeleteIsBatchedAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := definition.NewStore(pool, definition.WithInlineDeleteLimit(5), definition.WithDeleteBatchSize(3))
	if _, err := s.Create(ctx, decode(t, "wf", "x", ""), "alice"); err != nil {
		t.Fatal(err)
	}
	addRuns(t, pool, "wf", 11)
	if _, err := s.Delete(ctx, "wf", definition.Actor{Name: "bob"}); !errors.Is(err, definition.ErrForbidden) {
		t.Fatalf("non-owner delete: %v", err)
	}
	d, err := s.Delete(ctx, "wf", definition.Actor{Name: "alice"})
	if err != nil || d.Status != definition.StatusDeleting {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, err := s.Create(ctx, decode(t, "wf", "x", ""), "alice"); !errors.Is(err, definition.ErrDeleting) {
		t.Fatalf("push during deletion: %v", err)
	}
	var payload []byte
	if err := pool.QueryRow(ctx, `SELECT payload FROM maestro_queue WHERE queue_id = 5`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	// Two deliveries at once, then a late third.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if err := s.ProcessDelete(ctx, payload); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := s.ProcessDelete(ctx, payload); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM workflow_instance`) + count(t, pool, `SELECT count(*) FROM step_instance`); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM workflow_timeline WHERE event->>'type' = $1`, definition.EventDeleteCompleted); n != 1 {
		t.Fatalf("%d completion events", n)
	}
	// The id is free again; replaying the old message leaves the new
	// workflow's runs alone.
	if _, err := s.Create(ctx, decode(t, "wf", "x", ""), "alice"); err != nil {
		t.Fatal(err)
	}
	addRuns(t, pool, "wf", 2)
	if err := s.ProcessDelete(ctx, payload); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'wf'`); n != 2 {
		t.Fatalf("a stale message deleted %d new runs", 2-n)
	}
	for _, bad := range []string{`nonsense`, `{}`, `{"workflow_id": "wf", "deletion_id": "not-a-uuid"}`} {
		if err := s.ProcessDelete(ctx, []byte(bad)); !errors.Is(err, definition.ErrBadPayload) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestDeleteInlineAtTheLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := definition.NewStore(pool, definition.WithInlineDeleteLimit(4))
	if _, err := s.Create(ctx, decode(t, "wf", "x", ""), "alice"); err != nil {
		t.Fatal(err)
	}
	addRuns(t, pool, "wf", 4)
	d, err := s.Delete(ctx, "wf", definition.Actor{Name: "root", Admin: true})
	if err != nil || d.Status != definition.StatusDeleted || d.DeletedRuns != 4 {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM maestro_queue`); n != 0 {
		t.Fatalf("inline delete queued %d messages", n)
	}
}

// TestDeleteTakesInlineRunsAlong: deleting a workflow deletes the runs of
// its foreach and while iterations (ids "wf:…"), inline or through the
// queue, and leaves a workflow whose id merely starts the same alone.
func TestDeleteTakesInlineRunsAlong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit int
	}{{"inline", 100}, {"queued", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			s := definition.NewStore(pool, definition.WithInlineDeleteLimit(tc.limit), definition.WithDeleteBatchSize(2))
			for _, id := range []string{"wf", "wfx"} {
				if _, err := s.Create(ctx, decode(t, id, "x", ""), "alice"); err != nil {
					t.Fatal(err)
				}
				addRuns(t, pool, id, 2)
			}
			addRuns(t, pool, "wf:1:loop", 3)      // foreach iterations
			addRuns(t, pool, "wf:1:loop:2:in", 2) // nested foreach
			addRuns(t, pool, "wf:w", 2)           // while iterations
			addRuns(t, pool, "wfx:1:loop", 2)
			if _, err := s.Delete(ctx, "wf", definition.Actor{Name: "alice"}); err != nil {
				t.Fatal(err)
			}
			var payload []byte
			if err := pool.QueryRow(ctx, `SELECT payload FROM maestro_queue WHERE queue_id = 5`).Scan(&payload); err == nil {
				if err := s.ProcessDelete(ctx, payload); err != nil {
					t.Fatal(err)
				}
			}
			var left []string
			rows, err := pool.Query(ctx, `SELECT DISTINCT workflow_id FROM workflow_instance ORDER BY 1`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				left = append(left, id)
			}
			rows.Close()
			if got := strings.Join(left, " "); got != "wfx wfx:1:loop" {
				t.Errorf("runs left of %q, want only wfx's", got)
			}
		})
	}
}
