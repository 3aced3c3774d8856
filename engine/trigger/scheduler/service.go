package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// Service runs a Scheduler in the background: it fires due triggers every
// Tick (maestro dev's in-process trigger loop).
type Service struct {
	s      *Scheduler
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewService wraps s.
func NewService(s *Scheduler) *Service { return &Service{s: s} }

// Start begins the loop and returns at once; it fails if already started.
func (v *Service) Start(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done != nil {
		return errAlreadyStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	v.cancel, v.done = cancel, make(chan struct{})
	go v.loop(ctx, v.done)
	return nil
}

var errAlreadyStarted = errors.New("scheduler: service already started")

func (v *Service) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(v.s.cfg.Tick)
	defer t.Stop()
	for {
		// A tick's work is bounded so that Stop never waits long.
		tickCtx, cancel := context.WithTimeout(ctx, 10*v.s.cfg.Tick+v.s.cfg.DeadlineMargin)
		if _, err := v.s.FireDue(tickCtx); err != nil && ctx.Err() == nil {
			v.s.cfg.Logger.Warn("time trigger tick failed; the next tick retries", "error", err.Error())
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop ends the loop and waits for the tick in progress; it is idempotent.
func (v *Service) Stop() {
	v.mu.Lock()
	cancel, done := v.cancel, v.done
	v.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// ScheduledEvent is the time-trigger Lambda's input. EventBridge Scheduler
// fills it from its context attributes when the schedule's input is
// {"scheduled_time": "<aws.scheduler.scheduled-time>", "execution_id":
// "<aws.scheduler.execution-id>"} (optionally "attempt":
// "<aws.scheduler.attempt-number>"); every field is optional and only
// logged, with the invocation's lag behind scheduled_time: what is due is
// read from the database, so a late or repeated invocation does the right
// thing.
type ScheduledEvent struct {
	ScheduledTime string `json:"scheduled_time,omitempty"`
	ExecutionID   string `json:"execution_id,omitempty"`
	Attempt       string `json:"attempt,omitempty"`
}

// HandleScheduled is the time-trigger Lambda's handler: it fires batches
// until no trigger is due or the invocation's deadline nears, and writes
// how late the latest run started (metrics.TriggerLag) to Config.Metrics.
// An error makes the invocation fail, so the schedule's retry policy and
// DLQ see it.
func (s *Scheduler) HandleScheduled(ctx context.Context, raw json.RawMessage) (Stats, error) {
	var ev ScheduledEvent
	if len(raw) > 0 {
		// An event of another shape is not an error: nothing in it is needed.
		_ = json.Unmarshal(raw, &ev)
	}
	started := time.Now()
	st, err := s.FireDue(ctx)
	if err != nil {
		s.cfg.Logger.Error("time trigger invocation failed", "scheduled_time", ev.ScheduledTime,
			"execution_id", ev.ExecutionID, "attempt", ev.Attempt, "error", err.Error())
		return st, err
	}
	attrs := []any{"scheduled_time", ev.ScheduledTime, "execution_id", ev.ExecutionID, "attempt", ev.Attempt,
		"claimed", st.Claimed, "started", st.Started, "missed", st.Missed, "max_lag_ms", st.MaxLag.Milliseconds()}
	if st.Started > 0 {
		// Only started runs have a lag; a quiet minute writes nothing, and
		// the TriggerLag alarm treats missing data as fine (a failing
		// invocation raises the function's Errors alarm instead).
		if err := s.cfg.Metrics.Emit(metrics.Seconds(metrics.TriggerLag, st.MaxLag)); err != nil {
			s.cfg.Logger.Warn("trigger lag metric not written", "error", err.Error())
		}
	}
	if at, err := time.Parse(time.RFC3339, ev.ScheduledTime); err == nil {
		// How late the invocation started its work: Scheduler's delay plus
		// a cold start.
		attrs = append(attrs, "invocation_lag_ms", started.Sub(at).Milliseconds())
	}
	s.cfg.Logger.Info("time trigger invocation done", attrs...)
	return st, nil
}
