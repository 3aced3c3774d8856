package flow

import (
	"context"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/queue"
)

// stepTimer turns step transitions into the engine's step metrics: steps
// ended, and each attempt's launch latency (creation to RUNNING) unless it
// waited for something outside the engine (signals, permits, a
// breakpoint).
type stepTimer struct {
	rec *metrics.Recorder

	mu      sync.Mutex
	created map[stepKey]time.Time
}

type stepKey struct {
	ref     Ref
	step    string
	attempt int64
}

func newStepTimer(rec *metrics.Recorder) *stepTimer {
	return &stepTimer{rec: rec, created: map[stepKey]time.Time{}}
}

// observe is an Observer.
func (s *stepTimer) observe(ref Ref, step string, attempt int64, status instance.StepStatus, at time.Time) {
	k := stepKey{ref, step, attempt}
	switch {
	case status == instance.StepCreated:
		s.mu.Lock()
		s.created[k] = at
		s.mu.Unlock()
	case status == instance.StepRunning:
		s.mu.Lock()
		t0, ok := s.created[k]
		delete(s.created, k)
		s.mu.Unlock()
		if ok {
			s.rec.Observe(metrics.StepLaunchLatency, metrics.UnitMilliseconds, float64(at.Sub(t0))/float64(time.Millisecond))
		}
	case status == instance.StepWaitingForSignals || status == instance.StepWaitingForPermits || status == instance.StepPaused:
		s.mu.Lock()
		delete(s.created, k)
		s.mu.Unlock()
	case status.IsTerminal():
		s.mu.Lock()
		delete(s.created, k)
		s.mu.Unlock()
		s.rec.Add(metrics.StepsEnded, 1)
	}
}

// SampleMetrics records the engine's gauges (flow groups, outbox depth and
// age) on cfg.Metrics; the metrics loop calls it once a period.
func (e *Engine) SampleMetrics(ctx context.Context) {
	rec := e.cfg.Metrics
	if rec == nil {
		return
	}
	h := e.Health(ctx, 5*time.Second)
	rec.Set(metrics.OwnedGroups, metrics.UnitCount, float64(h.OwnedGroups))
	if h.UnownedGroups >= 0 {
		rec.Set(metrics.UnownedGroups, metrics.UnitCount, float64(h.UnownedGroups))
	}
	st, err := queue.NewStore(e.relaxed).Stats(ctx)
	if err != nil {
		e.cfg.Logger.Warn("sample queue metrics", "error", err.Error())
		return
	}
	rec.Set(metrics.QueueDepth, metrics.UnitCount, float64(st.Depth))
	rec.Set(metrics.QueueAge, metrics.UnitSeconds, st.OldestDue.Seconds())
}
