package retention_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/retention"
)

// stepsPerOldRun is how many step attempts each loaded run has.
const stepsPerOldRun = 10

// loadOldRuns writes runs ended 100 days ago of a deactivated workflow
// "old", with stepsPerOldRun step rows each, in one INSERT ... SELECT per
// chunk (what years of history look like to the tables).
func loadOldRuns(b *testing.B, env *flowtest.Env, steps int) {
	b.Helper()
	ctx := context.Background()
	env.Push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"old","steps":[
	  {"step":{"id":"s","type":"NoOp"}}]}}`)
	if _, err := env.Defs.Deactivate(ctx, "old", definition.Actor{Name: "tester"}); err != nil {
		b.Fatal(err)
	}
	runs := steps / stepsPerOldRun
	const chunk = 50_000
	for lo := 1; lo <= runs; lo += chunk {
		hi := min(lo+chunk-1, runs)
		if _, err := env.Pool.Exec(ctx, `
INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid, group_count, group_id, status,
    definition, timeout_seconds, create_time, start_time, end_time, modify_time, timeline)
SELECT 'old', i, 1, 1, gen_random_uuid(), 4, i % 4, 'SUCCEEDED', '{"id":"old","steps":[]}'::jsonb, 0,
    now() - interval '100 days' - make_interval(secs => i), now() - interval '100 days' - make_interval(secs => i),
    now() - interval '100 days' - make_interval(secs => i), now() - interval '100 days',
    '[{"type":"LOG","message":"Workflow instance status is updated to [SUCCEEDED]"}]'::jsonb
FROM generate_series($1::bigint, $2::bigint) i`, lo, hi); err != nil {
			b.Fatal(err)
		}
		if _, err := env.Pool.Exec(ctx, `
INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, seq, step_type,
    params, outputs, timeline, create_time, start_time, end_time)
SELECT 'old', i, 1, 'step' || s, 1, gen_random_uuid(), 'SUCCEEDED', 3, 'NoOp',
    '{"n":{"type":"LONG","value":1}}'::jsonb, '{}'::jsonb,
    '[{"type":"LOG","message":"Step status changed to RUNNING"},{"type":"LOG","message":"Step status changed to SUCCEEDED"}]'::jsonb,
    now() - interval '100 days', now() - interval '100 days', now() - interval '100 days'
FROM generate_series($1::bigint, $2::bigint) i, generate_series(1, $3::int) s`, lo, hi, stepsPerOldRun); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE workflow SET latest_instance_id = $1 WHERE workflow_id = 'old'`, runs); err != nil {
		b.Fatal(err)
	}
	// Settle what the load left behind (the visibility map, statistics,
	// gigabytes of dirty pages) so that the first phase does not pay for it.
	for _, sql := range []string{`VACUUM ANALYZE workflow_instance, step_instance`, `CHECKPOINT`} {
		if _, err := env.Pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
}

// hotFigures are the hot path's figures over one phase: runs of a
// three-step workflow started by 8 callers at once.
type hotFigures struct {
	runsPerSec       float64
	p50, p99         time.Duration // a run's create to end
	readP50, readP99 time.Duration // GET of a run (execution.Detail)
}

