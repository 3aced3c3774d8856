package signal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/signal"
)

func announce(t *testing.T, pool *pgxpool.Pool, r signal.Request) (*signal.Signal, bool) {
	t.Helper()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	var (
		s   *signal.Signal
		dup bool
	)
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		s, dup, err = signal.Insert(context.Background(), tx, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, dup
}

// The same request id twice is one signal; without a request id every
// announcement is a new signal.
func TestInsertDeduplicatesByRequestID(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	first, dup := announce(t, pool, signal.Request{Name: "a", RequestID: "r1", Params: map[string]any{"n": int64(1)}})
	if dup || first.Seq == 0 {
		t.Fatalf("first announcement: %+v dup=%v", first, dup)
	}
	again, dup := announce(t, pool, signal.Request{Name: "a", RequestID: "r1", Params: map[string]any{"n": int64(2)}})
	if !dup || again.Seq != first.Seq || again.Params["n"] != int64(1) {
		t.Fatalf("repeat: %+v dup=%v, want the first signal", again, dup)
	}
	// The request id is per name.
	if other, dup := announce(t, pool, signal.Request{Name: "b", RequestID: "r1"}); dup || other.Seq == first.Seq {
		t.Fatalf("same request id, other name: %+v dup=%v", other, dup)
	}
	for range 2 {
		if _, dup := announce(t, pool, signal.Request{Name: "a"}); dup {
			t.Fatal("an announcement without request id was a duplicate")
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM signal_instance WHERE name = 'a'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d signals named a (err %v), want 3", n, err)
	}
	st := signal.NewStore(pool)
	latest, err := st.Latest(context.Background(), "a")
	if err != nil || latest.Seq <= first.Seq {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	got, err := st.Get(context.Background(), "a", first.Seq)
	if err != nil || got.RequestID != "r1" || got.Params["n"] != int64(1) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.Get(context.Background(), "b", first.Seq); !errors.Is(err, signal.ErrNotFound) {
		t.Fatalf("get under another name: %v", err)
	}
	if _, err := st.Latest(context.Background(), "none"); !errors.Is(err, signal.ErrNotFound) {
		t.Fatalf("latest of an unknown name: %v", err)
	}
}

// Check finds the newest matching signal even when many newer ones do not
// match (more than one page), and reports an unmet dependency.
func TestCheckMatchesAcrossPages(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
        group_count, group_id, status, definition, timeout_seconds)
        VALUES ('wf', 1, 1, 1, gen_random_uuid(), 4, 0, 'IN_PROGRESS', '{}', 60)`); err != nil {
		t.Fatal(err)
	}
	want, _ := announce(t, pool, signal.Request{Name: "t", Params: map[string]any{"dt": "2026-11-21"}})
	for i := range 450 {
		announce(t, pool, signal.Request{Name: "t", Params: map[string]any{"dt": fmt.Sprintf("2025-%03d", i)}})
	}
	key := signal.WaitKey{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "s", AttemptID: 1}
	deps := []signal.Dependency{
		{Name: "t", Matches: []signal.Match{{Param: "dt", Operator: "=", Value: "2026-11-21"}}},
		{Name: "u"},
	}
	st := signal.NewStore(pool)
	res, err := st.Check(ctx, key, 0, deps)
	if err != nil {
		t.Fatal(err)
	}
	if res.Met || res.Matched[0] == nil || res.Matched[0].Seq != want.Seq || res.Matched[1] != nil || res.Since.IsZero() {
		t.Fatalf("check: %+v", res)
	}
	announce(t, pool, signal.Request{Name: "u"})
	again, err := st.Check(ctx, key, 0, deps)
	if err != nil || !again.Met || !again.Since.Equal(res.Since) {
		t.Fatalf("second check: %+v %v; want met, same start of waiting", again, err)
	}
}
