package flow

import (
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/run"
)

// Crash stops the engine the way a killed process stops: every actor ends
// at once, nothing more is written and its groups are not released, so
// another node must wait for the leases to expire.
func (e *Engine) Crash() {
	e.once.Do(func() {
		e.cancel()
		e.worker.Stop()
		e.wg.Wait()
		e.writer.Stop()
		e.members.Abandon()
		e.relaxed.Close()
		e.writerDB.Close()
	})
}

// LaunchObserver is the Observer that records step metrics on rec.
func LaunchObserver(rec *metrics.Recorder) func(run.Ref, string, int64, instance.StepStatus, time.Time) {
	return newStepTimer(rec).observe
}

// AgeLeases makes every group's last renewal look older by d, as if this
// node's heartbeats had stalled for that long.
func (e *Engine) AgeLeases(d time.Duration) { e.members.AgeLeases(d) }

// WithoutEvents makes the engine record no events, for benchmarks that
// measure what recording them costs. Call it before Start.
func (e *Engine) WithoutEvents() { e.events = false }

// SetGroupsLeaving makes the flow of a run being started find its group
// leaving this node (its lease ended, or it is being handed over, while
// the run's params were evaluated) whenever leaving reports true. Call it
// before Start.
func (e *Engine) SetGroupsLeaving(leaving func() bool) { e.testHookLeaving = leaving }
