package flow_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
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
// concurrency 100 per b.N and reports the wall time, iterations per
// second, and the most heap and resident memory the process used.
func benchmarkForeach(b *testing.B, outer, inner int, within time.Duration) {
	e := newEnv(b)
	e.engine(flow.Config{})
	e.push(withStrategy(foreachOf("fe-bench", outer, inner, 100), `{"rule":"PARALLEL","workflow_concurrency":10}`))
	n := float64(outer * inner)
	var walls []time.Duration
	mem := sampleMemory(100 * time.Millisecond)
	for b.Loop() {
		t0 := time.Now()
		parent := e.start("fe-bench", nil)
		if got := e.wait(parent, within); got.Status != instance.WorkflowSucceeded {
			b.Fatalf("foreach ended %s", got.Status)
		}
		walls = append(walls, time.Since(t0))
	}
	mem.finish()
	wall := percentile(walls, 0.5)
	b.ReportMetric(wall.Seconds(), "s/foreach")
	b.ReportMetric(n/wall.Seconds(), "iterations/s")
	b.ReportMetric(float64(mem.maxHeap)/(1<<20), "max-heap-MiB")
	b.ReportMetric(float64(mem.maxRS)/(1<<20), "max-rss-MiB")
}

// BenchmarkForeach10000: 10,000 one-step iterations at concurrency 100.
// Target: 30 s.
func BenchmarkForeach10000(b *testing.B) { benchmarkForeach(b, 100, 100, 5*time.Minute) }

// BenchmarkForeach100000: 100,000 one-step iterations at concurrency 100.
// Target: 5 min with the engine under 500 MB. It takes minutes, so it
// runs only when MAESTRO_BENCH_FOREACH_100K is set (make bench does, once).
func BenchmarkForeach100000(b *testing.B) {
	if os.Getenv("MAESTRO_BENCH_FOREACH_100K") == "" {
		b.Skip("set MAESTRO_BENCH_FOREACH_100K=1 to run (minutes)")
	}
	benchmarkForeach(b, 1000, 100, 15*time.Minute)
}
