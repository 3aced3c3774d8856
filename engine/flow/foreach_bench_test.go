package flow_test

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
)

// foreachOf is a workflow whose foreach step runs one NoOp step per
// combination of a (0..outer-1) and b (0..inner-1), concurrency at a time.
func foreachOf(id string, outer, inner, concurrency int) string {
	return fmt.Sprintf(`{"workflow":{"id":%q,"steps":[{"foreach":{"id":"loop","concurrency":%d,
	  "params":{"loop_params":{"type":"MAP","value":{
	    "a":{"type":"LONG_ARRAY","expression":"Util.intsBetween(0, %d, 1)"},
	    "b":{"type":"LONG_ARRAY","expression":"Util.intsBetween(0, %d, 1)"}}}},
	  "steps":[{"step":{"id":"body","type":"NoOp"}}]}}]}}`, id, concurrency, outer, inner)
}

// memorySampler records the most heap in use and the most resident memory
// of the process while it runs.
type memorySampler struct {
	stop           chan struct{}
	done           sync.WaitGroup
	maxHeap, maxRS uint64
}

func sampleMemory(every time.Duration) *memorySampler {
	m := &memorySampler{stop: make(chan struct{})}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			m.maxHeap = max(m.maxHeap, ms.HeapInuse)
			m.maxRS = max(m.maxRS, residentBytes())
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memorySampler) finish() { close(m.stop); m.done.Wait() }

// residentBytes reads VmRSS from /proc (0 where there is none).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// benchmarkForeach runs a foreach of outer*inner one-step iterations at
// the given concurrency per b.N, over a pool of the engine's size, and
// reports the wall time, iterations per second, the most heap and
// resident memory the process used, and per iteration: the CPU of the
// process and of PostgreSQL, the statements the pool sent (the wait's
// polling included) with their commits, and PostgreSQL's WAL syncs (the
// durable commits, the writer's included). Counts, unlike times, hold on
// a loaded machine. MAESTRO_BENCH_FOREACH_STMTS=1 also prints the 40
// statements sent most, with their client-side time.
func benchmarkForeach(b *testing.B, outer, inner, concurrency int, within time.Duration) {
	// The engine's pool as cmd/maestro engine opens it (32 connections).
	pool, stmts := dbtest.CountingPoolOf(b, 32)
	defs := definition.NewStore(pool)
	ft := &flowtest.Env{T: b, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, flowtest.GroupCount)}
	e := &env{Env: ft, t: b, pool: pool, defs: defs, runs: ft.Runs}
	e.engine(flow.Config{})
	e.push(withStrategy(foreachOf("fe-bench", outer, inner, concurrency), `{"rule":"PARALLEL","workflow_concurrency":10}`))
	n := float64(outer * inner)
	var walls []time.Duration
	mem := sampleMemory(100 * time.Millisecond)
	stmts.Reset()
	cpu0, pg0 := cpuTime(), dbtest.ServerCPU()
	syncs0, _ := e.walSyncsAndBytes()
	for b.Loop() {
		t0 := time.Now()
		parent := e.start("fe-bench", nil)
		if got := e.wait(parent, within); got.Status != instance.WorkflowSucceeded {
			b.Fatalf("foreach ended %s", got.Status)
		}
		walls = append(walls, time.Since(t0))
	}
	mem.finish()
	cpu, pg := cpuTime()-cpu0, dbtest.ServerCPU()-pg0
	syncs, _ := e.walSyncsAndBytes()
	syncs -= syncs0
	runs := n * float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000/runs, "engine-cpu-ms/iteration")
	b.ReportMetric(float64(pg.Microseconds())/1000/runs, "pg-cpu-ms/iteration")
	commits, _ := stmts.Count("commit")
	b.ReportMetric(float64(stmts.Total())/runs, "stmts/iteration")
	b.ReportMetric(float64(commits)/runs, "commits/iteration")
	b.ReportMetric(syncs/runs, "wal-syncs/iteration")
	if os.Getenv("MAESTRO_BENCH_FOREACH_STMTS") != "" {
		top := stmts.BySQL()
		keys := slices.SortedFunc(maps.Keys(top), func(x, y string) int { return cmp.Compare(top[y], top[x]) })
		spent := stmts.Spent()
		for _, k := range keys[:min(len(keys), 40)] {
			fmt.Fprintf(os.Stderr, "%8d  %7.3f/it  %8.1f ms  %.200s\n", top[k], float64(top[k])/runs, float64(spent[k].Microseconds())/1000, k)
		}
	}
	wall := percentile(walls, 0.5)
	b.ReportMetric(wall.Seconds(), "s/foreach")
	b.ReportMetric(n/wall.Seconds(), "iterations/s")
	b.ReportMetric(float64(mem.maxHeap)/(1<<20), "max-heap-MiB")
	b.ReportMetric(float64(mem.maxRS)/(1<<20), "max-rss-MiB")
}

// BenchmarkForeach10000: 10,000 one-step iterations at concurrency 100.
// Target: 30 s.
func BenchmarkForeach10000(b *testing.B) { benchmarkForeach(b, 100, 100, 100, 5*time.Minute) }

// BenchmarkForeach10000At500: the same 10,000 iterations at concurrency
// 500, the 1,000,000-iteration benchmark's, in seconds: what launching
// more than one batch of iterations at a time does.
func BenchmarkForeach10000At500(b *testing.B) { benchmarkForeach(b, 100, 100, 500, 5*time.Minute) }

// BenchmarkForeach100000: 100,000 one-step iterations at concurrency 100.
// Target: 5 min with the engine under 500 MB. It takes minutes, so it
// runs only when MAESTRO_BENCH_FOREACH_100K is set (make bench does, once).
func BenchmarkForeach100000(b *testing.B) {
	if os.Getenv("MAESTRO_BENCH_FOREACH_100K") == "" {
		b.Skip("set MAESTRO_BENCH_FOREACH_100K=1 to run (minutes)")
	}
	benchmarkForeach(b, 1000, 100, 100, 15*time.Minute)
}

// BenchmarkForeach1000000: 1,000,000 one-step iterations (1,000 × 1,000
// loop params) at concurrency 500, the most a foreach step accepts
// (workflow.MaxForeachConcurrency, as Maestro's
// FOREACH_CONCURRENCY_MAX_LIMIT): what a user sets for a big fan-out.
// Target: 3 min with the engine under 500 MiB RSS. It takes minutes, so
// it runs only when MAESTRO_BENCH_FOREACH_1M is set (make bench does,
// once).
func BenchmarkForeach1000000(b *testing.B) {
	if os.Getenv("MAESTRO_BENCH_FOREACH_1M") == "" {
		b.Skip("set MAESTRO_BENCH_FOREACH_1M=1 to run (minutes)")
	}
	benchmarkForeach(b, 1000, 1000, 500, 30*time.Minute)
}
