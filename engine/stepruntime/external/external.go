// Package external is the common shape of step runtimes whose work happens
// outside the engine (an HTTP call, a Lambda invocation, an ECS task): the
// protocol that makes their side effects happen at most once per step
// attempt across crashes and takeovers.
//
// A Job says how to launch, find, poll and cancel its kind of work; Runtime
// drives it:
//
//   - Start checks the attempt's config and launches nothing. It is
//     repeated after a crash, so it has no side effect.
//   - The first Execute records the intent durably (Attempt.Record: the
//     idempotency key, which is the attempt's uuid, and launch=intended),
//     which also checks that this node still holds the attempt's flow group
//     within its lease by its own clock, and only then launches the job
//     with that key. The job's external id (task ARN, request id) comes
//     back in the result's Data with launch=done, which the engine writes
//     before it waits for the job.
//   - An Execute that finds an intent without launch=done (the engine
//     stopped between the two writes) asks the Job to Find the work by its
//     key before anything else. Found: it is adopted. Not found: launched
//     with the same key (ECS also refuses a second task for a repeated
//     client token). A job that cannot be looked up (an HTTP request, a
//     synchronous Lambda invocation) is never sent twice in one attempt:
//     the attempt fails with a platform error and the retry policy makes a
//     new attempt, with a new key.
//   - Terminate cancels what was launched (or found).
//
// See docs/step-runtimes.md for the sequence diagram.
package external

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// Keys of the protocol in the attempt's runtime data (runtime_state.data).
const (
	// KeyIdempotency holds the idempotency key the job was launched with.
	KeyIdempotency = "idempotency_key"
	// KeyLaunch is LaunchIntended once the intent is durable and
	// LaunchDone once the job's launch returned.
	KeyLaunch = "launch"
	// KeyIntendedAt is when the intent was recorded (RFC 3339).
	KeyIntendedAt = "launch_intended_at"
	// KeyLaunchTries counts the launches of the attempt whose outcome was
	// unknown and that a lookup then found had not happened.
	KeyLaunchTries = "launch_tries"
)

// MaxLaunchTries bounds KeyLaunchTries: after that many launches that
// never took, the attempt fails with a platform error (the retry policy
// makes a new attempt), instead of trying for ever.
const MaxLaunchTries = 5

// Values of KeyLaunch.
const (
	LaunchIntended = "intended"
	LaunchDone     = "done"
)

// ErrCannotFind is what Job.Find returns for work that cannot be looked up
// by its key (an HTTP request, a synchronous invocation).
var ErrCannotFind = errors.New("this kind of job cannot be looked up by its idempotency key")

