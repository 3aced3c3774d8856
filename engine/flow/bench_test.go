package flow_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/alert"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// chainJSON is a chain of n NoOp steps.
func chainJSON(id string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"workflow":{"id":%q,"steps":[`, id)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		if i < n-1 {
			fmt.Fprintf(&b, `{"step":{"id":"s%d","type":"NoOp","transition":{"successors":{"s%d":"true"}}}}`, i, i+1)
		} else {
			fmt.Fprintf(&b, `{"step":{"id":"s%d","type":"NoOp"}}`, i)
		}
	}
	b.WriteString("]}}")
	return b.String()
}

// recorder keeps the time each step reached each status.
type recorder struct {
	mu    sync.Mutex
	times map[string]time.Time // ref|step|status
}

func (r *recorder) observe(ref run.Ref, step string, _ int64, st instance.StepStatus, at time.Time) {
	r.mu.Lock()
	r.times[fmt.Sprintf("%s|%s|%s", ref, step, st)] = at
	r.mu.Unlock()
}

func (r *recorder) at(ref run.Ref, step string, st instance.StepStatus) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.times[fmt.Sprintf("%s|%s|%s", ref, step, st)]
	return t, ok
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkStepLaunchOverhead: on a 100-step NoOp chain, the time from a
// step's predecessor being terminal (written) to the step being RUNNING
// (written). Target: p50 <= 5 ms, p99 <= 20 ms.
func BenchmarkStepLaunchOverhead(b *testing.B) {
	e := newEnv(b)
	rec := &recorder{times: map[string]time.Time{}}
	e.engine(flow.Config{Observer: rec.observe})
	e.push(chainJSON("chain100", 100))
	var gaps []time.Duration
	b.ResetTimer()
	for b.Loop() {
		inst := e.wait(e.start("chain100", nil), 2*time.Minute)
		ref := run.Ref{WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID, RunID: inst.RunID}
		for i := 1; i < 100; i++ {
			done, ok1 := rec.at(ref, fmt.Sprintf("s%d", i-1), instance.StepSucceeded)
			running, ok2 := rec.at(ref, fmt.Sprintf("s%d", i), instance.StepRunning)
			if ok1 && ok2 {
				gaps = append(gaps, running.Sub(done))
			}
		}
	}
	b.ReportMetric(ms(percentile(gaps, 0.5)), "p50-launch-ms")
	b.ReportMetric(ms(percentile(gaps, 0.99)), "p99-launch-ms")
}

// BenchmarkWorkflowStartOverhead: start request accepted -> first step
// RUNNING. Target: p50 <= 10 ms.
func BenchmarkWorkflowStartOverhead(b *testing.B) {
	e := newEnv(b)
	rec := &recorder{times: map[string]time.Time{}}
	e.engine(flow.Config{Observer: rec.observe})
	e.push(chainJSON("one", 1))
	var gaps []time.Duration
	b.ResetTimer()
	for b.Loop() {
		inst := e.start("one", nil)
		accepted := time.Now() // the start response is in the client's hands
		e.wait(inst, time.Minute)
		ref := run.Ref{WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID, RunID: inst.RunID}
		if running, ok := rec.at(ref, "s0", instance.StepRunning); ok {
			gaps = append(gaps, running.Sub(accepted))
		}
	}
	b.ReportMetric(ms(percentile(gaps, 0.5)), "p50-start-ms")
	b.ReportMetric(ms(percentile(gaps, 0.99)), "p99-start-ms")
}

// BenchmarkThroughput: many concurrent runs of 10-step NoOp chains on one
// engine, with event publishing on (every status change recorded in its
// write, a forwarder delivering the events and the alerting service reading
// them, as in production) and off, side by side. Target: >= 1,000 steps/s
// sustained; publishing costs at most 10 %. Reports
//   - sustained-steps/s: the engine's rate while it is busy, from 10% to
//     90% of the steps done (the ramp-up, when the API is still creating
//     runs, and the tail, when few runs are left, are excluded);
//   - steps/s: end to end, from the first start request to the last step;
//   - cpu-s/1k-steps: CPU of this process (engine and API) per 1,000 steps;
//   - db-cpu-s/1k-steps: CPU of the PostgreSQL server per 1,000 steps (on
//     a 2-core machine both share, the sum bounds the throughput);
//   - events/s: events the forwarder delivered per second (events=on);
//   - wal-syncs/step, wal-bytes/step: WAL flushes to disk (what a durable
//     commit waits for) and WAL written per step, the cluster's (run it
//     alone).
func BenchmarkThroughput(b *testing.B) {
	b.Run("events=off", func(b *testing.B) { benchThroughput(b, false, 0) })
	b.Run("events=on", func(b *testing.B) { benchThroughput(b, true, 0) })
}

// BenchmarkWriterPipelines: BenchmarkThroughput (events off) with one and
// with two of the writer's transactions in flight at once (the pipelined
// writer, docs/performance.md).
func BenchmarkWriterPipelines(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("pipelines=%d", n), func(b *testing.B) { benchThroughput(b, false, n) })
	}
}

func benchThroughput(b *testing.B, events bool, pipelines int) {
	const runs, steps = 200, 10
	e := newEnv(b)
	var mu sync.Mutex
	var done []time.Time
	var delivered atomic.Int64
	cfg := flow.Config{WriterPipelines: pipelines, Observer: func(_ run.Ref, _ string, _ int64, st instance.StepStatus, at time.Time) {
		if st == instance.StepSucceeded {
			mu.Lock()
			done = append(done, at)
			mu.Unlock()
		}
	}}
	var before func(*flow.Engine)
	if events {
		fwd, err := event.NewForwarder(e.pool, event.ForwarderConfig{Name: "bench", Logger: testLogger(),
			Sink: event.SinkFunc(func(_ context.Context, evs []event.Event) error {
				delivered.Add(int64(len(evs)))
				return nil
			})})
		if err != nil {
			b.Fatal(err)
		}
		alerts, err := alert.New(e.pool, alert.Config{Logger: testLogger()})
		if err != nil {
			b.Fatal(err)
		}
		for _, svc := range []interface {
			Start(context.Context) error
			Stop()
		}{fwd, alerts} {
			if err := svc.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(svc.Stop)
		}
		cfg.EventsWritten = fwd.Wake
	} else {
		before = (*flow.Engine).WithoutEvents
	}
	e.engineBefore(cfg, before)
	// PARALLEL: the runs are meant to run at once (SEQUENTIAL is the default).
	e.push(withStrategy(chainJSON("tput", steps), `{"rule":"PARALLEL","workflow_concurrency":1000}`))
	var total, busy time.Duration
	var cpu, dbCPU time.Duration
	var sustainedSteps, syncs, wal float64
	delivered.Store(0)
	b.ResetTimer()
	for b.Loop() {
		mu.Lock()
		done = done[:0]
		mu.Unlock()
		cpu0, db0 := cpuTime(), dbCPUTime()
		syncs0, lsn0 := e.walSyncsAndBytes()
		start := time.Now()
		insts := make([]*execution.Instance, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				insts[i] = e.start("tput", nil)
			}()
		}
		wg.Wait()
		for _, inst := range insts {
			e.wait(inst, 5*time.Minute)
		}
		total += time.Since(start)
		cpu += cpuTime() - cpu0
		dbCPU += dbCPUTime() - db0
		syncs1, lsn1 := e.walSyncsAndBytes()
		syncs += syncs1 - syncs0
		wal += lsn1 - lsn0
		mu.Lock()
		ts := slices.Clone(done)
		mu.Unlock()
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		lo, hi := len(ts)/10, len(ts)*9/10
		busy += ts[hi].Sub(ts[lo])
		sustainedSteps += float64(hi - lo)
	}
	n := float64(b.N * runs * steps)
	b.ReportMetric(sustainedSteps/busy.Seconds(), "sustained-steps/s")
	b.ReportMetric(n/total.Seconds(), "steps/s")
	b.ReportMetric(cpu.Seconds()/n*1000, "cpu-s/1k-steps")
	b.ReportMetric(dbCPU.Seconds()/n*1000, "db-cpu-s/1k-steps")
	b.ReportMetric(syncs/n, "wal-syncs/step")
	b.ReportMetric(wal/n, "wal-bytes/step")
	if events {
		b.ReportMetric(float64(delivered.Load())/total.Seconds(), "events/s")
	}
}

// BenchmarkInFlightMemory: heap held, and CPU used while idle, per 1,000
// runs in flight (each sleeping in its only step).
func BenchmarkInFlightMemory(b *testing.B) {
	const runs = 1000
	e := newEnv(b)
	// Held in memory: BenchmarkPassivatedMemory measures them passivated.
	e.engine(flow.Config{PassivateAfter: -1})
	e.push(withStrategy(`{"workflow":{"id":"idle","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":3600}}]}}`,
		`{"rule":"PARALLEL","workflow_concurrency":1000}`))
	var perK, idleCPU float64
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		insts := make([]*execution.Instance, runs)
		for i := range runs {
			insts[i] = e.start("idle", nil)
		}
		e.waitRunning(insts[runs-1])
		deadline := time.Now().Add(2 * time.Minute)
		for e.countRunning() < runs && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perK = float64(after.HeapInuse-before.HeapInuse) / (1 << 20) / (runs / 1000)
		// CPU the engine spends holding them (timers, heartbeats,
		// reconciliation) while nothing happens.
		cpu0, wall0 := cpuTime(), time.Now()
		time.Sleep(2 * time.Second)
		idleCPU = float64(cpuTime()-cpu0) / float64(time.Since(wall0)) * 100 / (runs / 1000)
		if _, err := e.runs.ActOnAll(context.Background(), "idle", run.ActionStop); err != nil {
			b.Fatal(err)
		}
		for _, inst := range insts {
			e.wait(inst, 2*time.Minute)
		}
	}
	b.ReportMetric(perK, "heap-MiB/1k-runs")
	b.ReportMetric(idleCPU, "idle-cpu-%/1k-runs")
}

func dbCPUTime() time.Duration { return dbtest.ServerCPU() }

// walSyncsAndBytes reads how many times the cluster has flushed its WAL to
// disk (a durable commit waits for one; group commit shares one among
// many) and its WAL position in bytes, for what a run of work cost.
func (e *env) walSyncsAndBytes() (syncs, wal float64) {
	e.t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT (SELECT wal_sync FROM pg_stat_wal)::float8,
        pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8`).Scan(&syncs, &wal)
	if err != nil {
		e.t.Fatal(err)
	}
	return syncs, wal
}

func cpuTime() time.Duration { return dbtest.ProcessCPU() }
