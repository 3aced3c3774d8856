package flow_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// Passivation's figures (docs/performance.md): what a waiting run costs
// once it has left memory, how soon it comes back when due, and how long
// a takeover of many waiting runs takes.

const idleSleepDef = `{"workflow":{"id":"%s","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":%d}}]}}`

// heapStats reads the memory statistics after a collection.
func heapStats() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// BenchmarkPassivatedMemory: memory held per 1,000 runs that each sleep an
// hour in their only step and have been passivated (the real path:
// started, sleeping, idle for PassivateAfter, out of memory), extrapolated
// to 1M. A first 1,000 runs are passivated unmeasured, so that what a
// burst of starts leaves behind whatever the runs (database connections
// opened, spans partly free) is not counted; then the memory a second
// 1,000 adds is measured: live-heap is the bytes of live objects
// (HeapAlloc after a collection), heap-MiB/1k-runs the heap in use
// (HeapInuse, as BenchmarkInFlightMemory reports for the same runs held in
// memory). BenchmarkTakeoverWaiting measures 100,000 and more.
func BenchmarkPassivatedMemory(b *testing.B) {
	const runs = 1000
	e := newEnv(b)
	eng := e.engine(flow.Config{PassivateAfter: time.Second})
	for _, id := range []string{"pas_mem_warm", "pas_mem"} {
		e.push(withStrategy(fmt.Sprintf(idleSleepDef, id, 3600), `{"rule":"PARALLEL","workflow_concurrency":1000}`))
	}
	// passivate starts n runs of wf and waits until the engine holds want
	// passivated runs and none in memory; it keeps the runs' ids alone.
	passivate := func(wf string, n, want int) []int64 {
		ids := make([]int64, n)
		for i := range n {
			ids[i] = e.start(wf, nil).InstanceID
		}
		deadline := time.Now().Add(5 * time.Minute)
		for s := eng.Passivation(); s.Passive < want || s.Live > 0; s = eng.Passivation() {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d runs passivated (%d live)", s.Passive, want, s.Live)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return ids
	}
	var inUse, live float64
	for b.Loop() {
		warm := passivate("pas_mem_warm", runs, runs)
		before := heapStats()
		measured := passivate("pas_mem", runs, 2*runs)
		after := heapStats()
		inUse = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / (1 << 20) / (runs / 1000)
		live = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (runs / 1000)
		for wf, ids := range map[string][]int64{"pas_mem_warm": warm, "pas_mem": measured} {
			if _, err := e.runs.ActOnAll(context.Background(), wf, run.ActionStop); err != nil {
				b.Fatal(err)
			}
			for _, id := range ids {
				e.wait(&execution.Instance{WorkflowID: wf, InstanceID: id, RunID: 1}, 2*time.Minute)
			}
		}
	}
	b.ReportMetric(inUse, "heap-MiB/1k-runs")
	b.ReportMetric(live/1024, "live-heap-KiB/1k-runs")
	b.ReportMetric(live*1000/(1<<20), "live-heap-MiB/1M-runs")
}

// BenchmarkWakeLatency: runs sleep 5 s in a step, 200 per round, started
// one after the other so that their wake-ups spread. For runs passivated
// meanwhile, wake-p50/p99 is the time from the wake time the engine stored
// for the run to the step's SUCCEEDED transition. due-p50/p99, for them
// and for runs held in memory, is the time from when the sleep is over by
// the step's stored start time to that transition (the stored start time
// precedes the one the in-memory actor counts from by its write).
func BenchmarkWakeLatency(b *testing.B) {
	for _, mode := range []struct {
		name  string
		after time.Duration
	}{{"passivated", 300 * time.Millisecond}, {"in-memory", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			const runs, sleep = 200, 5
			e := newEnv(b)
			rec := &recorder{times: map[string]time.Time{}}
			eng := e.engine(flow.Config{PassivateAfter: mode.after, Observer: rec.observe})
			e.push(withStrategy(fmt.Sprintf(idleSleepDef, "pas_wake", sleep), `{"rule":"PARALLEL","workflow_concurrency":1000}`))
			var wake, due []time.Duration
			var woken int64
			for b.Loop() {
				a0 := eng.Passivation().Activations
				insts := make([]*execution.Instance, runs)
				for i := range runs {
					insts[i] = e.start("pas_wake", nil)
				}
				wakes := map[int64]time.Time{}
				if mode.after > 0 {
					deadline := time.Now().Add(sleep * time.Second)
					for eng.Passivation().Passive < runs && time.Now().Before(deadline) {
						time.Sleep(5 * time.Millisecond)
					}
					rows, err := e.pool.Query(context.Background(), `SELECT instance_id, passive_wake_at FROM workflow_instance
                        WHERE workflow_id = 'pas_wake' AND passive_wake_at IS NOT NULL`)
					if err != nil {
						b.Fatal(err)
					}
					for rows.Next() {
						var id int64
						var at time.Time
						if err := rows.Scan(&id, &at); err != nil {
							b.Fatal(err)
						}
						wakes[id] = at
					}
					if rows.Err() != nil {
						b.Fatal(rows.Err())
					}
				}
				for _, inst := range insts {
					got := e.wait(inst, 2*time.Minute)
					if got.Status != instance.WorkflowSucceeded {
						b.Fatalf("run %s", got.Status)
					}
					var started time.Time
					if err := e.pool.QueryRow(context.Background(), `SELECT start_time FROM step_instance
                        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = 'nap'`,
						got.WorkflowID, got.InstanceID, got.RunID).Scan(&started); err != nil {
						b.Fatal(err)
					}
					// The Observer hears of the write once the writer has
					// finished it, which may be just after the run's row shows
					// it over.
					ref := run.Ref{WorkflowID: got.WorkflowID, InstanceID: got.InstanceID, RunID: got.RunID}
					var done time.Time
					flowtest.WaitFor(b, 10*time.Second, "the SUCCEEDED transition observed", func() bool {
						var ok bool
						done, ok = rec.at(ref, "nap", instance.StepSucceeded)
						return ok
					})
					due = append(due, done.Sub(started.Add(sleep*time.Second)))
					if at, ok := wakes[got.InstanceID]; ok {
						wake = append(wake, done.Sub(at))
					}
				}
				woken += eng.Passivation().Activations - a0
			}
			if len(wake) > 0 {
				b.ReportMetric(ms(percentile(wake, 0.5)), "wake-p50-ms")
				b.ReportMetric(ms(percentile(wake, 0.99)), "wake-p99-ms")
			}
			b.ReportMetric(ms(percentile(due, 0.5)), "due-p50-ms")
			b.ReportMetric(ms(percentile(due, 0.99)), "due-p99-ms")
			b.ReportMetric(float64(woken)/float64(len(due)), "woken-from-passive/run")
		})
	}
}