// Job is one kind of outside work. Its methods return only their own keys
// in Result.Data; Runtime adds the protocol's.
type Job interface {
	// Check validates the attempt's config before anything is launched.
	// An error fails the attempt (FATAL_ERROR): retrying cannot fix it.
	Check(a *stepruntime.Attempt) error
	// Launch starts the work with key as its idempotency key. The intent
	// is durable when it is called. A job that completes at once (an HTTP
	// call) returns its final state; one that keeps running returns
	// Continue with its external id in Data. When the outcome is unknown
	// (the call failed or was cancelled after it may have reached the
	// service) it returns Unknown, and the next call looks the work up.
	Launch(ctx context.Context, a *stepruntime.Attempt, key string) stepruntime.Result
	// Find looks for work an earlier owner of the attempt launched with
	// key. ok is false when there is none; err is ErrCannotFind for work
	// that cannot be looked up, another error when the lookup failed
	// (it is tried again later).
	Find(ctx context.Context, a *stepruntime.Attempt, key string) (res stepruntime.Result, ok bool, err error)
	// Poll reports on launched work (a.Data holds what Launch or Find
	// returned).
	Poll(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result
	// Cancel stops launched work; it returns Stopped once it is stopped,
	// or the work's final state when it had already ended.
	Cancel(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result
}

// RetryDelay is how long an Execute waits before trying again after a
// deferred launch (lease uncertain) or a failed lookup.
var RetryDelay = time.Second

// Runtime runs a Job under the protocol. It implements stepruntime.Runtime.
type Runtime struct {
	Job Job
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (r Runtime) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// RecordsFirst implements stepruntime.RecordsFirst: Start only checks
// the config, and Execute records the intent before it launches.
func (Runtime) RecordsFirst() {}

// Start implements stepruntime.Runtime: it checks the config.
func (r Runtime) Start(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	if err := r.Job.Check(a); err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	return stepruntime.Result{State: stepruntime.Done}
}

// Execute implements stepruntime.Runtime.
func (r Runtime) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	switch a.Data[KeyLaunch] {
	case LaunchDone:
		return r.merge(a.Data, r.Job.Poll(ctx, a), LaunchDone)
	case LaunchIntended:
		return r.recover(ctx, a)
	}
	return r.launch(ctx, a, a.Data)
}

// launch records the intent, then launches. prior is the data to keep if
// the launch is deferred.
func (r Runtime) launch(ctx context.Context, a *stepruntime.Attempt, prior map[string]any) stepruntime.Result {
	key := a.UUID
	intent := maps.Clone(prior)
	if intent == nil {
		intent = map[string]any{}
	}
	intent[KeyIdempotency] = key
	intent[KeyLaunch] = LaunchIntended
	intent[KeyLaunchTries] = tries(prior) + 1
	intent[KeyIntendedAt] = r.now().UTC().Format(time.RFC3339Nano)
	if a.Record != nil {
		if err := a.Record(ctx, intent); err != nil {
			return r.deferred(prior, err)
		}
	}
	if !a.Held() {
		// Paused between the record and here: the lease may be gone.
		return r.deferred(prior, stepruntime.ErrLeaseUncertain)
	}
	launched := *a
	launched.Data = intent
	return r.merge(intent, r.Job.Launch(ctx, &launched, key), LaunchDone)
}

// deferred is the result of a launch that must not happen now: the data
// goes back to what it was (without the intent, which Record may have
// written when the lease check after the write failed), and Execute runs
// again shortly. A stop in progress ignores the result and terminates.
func (r Runtime) deferred(prior map[string]any, err error) stepruntime.Result {
	data := maps.Clone(prior)
	if data == nil {
		data = map[string]any{}
	}
	delete(data, KeyLaunch)
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: RetryDelay, Data: data,
		Message: "launch deferred: " + err.Error()}
}

// recover handles an intent whose outcome is unknown.
func (r Runtime) recover(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	key, _ := a.Data[KeyIdempotency].(string)
	if key == "" {
		key = a.UUID
	}
	res, ok, err := r.Job.Find(ctx, a, key)
	switch {
	case errors.Is(err, ErrCannotFind):
		return stepruntime.Result{State: stepruntime.PlatformError,
			Message: "the engine stopped while this attempt's call was in flight; its outcome is unknown, " +
				"and it is not sent twice in one attempt (a retry is a new attempt with a new idempotency key)"}
	case err != nil:
		if ctx.Err() != nil {
			return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: RetryDelay}
		}
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: RetryDelay,
			Message: fmt.Sprintf("look up the job launched with key %s: %v", key, err)}
	case ok:
		res = r.merge(a.Data, res, LaunchDone)
		if res.Message == "" {
			res.Message = "found the job an earlier owner of the attempt launched"
		}
		return res
	}
	// Nothing was launched: launch now, with the same key.
	if n := tries(a.Data); n >= MaxLaunchTries {
		return stepruntime.Result{State: stepruntime.PlatformError,
			Message: fmt.Sprintf("%d launches of this attempt did not take", n)}
	}
	prior := maps.Clone(a.Data)
	delete(prior, KeyLaunch)
	return r.launch(ctx, a, prior)
}

// tries reads KeyLaunchTries (a float64 once it has been through JSON).
func tries(data map[string]any) int {
	switch n := data[KeyLaunchTries].(type) {
	case int:
		return n
	case float64:
		return int(n)
	case int64:
		return int(n)
	}
	return 0
}

// Terminate implements stepruntime.Runtime.
func (r Runtime) Terminate(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	switch a.Data[KeyLaunch] {
	case LaunchDone:
		return r.merge(a.Data, r.Job.Cancel(ctx, a), LaunchDone)
	case LaunchIntended:
		key, _ := a.Data[KeyIdempotency].(string)
		res, ok, err := r.Job.Find(ctx, a, key)
		if err == nil && ok {
			found := *a
			found.Data = r.merge(a.Data, res, LaunchDone).Data
			return r.merge(found.Data, r.Job.Cancel(ctx, &found), LaunchDone)
		}
	}
	return stepruntime.Result{State: stepruntime.Stopped}
}

// Unknown is the result of a launch whose outcome is unknown: the intent
// stays, so the next Execute (or Terminate) looks the work up by its key.
func Unknown(state stepruntime.State, delay time.Duration, msg string) stepruntime.Result {
	return stepruntime.Result{State: state, NextPollDelay: delay, Message: msg,
		Data: map[string]any{KeyLaunch: LaunchIntended}}
}

// merge lays res.Data over base with the launch state set, unless the
// result is Unknown.
func (r Runtime) merge(base map[string]any, res stepruntime.Result, launch string) stepruntime.Result {
	data := maps.Clone(base)
	if data == nil {
		data = map[string]any{}
	}
	maps.Copy(data, res.Data)
	if res.Data[KeyLaunch] != LaunchIntended {
		data[KeyLaunch] = launch
	}
	res.Data = data
	return res
}
