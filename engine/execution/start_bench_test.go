package execution

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// BenchmarkConcurrentStarts: 16 clients start runs of one workflow
// (PARALLEL, 100 at once) or of 16 workflows, through Service.Start, as the
// API does (concurrent starts grouped, and, -ungrouped, each in a
// transaction of its own), while a stand-in for the engine ends the started runs every
// 20 ms (so that admission sees a steady number of live runs). Concurrent
// starts of one workflow serialize on its row, so the time the row stays
// locked per start bounds their rate. Reports starts/s and the p50 and p99
// latency of one start, and the statements sent per start (BEGIN and
// COMMIT included; the stand-in engine's one statement every 20 ms too).
func BenchmarkConcurrentStarts(b *testing.B) {
	for _, tc := range []struct {
		name      string
		workflows int
		solo      bool
	}{{"one-workflow", 1, false}, {"16-workflows", 16, false}, {"16-workflows-ungrouped", 16, true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			pool, stmts := dbtest.CountingPool(b)
			defs := definition.NewStore(pool)
			for w := range tc.workflows {
				d, err := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},`+
					`"workflow":{"id":"w%d","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, w)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := defs.Create(ctx, d, "o"); err != nil {
					b.Fatal(err)
				}
			}
			svc := New(pool, defs, 16)
			if tc.solo {
				svc.GroupStarts(false)
			}
			drain, drained := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(drained)
				for {
					select {
					case <-drain:
						return
					case <-time.After(20 * time.Millisecond):
					}
					// seq moves with every write (the stale-write check
					// refuses a write that does not move it).
					if _, err := pool.Exec(ctx, `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now()
						WHERE status = 'CREATED' AND NOT queued`); err != nil && ctx.Err() == nil {
						b.Error(err)
						return
					}
				}
			}()
			defer func() { close(drain); <-drained }()
			const clients = 16
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			stmts.Reset()
			began := time.Now()
			var wg sync.WaitGroup
			next := make(chan int)
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for range next {
						t := time.Now()
						if _, err := svc.Start(ctx, StartRequest{WorkflowID: fmt.Sprintf("w%d", c%tc.workflows), Version: "latest"}); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			for i := 0; i < b.N; i++ {
				next <- i
			}
			close(next)
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()
			// The stand-in engine's statements are counted too: one
			// every 20 ms, a small share.
			b.ReportMetric(float64(stmts.Total())/float64(b.N), "stmts/start")
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "starts/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkBatchStarts: the batch path (time triggers at the top of the
// hour, a signal's fan-out, a backfill) through StartBatch: 1,000 starts
// in one transaction, of 1,000 workflows (a trigger each) or of one
// PARALLEL workflow (a backfill). The time triggers, signal triggers and
// backfills give each start a request id (the trigger's fire, the
// signal's, the backfill's partition), which adds the lookup of stored
// runs with those request ids (run.FindStarted) and an index entry per
// run: the -request-ids cases; the others have none. Between iterations the runs are ended and their
// messages removed, off the clock. Reports runs created per second,
// statements per run and the CPU time per 1,000 runs of this process and
// of PostgreSQL.
func BenchmarkBatchStarts(b *testing.B) {
	const batch = 1000
	for _, tc := range []struct {
		name       string
		workflows  int
		requestIDs bool
	}{{"1000-workflows", batch, false}, {"one-workflow", 1, false}, {"1000-workflows-request-ids", batch, true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			pool, stmts := dbtest.CountingPool(b)
			defs := definition.NewStore(pool)
			for w := range tc.workflows {
				d, err := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":{"rule":"PARALLEL","workflow_concurrency":%d}},`+
					`"workflow":{"id":"w%d","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, batch, w)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := defs.Create(ctx, d, "o"); err != nil {
					b.Fatal(err)
				}
			}
			svc := New(pool, defs, 16)
			starts := make([]BatchStart, batch)
			for i := range starts {
				starts[i] = BatchStart{WorkflowID: fmt.Sprintf("w%d", i%tc.workflows), Version: 1,
					Initiator: map[string]any{"type": "TIME"}}
			}
			var busy, clientCPU, serverCPU time.Duration
			var stmtCount, wal int64
			walls := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for n := range b.N {
				if tc.requestIDs {
					b.StopTimer()
					for i := range starts {
						starts[i].RequestID = fmt.Sprintf("fire-%d-%d", n, i)
					}
					b.StartTimer()
				}
				// The WAL the batch writes (a steadier figure than the
				// CPU on a shared machine), read off the clock.
				var lsn0 int64
				if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&lsn0); err != nil {
					b.Fatal(err)
				}
				stmts.Reset()
				// Reading PostgreSQL's CPU walks /proc (milliseconds on a
				// busy machine): outside the time and this process's CPU.
				s0 := dbtest.ServerCPU()
				c0, t := dbtest.ProcessCPU(), time.Now()
				res, err := svc.StartBatch(ctx, starts)
				if err != nil {
					b.Fatal(err)
				}
				wall := time.Since(t)
				busy += wall
				walls = append(walls, wall)
				clientCPU += dbtest.ProcessCPU() - c0
				serverCPU += dbtest.ServerCPU() - s0
				stmtCount += stmts.Total()
				var lsn1 int64
				if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&lsn1); err != nil {
					b.Fatal(err)
				}
				wal += lsn1 - lsn0
				if testing.Verbose() {
					for sql, d := range stmts.Spent() {
						b.Logf("%8.2f ms  %.100s", float64(d.Microseconds())/1000, sql)
					}
				}
				for _, r := range res {
					if r.Err != nil || r.Queued || r.Status != "CREATED" {
						b.Fatalf("a start of the batch: %+v", r)
					}
				}
				b.StopTimer()
				if _, err := pool.Exec(ctx, `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now() WHERE status = 'CREATED'`); err != nil {
					b.Fatal(err)
				}
				if _, err := pool.Exec(ctx, `DELETE FROM maestro_queue`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*batch)/busy.Seconds(), "runs/s")
			// The median batch's wall time: on a shared machine, a batch
			// another process delayed moves the mean (runs/s), not this.
			slices.Sort(walls)
			b.ReportMetric(float64(walls[len(walls)/2].Microseconds())/1000, "median-ms/batch")
			b.ReportMetric(float64(stmtCount)/float64(b.N*batch), "stmts/run")
			b.ReportMetric(float64(wal)/float64(b.N*batch), "wal-bytes/run")
			// CPU per 1,000 runs, of this process (the batch path's Go
			// side) and of PostgreSQL: less sensitive to a loaded machine
			// than the rate.
			b.ReportMetric(float64(clientCPU.Microseconds())/1000/float64(b.N*batch)*1000, "client-cpu-ms/1k")
			b.ReportMetric(float64(serverCPU.Microseconds())/1000/float64(b.N*batch)*1000, "pg-cpu-ms/1k")
		})
	}
}
