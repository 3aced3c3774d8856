package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// BenchmarkBackfill10k measures a backfill of 10,000 partitions over REST:
// its creation (POST, every partition stored) and its page (GET with every
// partition and its run, every partition linked to a run). Bars: ≤ 2 s and
// ≤ 1 s (docs/backfill.md).
func BenchmarkBackfill10k(b *testing.B) {
	e := newTestServer(b)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}},
		"workflow":{"id":"big","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(b, http.StatusOK)
	body := `{"param":"N","from":1,"to":10000,"format":"LONG","concurrency":1000}`
	var id string
	b.Run("create", func(b *testing.B) {
		for b.Loop() {
			r := e.send(http.MethodPost, "/api/v3/workflows/big/backfills", "alice", body).expect(b, http.StatusOK)
			id = r.body["backfill_id"].(string)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/create")
	})
	// Link every partition of the last one to a run, as the driver does,
	// 1,000 at a time, the runs ended between passes.
	ctx := context.Background()
	defs := definition.NewStore(e.pool)
	store := backfill.NewStore(e.pool, defs, execution.New(e.pool, defs, 0))
	if _, err := e.pool.Exec(ctx, `UPDATE backfill SET status = 'PAUSED' WHERE backfill_id <> $1`, id); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range 11 {
		if _, err := store.Drive(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `UPDATE workflow_instance SET status = 'SUCCEEDED', queued = false, seq = seq + 1, end_time = now()
            WHERE workflow_id = 'big' AND status = 'CREATED'`); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("10,000 runs started by the driver in %s", time.Since(start).Round(time.Millisecond))
	b.Run("get", func(b *testing.B) {
		var r response
		for b.Loop() {
			r = e.send(http.MethodGet, "/api/v3/backfills/"+id, "", "").expect(b, http.StatusOK)
		}
		if n := len(r.body["partitions"].([]any)); n != 10000 {
			b.Fatalf("%d partitions", n)
		}
		if c := r.body["counts"].(map[string]any)["SUCCEEDED"]; c != float64(10000) {
			b.Fatalf("counts %v", r.body["counts"])
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/get")
	})
}
