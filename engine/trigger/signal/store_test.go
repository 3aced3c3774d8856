package signal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// insert stores requests in one transaction, as the broker does.
func insert(t *testing.T, pool *pgxpool.Pool, reqs ...signal.Request) []signal.Inserted {
	t.Helper()
	for i := range reqs {
		if err := reqs[i].Check(); err != nil {
			t.Fatal(err)
		}
	}
	var out []signal.Inserted
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		ins := signal.QueueInsert(b, reqs)
		if err := tx.SendBatch(context.Background(), b).Close(); err != nil {
			return err
		}
		var err error
		out, err = ins.Finish(context.Background(), tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func announce(t *testing.T, pool *pgxpool.Pool, r signal.Request) (*signal.Signal, bool) {
	t.Helper()
	res := insert(t, pool, r)
	return res[0].Signal, res[0].Duplicate
}

// The same request id twice is one signal; without a request id, the same
// name and params are one signal (Maestro's instance id) and other params
// another, also within one batch.
func TestInsertDeduplicatesByInstanceID(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	first, dup := announce(t, pool, signal.Request{Name: "a", RequestID: "r1", Params: map[string]any{"n": int64(1)}})
	if dup || first.Seq == 0 || first.InstanceID != "r1" {
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
	batch := insert(t, pool,
		signal.Request{Name: "a", Params: map[string]any{"n": int64(5)}},
		signal.Request{Name: "a", Params: map[string]any{"n": int64(6)}},
		signal.Request{Name: "a", Params: map[string]any{"n": json.Number("5")}, Payload: map[string]any{"other": "payload"}})
	if batch[0].Duplicate || batch[1].Duplicate || !batch[2].Duplicate || batch[2].Signal.Seq != batch[0].Signal.Seq ||
		batch[0].Signal.Seq == batch[1].Signal.Seq {
		t.Fatalf("batch: %+v %+v %+v", batch[0], batch[1], batch[2])
	}
	if _, dup := announce(t, pool, signal.Request{Name: "a", Params: map[string]any{"n": int64(6)}}); !dup {
		t.Fatal("the same name and params without a request id were a new signal")
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
	if err != nil || got.RequestID != "r1" || got.Params["n"] != int64(1) || got.RequestTime.IsZero() {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.Get(context.Background(), "b", first.Seq); !errors.Is(err, signal.ErrNotFound) {
		t.Fatalf("get under another name: %v", err)
	}
	if _, err := st.Latest(context.Background(), "none"); !errors.Is(err, signal.ErrNotFound) {
		t.Fatalf("latest of an unknown name: %v", err)
	}
}

// Without a request id the instance id is Maestro's: the name-based uuid of
// the request's JSON with sorted params and request_time 0 (values
// computed independently, escaping as Jackson's writer does).
func TestInstanceIDIsMaestros(t *testing.T) {
	t.Parallel()
	r := signal.Request{Name: "table_ready", Params: map[string]any{
		"dt": "2026-11-21", "db": "sales", "rows": json.Number("42"), "w\"x": "a\\b\n\x01é"}}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if got := r.InstanceID(); got != "31fa03be-fe46-346f-9797-acf7e6d17320" {
		t.Errorf("instance id %s", got)
	}
	if got := (&signal.Request{Name: "bare"}).InstanceID(); got != "b28e7949-01d9-35a3-81f3-105973055219" {
		t.Errorf("instance id without params %s", got)
	}
	if got := (&signal.Request{Name: "bare", RequestID: "mine"}).InstanceID(); got != "mine" {
		t.Errorf("instance id with a request id %s", got)
	}
}

// List pages through a name's signals newest first, and filters them with
// match params.
func TestList(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	var seqs []int64
	for i := range 30 {
		s, _ := announce(t, pool, signal.Request{Name: "l", Params: map[string]any{"i": int64(i)}})
		seqs = append(seqs, s.Seq)
	}
	st := signal.NewStore(pool)
	ctx := context.Background()
	page, next, err := st.List(ctx, "l", 0, 10, nil)
	if err != nil || len(page) != 10 || page[0].Seq != seqs[29] || next != seqs[20] {
		t.Fatalf("first page: %d signals, next %d, %v", len(page), next, err)
	}
	page, next, err = st.List(ctx, "l", next, 20, nil)
	if err != nil || len(page) != 20 || page[19].Seq != seqs[0] || next != 0 {
		t.Fatalf("last page: %d signals, next %d, %v", len(page), next, err)
	}
	even, next, err := st.List(ctx, "l", 0, 3, []signal.Match{{Param: "i", Operator: ">=", Value: int64(25)}})
	if err != nil || len(even) != 3 || even[2].Params["i"] != int64(27) || next != even[2].Seq {
		t.Fatalf("filtered: %v next %d %v", even, next, err)
	}
	rest, next, err := st.List(ctx, "l", next, 3, []signal.Match{{Param: "i", Operator: ">=", Value: int64(25)}})
	if err != nil || len(rest) != 2 || next != 0 {
		t.Fatalf("filtered rest: %v next %d %v", rest, next, err)
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
	others := make([]signal.Request, 450)
	for i := range others {
		others[i] = signal.Request{Name: "t", Params: map[string]any{"dt": fmt.Sprintf("2025-%03d", i)}}
	}
	insert(t, pool, others...)
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
	// The signals that met it are its UNBLOCKED lineage, by dependency.
	lin, err := st.LineageOfRun(ctx, "wf", 1, 1, "s")
	if err != nil || len(lin) != 2 || lin[0].Relation != signal.Unblocked || lin[0].Signal.Seq != want.Seq ||
		*lin[0].DependencyIndex != 0 || lin[1].Signal.Name != "u" || *lin[1].DependencyIndex != 1 {
		t.Fatalf("lineage %+v %v", lin, err)
	}
	of, err := st.LineageOfSignal(ctx, want.Seq)
	if err != nil || len(of) != 1 || of[0].StepID != "s" || of[0].AttemptID != 1 {
		t.Fatalf("lineage of the signal %+v %v", of, err)
	}
	refs, err := st.Matched(ctx, key)
	if err != nil || len(refs) != 2 || refs[0].Seq != want.Seq {
		t.Fatalf("matched %+v %v", refs, err)
	}
}
