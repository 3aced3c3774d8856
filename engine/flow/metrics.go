package flow

import (
	"context"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// stepTimer turns step transitions into the engine's step metrics: steps
// ended, and each attempt's launch latency: the time from its creation to
// RUNNING less the time it spent waiting for something outside the engine
// (signals, tag permits, a breakpoint).
type stepTimer struct {
	rec *metrics.Recorder

	mu       sync.Mutex
	launches map[stepKey]*launch
}

type stepKey struct {
	ref     run.Ref
	step    string
	attempt int64
}

// launch is an attempt on its way to RUNNING.
type launch struct {
	segment time.Time     // when the current stretch of engine work began
	engine  time.Duration // engine time before segment
	waiting bool
}

func newStepTimer(rec *metrics.Recorder) *stepTimer {
	return &stepTimer{rec: rec, launches: map[stepKey]*launch{}}
}

func isWait(s instance.StepStatus) bool {
	return s == instance.StepWaitingForSignals || s == instance.StepWaitingForPermits || s == instance.StepPaused
}

// observe is an Observer.
func (s *stepTimer) observe(ref run.Ref, step string, attempt int64, status instance.StepStatus, at time.Time) {
	k := stepKey{ref, step, attempt}
	if status.IsTerminal() {
		s.mu.Lock()
		delete(s.launches, k)
		s.mu.Unlock()
		s.rec.Add(metrics.StepsEnded, 1)
		return
	}
	s.mu.Lock()
	l := s.launches[k]
	if status == instance.StepCreated {
		l = &launch{segment: at}
		s.launches[k] = l
	}
	if l == nil {
		s.mu.Unlock()
		return
	}
	switch {
	case isWait(status) && !l.waiting:
		l.engine += at.Sub(l.segment)
		l.waiting = true
	case !isWait(status) && l.waiting:
		l.segment, l.waiting = at, false
	}
	var latency time.Duration
	running := status == instance.StepRunning
	if running {
		latency = l.engine + at.Sub(l.segment)
		delete(s.launches, k)
	}
	s.mu.Unlock()
	if running {
		s.rec.Observe(metrics.StepLaunchLatency, metrics.UnitMilliseconds, float64(latency)/float64(time.Millisecond))
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
	ready := 0.0
	if h.Healthy {
		ready = 1
	}
	rec.Set(metrics.Ready, metrics.UnitCount, ready)
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
