// Package stepruntime defines how the engine drives one step attempt and
// holds the built-in runtimes (NoOp and Sleep).
//
// The engine calls Start once (again after a crash, so Start must be
// idempotent), then Execute until it returns something other than
// Continue, and Terminate when the attempt is stopped, killed or timed out.
// Calls run on the engine's bounded worker pool, never inside an actor.
// The context of a Start or Execute call ends when the attempt is stopped
// or times out (the engine then calls Terminate), and carries the step's
// timeout as its deadline.
//
// Runtimes that act on the outside world (Http, Lambda, EcsTask) record
// their intent with Attempt.Record before each side effect; see the
// external package and docs/step-runtimes.md.
package stepruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// State is what a runtime call reports.
type State int

// Runtime states, as in Maestro.
const (
	// Continue: not done yet; call Execute again after NextPollDelay.
	Continue State = iota
	// Done: the phase finished successfully.
	Done
	// UserError: the user's job failed; retried within error_retry_limit.
	UserError
	// PlatformError: the platform failed; retried within platform_retry_limit.
	PlatformError
	// FatalError: failed for good; not retried.
	FatalError
	// Stopped: the job was stopped.
	Stopped
	// TimedOut: the job ran out of time; retried within timeout_retry_limit.
	TimedOut
)

var stateNames = [...]string{"CONTINUE", "DONE", "USER_ERROR", "PLATFORM_ERROR", "FATAL_ERROR", "STOPPED", "TIMED_OUT"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Result is the outcome of one runtime call.
type Result struct {
	State State
	// NextPollDelay is when to call Execute again after Continue.
	NextPollDelay time.Duration
	// Message explains the state; it goes on the step's timeline.
	Message string
	// Outputs are output params the step produced.
	Outputs map[string]any
	// Data replaces the attempt's runtime data (for example an external job
	// id) and is persisted with the state, so a restarted engine resumes it.
	Data map[string]any
	// DataRecorded says the runtime already wrote Data to the attempt's
	// row in its own transaction: the actor keeps it without writing it
	// again.
	DataRecorded bool
}

// Attempt is what a runtime sees of the step attempt it runs.
type Attempt struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	AttemptID  int64
	Type       string
	// Params are the step's evaluated params.
	Params map[string]any
	// Config holds the type's own fields from the definition.
	Config map[string]json.RawMessage
	// StartTime is when the attempt entered STARTING (stable across restarts).
	StartTime time.Time
	// Data is the runtime data the last call returned.
	Data map[string]any
	// UUID is the attempt's step_instance_uuid: unique per attempt and the
	// same after a restart or a takeover. Runtimes with side effects derive
	// their idempotency keys from it.
	UUID string
	// CallbackToken is the attempt's step token: a job that calls back
	// (PUT /api/v3/output-data, PUT /api/v3/step-completion) must send it.
	// Only the attempt's job may receive it: a runtime passes it to the job
	// and never records it in Data, outputs or messages. An Inline
	// runtime, which has no job, is given none.
	CallbackToken string
	// Node is the engine node running the attempt; an Http step names it in
	// NodeHeader, so a server can tell which engine called.
	Node string
	// Record makes data the attempt's runtime data, durably, before the
	// call goes on, and then checks that this node still holds the
	// attempt's flow group within its lease by its own clock. A runtime
	// calls it right before a side effect, so that whoever runs the attempt
	// next knows the effect may have happened. It returns ErrLeaseUncertain
	// or ErrAttemptEnding when the side effect must not start now; Data is
	// then the recorded data only if the error is ErrLeaseUncertain. Nil
	// when the caller offers no durable state (a runtime called directly).
	Record func(ctx context.Context, data map[string]any) error
	// LeaseHeld reports, by the node's own clock and without a database
	// round trip, whether the node still holds the attempt's flow group. A
	// runtime asks it at the last moment before a side effect leaves the
	// process (after Record), so that a node paused in between sends
	// nothing once it resumes. Nil when the caller offers no lease (a
	// runtime called directly): always held.
	LeaseHeld func() bool
}

// Held reports a.LeaseHeld(), true when there is none.
func (a *Attempt) Held() bool { return a.LeaseHeld == nil || a.LeaseHeld() }

// Errors of Attempt.Record.
var (
	// ErrLeaseUncertain: this node cannot be sure it still owns the
	// attempt's flow group (its lease was not renewed within half a lease
	// by its own clock). Start no side effect now; try again later.
	ErrLeaseUncertain = errors.New("flow group lease may have expired on this node; side effect deferred")
	// ErrAttemptEnding: the attempt is being stopped, has ended, or is no
	// longer run by this node. Start no side effect.
	ErrAttemptEnding = errors.New("step attempt is ending or no longer owned by this node")
)