// BenchmarkTakeoverWaiting: a node takes over groups holding N passivated
// runs (N = MAESTRO_BENCH_PASSIVE_RUNS, default 10,000; make bench runs
// 100,000 once), created in bulk with SQL as copies of one run that was
// passivated for real (its row and its step's row). Reported: the time from
// the engine's start to every run being in its wake index, the live heap
// (HeapAlloc after a collection) and resident memory that added, per run,
// and the resident memory extrapolated to 1M.
func BenchmarkTakeoverWaiting(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("MAESTRO_BENCH_PASSIVE_RUNS")); err == nil && v > 0 {
		n = v
	}
	e := newEnv(b)
	ctx := context.Background()
	first := e.engine(flow.Config{NodeID: "first", PassivateAfter: 200 * time.Millisecond})
	e.push(withStrategy(fmt.Sprintf(idleSleepDef, "pas_takeover", 30*24*3600), `{"rule":"PARALLEL","workflow_concurrency":1}`))
	tpl := e.start("pas_takeover", nil)
	deadline := time.Now().Add(time.Minute)
	for first.Passivation().Passive < 1 {
		if time.Now().After(deadline) {
			b.Fatal("the template run never passivated")
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Stop()
	t0 := time.Now()
	e.cloneRun(tpl, "workflow_instance", map[string]string{"instance_id": "$2 + g", "uuid": "gen_random_uuid()",
		"group_id": fmt.Sprintf("g %% %d", testGroups), "request_id": "NULL"}, n)
	e.cloneRun(tpl, "step_instance", map[string]string{"instance_id": "$2 + g", "uuid": "gen_random_uuid()"}, n)
	if _, err := e.pool.Exec(ctx, `VACUUM ANALYZE workflow_instance`); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d passivated runs in %s", n, time.Since(t0))
	want := n + 1
	var took time.Duration
	var heapPer, rssPer float64
	round := 0
	for b.Loop() {
		round++
		heap0, rss0 := heapStats().HeapAlloc, residentBytes()
		start := time.Now()
		eng := e.engine(flow.Config{NodeID: fmt.Sprintf("taker-%d", round)})
		deadline := time.Now().Add(10 * time.Minute)
		for s := eng.Passivation(); s.Passive < want; s = eng.Passivation() {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d runs enumerated (%d live)", s.Passive, want, s.Live)
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = time.Since(start)
		if s := eng.Passivation(); s.Live != 0 || s.Activations != 0 {
			b.Fatalf("the takeover rebuilt runs: %+v", s)
		}
		heapPer = float64(int64(heapStats().HeapAlloc)-int64(heap0)) / float64(want)
		rssPer = float64(int64(residentBytes())-int64(rss0)) / float64(want)
		eng.Stop()
	}
	b.ReportMetric(float64(want), "runs")
	b.ReportMetric(took.Seconds(), "takeover-s")
	b.ReportMetric(took.Seconds()*1e6/float64(want), "takeover-s/1M-runs")
	b.ReportMetric(heapPer, "heap-B/run")
	b.ReportMetric(rssPer, "rss-B/run")
	b.ReportMetric(rssPer*1e6/(1<<20), "rss-MiB/1M-runs")
	b.ReportMetric(float64(residentBytes())/(1<<20), "rss-MiB")
}

// cloneRun inserts n copies of the run's rows of table (instance ids after
// the run's), with the columns in set computed as given (g is the copy's
// number, $2 the run's instance id).
func (e *env) cloneRun(tpl *execution.Instance, table string, set map[string]string, n int) {
	e.t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, `SELECT column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		e.t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = c
		if x, ok := set[c]; ok {
			exprs[i] = x
		}
	}
	q := fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM %s, generate_series(1, $4::bigint) AS g
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
		table, strings.Join(cols, ", "), strings.Join(exprs, ", "), table)
	if _, err := e.pool.Exec(ctx, q, tpl.WorkflowID, tpl.InstanceID, tpl.RunID, n); err != nil {
		e.t.Fatalf("clone %s: %v", table, err)
	}
}
