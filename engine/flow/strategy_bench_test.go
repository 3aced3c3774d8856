package flow_test

import (
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// BenchmarkSequentialHandoff: on a SEQUENTIAL workflow with runs queued,
// the time from a run's end (its final write committed) to the next queued
// run's first step being RUNNING. The end transaction admits the next run
// and enqueues its start message; the owner picks it up on the notify.
// Target: p50 <= 10 ms.
func BenchmarkSequentialHandoff(b *testing.B) {
	const queued = 20
	e := newEnv(b)
	var mu sync.Mutex
	ended := map[int64]time.Time{}
	running := map[int64]time.Time{}
	e.engine(flow.Config{
		FlowObserver: func(ref run.Ref, _ instance.WorkflowStatus, at time.Time) {
			mu.Lock()
			ended[ref.InstanceID] = at
			mu.Unlock()
		},
		Observer: func(ref run.Ref, step string, _ int64, st instance.StepStatus, at time.Time) {
			if step == "s0" && st == instance.StepRunning {
				mu.Lock()
				running[ref.InstanceID] = at
				mu.Unlock()
			}
		},
	})
	e.push(chainJSON("handoff", 1))
	var gaps []time.Duration
	b.ResetTimer()
	for b.Loop() {
		insts := e.startAll("handoff", queued)
		e.waitAll(insts, time.Minute)
		mu.Lock()
		for i := 1; i < len(insts); i++ {
			end, ok1 := ended[insts[i-1].InstanceID]
			run, ok2 := running[insts[i].InstanceID]
			if ok1 && ok2 {
				gaps = append(gaps, run.Sub(end))
			}
		}
		mu.Unlock()
	}
	b.ReportMetric(ms(percentile(gaps, 0.5)), "p50-handoff-ms")
	b.ReportMetric(ms(percentile(gaps, 0.99)), "p99-handoff-ms")
}