func hotPhase(b *testing.B, env *flowtest.Env, runs int) hotFigures {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var mu sync.Mutex
	var started []*execution.Instance
	var reads []time.Duration
	t0 := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(runs) {
				res, err := env.Runs.Start(ctx, execution.StartRequest{WorkflowID: "hot", Version: "latest"})
				if err != nil {
					b.Error(err)
					return
				}
				r0 := time.Now()
				if _, err := env.Runs.Detail(ctx, "hot", res.Instance.InstanceID, 0); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(r0)
				mu.Lock()
				started, reads = append(started, res.Instance), append(reads, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var lat []time.Duration
	for _, inst := range started {
		got := env.Wait(inst, 5*time.Minute)
		lat = append(lat, got.EndTime.Sub(got.CreateTime))
	}
	wall := time.Since(t0)
	slices.Sort(lat)
	slices.Sort(reads)
	pct := func(s []time.Duration, p float64) time.Duration { return s[min(len(s)-1, int(float64(len(s))*p))] }
	return hotFigures{runsPerSec: float64(len(lat)) / wall.Seconds(), p50: pct(lat, 0.5), p99: pct(lat, 0.99),
		readP50: pct(reads, 0.5), readP99: pct(reads, 0.99)}
}

func tableBytes(b *testing.B, env *flowtest.Env, table string) int64 {
	var n int64
	if err := env.Pool.QueryRow(context.Background(), `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkArchiveUnderLoad measures the hot path (runs of a three-step
// workflow: their throughput and create-to-end latency, and the latency of
// GET of a run) on a database holding MAESTRO_BENCH_ARCHIVE_STEPS step rows
// of old runs (e.g. 10000000), first alone and then while the archiver
// archives those runs, and the archiver's own rate. It takes minutes, so it
// runs only when MAESTRO_BENCH_ARCHIVE_STEPS is set (make bench sets it).
func BenchmarkArchiveUnderLoad(b *testing.B) {
	steps, _ := strconv.Atoi(os.Getenv("MAESTRO_BENCH_ARCHIVE_STEPS"))
	if steps < stepsPerOldRun {
		b.Skip("set MAESTRO_BENCH_ARCHIVE_STEPS=<step rows> (e.g. 10000000) to run (minutes)")
	}
	hotRuns := 400
	if v, _ := strconv.Atoi(os.Getenv("MAESTRO_BENCH_ARCHIVE_HOT_RUNS")); v > 0 {
		hotRuns = v
	}
	env := flowtest.New(b)
	env.Engine(nil, flow.Config{})
	env.Push(`{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}},
	  "workflow":{"id":"hot","steps":[{"step":{"id":"a","type":"NoOp"}},{"step":{"id":"b","type":"NoOp"}},{"step":{"id":"c","type":"NoOp"}}]}}`)
	l0 := time.Now()
	loadOldRuns(b, env, steps)
	b.Logf("loaded %d step rows (%d runs) in %s; step_instance %d MiB", steps, steps/stepsPerOldRun,
		time.Since(l0).Round(time.Second), tableBytes(b, env, "step_instance")>>20)
	dir, err := archive.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	batch, _ := strconv.Atoi(os.Getenv("MAESTRO_BENCH_ARCHIVE_BATCH"))
	a, err := retention.New(env.Pool, dir, retention.Config{Retention: 30 * 24 * time.Hour, BatchSize: batch, Logger: flowtest.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	hotPhase(b, env, 50) // warm up the engine and the caches
	b.ResetTimer()

	before := hotPhase(b, env, hotRuns)

	// The archiver, in passes back to back, while the same load runs.
	ctx, cancel := context.WithCancel(context.Background())
	var archived, archivedSteps atomic.Int64
	left0 := oldSteps(b, env)
	done := make(chan struct{})
	a0 := time.Now()
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			res, err := a.Run(ctx)
			archived.Add(res.Runs)
			archivedSteps.Add(res.Steps)
			if err != nil {
				if ctx.Err() == nil {
					b.Error(err)
				}
				return
			}
			if !res.More {
				return
			}
		}
	}()
	during := hotPhase(b, env, hotRuns)
	duringSteps, duringWall := left0-oldSteps(b, env), time.Since(a0)
	// Let the archiver finish (or give up after 30 minutes) for its rate.
	select {
	case <-done:
	case <-time.After(30 * time.Minute):
	}
	cancel()
	<-done
	total := time.Since(a0)
	b.StopTimer()

	b.ReportMetric(before.runsPerSec, "runs/s-before")
	b.ReportMetric(during.runsPerSec, "runs/s-while-archiving")
	b.ReportMetric(float64(before.p50.Milliseconds()), "ms-run-p50-before")
	b.ReportMetric(float64(during.p50.Milliseconds()), "ms-run-p50-while-archiving")
	b.ReportMetric(float64(before.p99.Milliseconds()), "ms-run-p99-before")
	b.ReportMetric(float64(during.p99.Milliseconds()), "ms-run-p99-while-archiving")
	b.ReportMetric(float64(before.readP99.Microseconds())/1000, "ms-get-p99-before")
	b.ReportMetric(float64(during.readP99.Microseconds())/1000, "ms-get-p99-while-archiving")
	b.ReportMetric(float64(duringSteps)/duringWall.Seconds(), "archived-steps/s-under-load")
	b.ReportMetric(float64(archivedSteps.Load())/total.Seconds(), "archived-steps/s")
	b.Logf("%s", fmt.Sprintf("archived %d runs, %d step rows in %s; left: %d step rows; step_instance now %d MiB",
		archived.Load(), archivedSteps.Load(), total.Round(time.Second),
		countRows(b, env), tableBytes(b, env, "step_instance")>>20))
	b.Logf("before: %+v", before)
	b.Logf("while archiving: %+v", during)
}

// oldSteps counts the step rows of the loaded runs still in the database.
func oldSteps(b *testing.B, env *flowtest.Env) int64 {
	var n int64
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM step_instance WHERE workflow_id = 'old'`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

func countRows(b *testing.B, env *flowtest.Env) int64 {
	var n int64
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM step_instance`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