// RecordsFirst is implemented by a runtime whose Start touches nothing
// outside the engine (it checks the config) and whose Execute makes its
// data durable with Attempt.Record before any side effect (external.Runtime:
// the recorded intent). The engine does not write such an attempt's
// STARTING before Start: its first write is the recorded intent (CREATED
// … RUNNING with the data, one insert), ordered after the run's earlier
// writes and usually sharing their commit. A crash before that commit
// leaves nothing launched, and the attempt is run again.
type RecordsFirst interface {
	// RecordsFirst is a marker.
	RecordsFirst()
}

// Woken is implemented by a runtime whose attempts wait for something
// outside the engine to report back (an asynchronous Lambda's completion
// call): a step_update message for the attempt calls Execute again at
// once instead of at the next poll.
type Woken interface {
	// WakesOnUpdate is a marker.
	WakesOnUpdate()
}

// Inline is implemented by a runtime whose Start and Execute are pure and
// immediate: they touch nothing outside the engine, never block, never
// return Continue and never call Attempt.Record. The engine calls them on
// the step actor itself, not on the worker pool, and writes such an
// attempt once, with its final state, instead of writing STARTING before
// Start: a crash before that write loses nothing that a rerun of the
// attempt would not do again identically.
type Inline interface {
	// RunsInline is a marker.
	RunsInline()
}

// Runtime runs steps of one type.
type Runtime interface {
	Start(ctx context.Context, a *Attempt) Result
	Execute(ctx context.Context, a *Attempt) Result
	Terminate(ctx context.Context, a *Attempt) Result
}

// Registry maps step types to runtimes.
type Registry map[string]Runtime

// Builtins returns the runtimes every engine has.
func Builtins() Registry {
	return Registry{"NoOp": NoOp{}, "Sleep": Sleep{Now: time.Now}}
}

// NoOp succeeds at once.
type NoOp struct{}

// Start implements Runtime.
func (NoOp) Start(context.Context, *Attempt) Result { return Result{State: Done} }

// Execute implements Runtime.
func (NoOp) Execute(context.Context, *Attempt) Result { return Result{State: Done} }

// Terminate implements Runtime.
func (NoOp) Terminate(context.Context, *Attempt) Result { return Result{State: Stopped} }

// RunsInline implements Inline.
func (NoOp) RunsInline() {}

// DefaultSleep is how long a Sleep step without sleep_seconds sleeps:
// Maestro's default of 3 seconds.
const DefaultSleep = 3 * time.Second

// Sleep succeeds once sleep_seconds (a step param, or a field of the step;
// DefaultSleep when neither is set) have passed since the attempt started. It holds no worker while waiting:
// Execute returns Continue with the time left.
type Sleep struct {
	Now func() time.Time
}

// Start implements Runtime.
func (s Sleep) Start(_ context.Context, a *Attempt) Result {
	if _, err := sleepFor(a); err != nil {
		return Result{State: FatalError, Message: err.Error()}
	}
	return Result{State: Done}
}

// Execute implements Runtime.
func (s Sleep) Execute(_ context.Context, a *Attempt) Result {
	d, err := sleepFor(a)
	if err != nil {
		return Result{State: FatalError, Message: err.Error()}
	}
	left := a.StartTime.Add(d).Sub(s.Now())
	if left > 0 {
		return Result{State: Continue, NextPollDelay: left}
	}
	return Result{State: Done, Message: fmt.Sprintf("slept %s", d)}
}

// Terminate implements Runtime.
func (Sleep) Terminate(context.Context, *Attempt) Result { return Result{State: Stopped} }

func sleepFor(a *Attempt) (time.Duration, error) {
	var secs float64
	switch v := a.Params["sleep_seconds"].(type) {
	case int64:
		secs = float64(v)
	case float64:
		secs = v
	case nil:
		raw, ok := a.Config["sleep_seconds"]
		if !ok {
			return DefaultSleep, nil
		}
		var text string
		if json.Unmarshal(raw, &text) == nil {
			d, err := workflow.ParseDuration(text)
			if err == nil {
				err = workflow.CheckSleepSeconds(d.Seconds())
			}
			if err != nil {
				return 0, fmt.Errorf("sleep_seconds: %w", err)
			}
			return d, nil
		}
		if err := json.Unmarshal(raw, &secs); err != nil {
			return 0, fmt.Errorf("sleep_seconds must be a number or a duration: %w", err)
		}
	default:
		return 0, fmt.Errorf("sleep_seconds must be a number, got %T", v)
	}
	// A value from params was not seen at push: 1e18 seconds overflowed
	// into a negative duration, a sleep that ended at once.
	if err := workflow.CheckSleepSeconds(secs); err != nil {
		return 0, fmt.Errorf("sleep_seconds: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
