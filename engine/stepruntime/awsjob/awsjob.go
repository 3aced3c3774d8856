// Package awsjob is the shared machinery of the step types that start a
// job in an AWS service and wait for it to end (Athena, Glue, Step
// Functions, Batch, EMR): each type is a Service (start a job with a name or token
// derived from the attempt, find it again by that key, describe it, stop
// it), and New runs it under the external protocol, so that an attempt
// starts its job at most once across crashes and takeovers.
//
// Waiting costs almost nothing. While a job runs the attempt holds no
// worker; it is polled with a backoff that grows with the job's age (half
// its age, or the fraction Config.Slowdown sets, between Config.MinPoll
// and Config.MaxPoll), and a poll that sees
// nothing new writes nothing. The services' state-change events
// (EventBridge -> SQS) wake the attempt at once (Consumer): the job's id is
// registered (Store) when it starts, and an event for it enqueues a
// step_update message for its attempt, whose next poll then finds the end.
// Polling remains the fallback, and the only path for a service that emits
// no event. See docs/step-runtimes.md, "AWS jobs".
package awsjob

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
)

// Keys of the runtime data (runtime_state.data) every AWS job has.
const (
	// KeyJobID is the service's id of the job (query execution id, job run
	// id, execution ARN).
	KeyJobID = "job_id"
	// KeyJobState is the job's last state as the service words it.
	KeyJobState = "job_state"
	// KeyStopRequested is set once the engine asked the service to stop
	// the job: its end then reads as stopped (Stopped), not failed.
	KeyStopRequested = "stop_requested"
)

// Defaults of Config.
const (
	DefaultMinPoll = 5 * time.Second
	// DefaultMaxPoll bounds the poll of an engine that receives the
	// services' events: polling is only the fallback there.
	DefaultMaxPoll = 5 * time.Minute
	// DefaultMaxPollNoEvents bounds it on an engine without events.
	DefaultMaxPollNoEvents = time.Minute
	// DefaultSlowdown: a job is polled at half its age.
	DefaultSlowdown = 2
)

// Phase is where a job is.
type Phase int

// Phases of a job.
const (
	// Running: not ended yet (queued, starting, running, stopping).
	Running Phase = iota
	// Succeeded: ended well.
	Succeeded
	// Failed: ended badly.
	Failed
	// Cancelled: stopped, by Maestro or by someone else. The attempt is
	// Stopped when the engine asked for it (KeyStopRequested), else
	// failed (the platform's failure when Status.Platform).
	Cancelled
	// Stopped: the service says the engine stopped it (a Batch job
	// terminated with Maestro's reason): the attempt is Stopped.
	Stopped
)

// Status is what a service reports of a job.
type Status struct {
	Phase Phase
	// State is the service's own word for it (SUCCEEDED, RUNNING, ...);
	// it is kept in the runtime data as KeyJobState.
	State string
	// Platform marks a failure as the platform's (capacity, an internal
	// error): PLATFORM_ERROR, retried by the platform retry policy, instead
	// of USER_ERROR.
	Platform bool
	// Message explains a failure.
	Message string
	// Data are details for the step's runtime data.
	Data map[string]any
	// Outputs are the step's output params when the job ended (params.Value
	// each).
	Outputs map[string]any
}

// Service is one AWS service's way with jobs. Its methods return AWS SDK
// errors as they come: the runtime classifies them (external.AWSState).
type Service interface {
	// Name is the service's name in the job registry and in messages
	// ("athena", "glue", "states").
	Name() string
	// Check validates the attempt's config (its job MAP param) before
	// anything is started.
	Check(a *stepruntime.Attempt) error
	// Start starts the job with key (the attempt's uuid) as its idempotency
	// token or in its name, and returns the job's id and details.
	Start(ctx context.Context, a *stepruntime.Attempt, key string) (id string, data map[string]any, err error)
	// Find looks for a job an earlier owner of the attempt started with
	// key.
	Find(ctx context.Context, a *stepruntime.Attempt, key string) (id string, data map[string]any, found bool, err error)
	// Describe reports on the job with id.
	Describe(ctx context.Context, a *stepruntime.Attempt, id string) (Status, error)
	// Stop stops the job with id; a job that has already ended is no
	// error.
	Stop(ctx context.Context, a *stepruntime.Attempt, id string) error
}

// Pacer is implemented by a Service whose steps may set their own first
// poll delay (a poll_interval field): MinPoll returns the attempt's, or 0
// for Config.MinPoll.
type Pacer interface {
	MinPoll(a *stepruntime.Attempt) time.Duration
}

// Registry records which attempt waits for which job, so that a service's
// event can wake it; *Store has it.
type Registry interface {
	Register(ctx context.Context, service, jobID string, a *stepruntime.Attempt) error
	Forget(ctx context.Context, service, jobID string) error
}

// Config configures a runtime.
type Config struct {
	// Jobs registers started jobs for the event path; nil: polling only.
	Jobs Registry
	// MinPoll is the first poll after a start (DefaultMinPoll).
	MinPoll time.Duration
	// MaxPoll bounds the backoff (DefaultMaxPoll with Jobs,
	// DefaultMaxPollNoEvents without).
	MaxPoll time.Duration
	// Slowdown sets the poll's pace: the delay to the next poll is the
	// job's age divided by Slowdown, within [MinPoll, MaxPoll]
	// (DefaultSlowdown).
	Slowdown int
	// Logger receives what the step's timeline does not (required).
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Pace of the services whose steps were polled before they had events
// (Batch, EMR): without events a job is polled at a tenth of its age, up
// to PolledMaxPoll.
const (
	PolledSlowdown = 10
	PolledMaxPoll  = 2 * time.Minute
)

// PolledConfig is the Config of such a service's runtime: polled from
// minPoll (defMinPoll when 0), at a tenth of the job's age up to maxPoll
// (PolledMaxPoll when 0) without events (jobs nil), or at awsjob's pace
// up to maxPoll (DefaultMaxPoll when 0) when its events complete it.
func PolledConfig(jobs Registry, minPoll, defMinPoll, maxPoll time.Duration, logger *slog.Logger, now func() time.Time) Config {
	if minPoll <= 0 {
		minPoll = defMinPoll
	}
	c := Config{Jobs: jobs, MinPoll: minPoll, MaxPoll: maxPoll, Logger: logger, Now: now}
	if jobs == nil {
		c.Slowdown = PolledSlowdown
		if c.MaxPoll <= 0 {
			c.MaxPoll = PolledMaxPoll
		}
	}
	return c
}

// New returns the step runtime of svc.
func New(svc Service, cfg Config) (stepruntime.Runtime, error) {
	j, err := NewJob(svc, cfg)
	if err != nil {
		return nil, err
	}
	return runtime{external.Runtime{Job: j, Now: j.cfg.Now}}, nil
}

// NewJob returns svc's job under the external protocol, for a runtime that
// carries its work in another type's job (Notebook in a Batch job).
func NewJob(svc Service, cfg Config) (*Job, error) {
	if svc == nil || cfg.Logger == nil {
		return nil, fmt.Errorf("awsjob: a Service and Config.Logger are required")
	}
	if cfg.Slowdown <= 0 {
		cfg.Slowdown = DefaultSlowdown
	}
	if cfg.MinPoll <= 0 {
		cfg.MinPoll = DefaultMinPoll
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = DefaultMaxPollNoEvents
		if cfg.Jobs != nil {
			cfg.MaxPoll = DefaultMaxPoll
		}
	}
	cfg.MaxPoll = max(cfg.MaxPoll, cfg.MinPoll)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Job{svc: svc, cfg: cfg}, nil
}

// runtime is the protocol's runtime; an event's step_update message wakes
// its attempts at once.
type runtime struct{ external.Runtime }

// WakesOnUpdate implements stepruntime.Woken.
func (runtime) WakesOnUpdate() {}

// Execute implements stepruntime.Runtime: a poll that changed nothing
// returns no data, so that the engine writes nothing for it.
func (r runtime) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	res := r.Runtime.Execute(ctx, a)
	if res.State == stepruntime.Continue && a.Data[external.KeyLaunch] == external.LaunchDone &&
		reflect.DeepEqual(res.Data, a.Data) {
		res.Data = nil
	}
	return res
}

// Job is one AWS job of a step attempt; it implements external.Job.
type Job struct {
	svc Service
	cfg Config
}

// Labeler is implemented by a Service that names its jobs in messages
// otherwise than "<Name> job" ("Batch job", "EMR step").
type Labeler interface {
	Label() string
}

// label names the service's jobs in messages.
func (j *Job) label() string {
	if l, ok := j.svc.(Labeler); ok {
		return l.Label()
	}
	return j.svc.Name() + " job"
}

// minPoll is the attempt's first poll delay.
func (j *Job) minPoll(a *stepruntime.Attempt) time.Duration {
	if p, ok := j.svc.(Pacer); ok {
		if d := p.MinPoll(a); d > 0 {
			return d
		}
	}
	return j.cfg.MinPoll
}

// Check implements external.Job.
func (j *Job) Check(a *stepruntime.Attempt) error { return j.svc.Check(a) }

// Launch implements external.Job.
func (j *Job) Launch(ctx context.Context, a *stepruntime.Attempt, key string) stepruntime.Result {
	id, data, err := j.svc.Start(ctx, a, key)
	if err != nil {
		msg := external.AWSMessage("start "+j.label(), err)
		switch state := external.AWSState(ctx, err); state {
		case stepruntime.PlatformError:
			// The request may have reached the service: look the job up
			// before anything else, in this attempt.
			return external.Unknown(stepruntime.Continue, j.minPoll(a), msg)
		case stepruntime.Stopped, stepruntime.TimedOut:
			return external.Unknown(state, 0, msg)
		default:
			return stepruntime.Result{State: state, Message: msg}
		}
	}
	j.register(ctx, id, a)
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: j.minPoll(a), Data: jobData(id, data),
		Message: fmt.Sprintf("started %s %s", j.label(), id)}
}

// Find implements external.Job.
func (j *Job) Find(ctx context.Context, a *stepruntime.Attempt, key string) (stepruntime.Result, bool, error) {
	id, data, found, err := j.svc.Find(ctx, a, key)
	if err != nil || !found {
		return stepruntime.Result{}, false, err
	}
	j.register(ctx, id, a)
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Millisecond, Data: jobData(id, data),
		Message: fmt.Sprintf("found %s %s, started for this attempt before the engine restarted", j.label(), id)}, true, nil
}

func jobData(id string, data map[string]any) map[string]any {
	out := map[string]any{KeyJobID: id}
	for k, v := range data {
		out[k] = v
	}
	return out
}

// register records the job for the event path; polling covers a failure.
func (j *Job) register(ctx context.Context, id string, a *stepruntime.Attempt) {
	if j.cfg.Jobs == nil {
		return
	}
	if err := j.cfg.Jobs.Register(ctx, j.svc.Name(), id, a); err != nil {
		j.cfg.Logger.Warn("register AWS job for its events; the step polls it", "service", j.svc.Name(), "job_id", id, "error", err.Error())
	}
}

func (j *Job) forget(ctx context.Context, id string) {
	if j.cfg.Jobs == nil {
		return
	}
	if err := j.cfg.Jobs.Forget(context.WithoutCancel(ctx), j.svc.Name(), id); err != nil {
		j.cfg.Logger.Warn("forget AWS job", "service", j.svc.Name(), "job_id", id, "error", err.Error())
	}
}

// Poll implements external.Job.
func (j *Job) Poll(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	id, _ := a.Data[KeyJobID].(string)
	if id == "" {
		return stepruntime.Result{State: stepruntime.PlatformError, Message: "the attempt has no " + j.label() + " id"}
	}
	st, err := j.svc.Describe(ctx, a, id)
	if err != nil {
		msg := external.AWSMessage("describe "+j.label()+" "+id, err)
		switch state := external.AWSState(ctx, err); state {
		case stepruntime.PlatformError:
			// A failed look at a job that runs is no reason to give up on it.
			j.cfg.Logger.Warn("describe AWS job; polled again later", "service", j.svc.Name(), "job_id", id, "error", err.Error())
			return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: j.backoff(a), Message: msg}
		case stepruntime.FatalError:
			return stepruntime.Result{State: stepruntime.PlatformError, Message: msg}
		default:
			return stepruntime.Result{State: state, Message: msg}
		}
	}
	data := map[string]any{KeyJobState: st.State}
	for k, v := range st.Data {
		data[k] = v
	}
	if st.Phase == Running {
		res := stepruntime.Result{State: stepruntime.Continue, NextPollDelay: j.backoff(a), Data: data}
		if st.State != a.Data[KeyJobState] {
			res.Message = fmt.Sprintf("%s %s", j.label(), st.State)
		}
		return res
	}
	j.forget(ctx, id)
	res := stepruntime.Result{Data: data, Outputs: st.Outputs}
	switch st.Phase {
	case Succeeded:
		res.State, res.Message = stepruntime.Done, fmt.Sprintf("%s %s %s", j.label(), id, st.State)
	case Stopped:
		res.State, res.Message = stepruntime.Stopped, fmt.Sprintf("%s %s was stopped by Maestro (%s)", j.label(), id, st.State)
	case Cancelled:
		switch {
		case a.Data[KeyStopRequested] == true:
			res.State, res.Message = stepruntime.Stopped, fmt.Sprintf("%s %s stopped (%s)", j.label(), id, st.State)
		case st.Platform:
			res.State = stepruntime.PlatformError
			res.Message = fmt.Sprintf("%s %s was cancelled outside this step (%s)", j.label(), id, st.State)
		default:
			res.State = stepruntime.UserError
			res.Message = fmt.Sprintf("%s %s was stopped outside Maestro (%s)", j.label(), id, st.State)
		}
	default:
		res.State = stepruntime.UserError
		if st.Platform {
			res.State = stepruntime.PlatformError
		}
		res.Message = fmt.Sprintf("%s %s %s", j.label(), id, st.State)
	}
	if st.Message != "" {
		res.Message += ": " + st.Message
	}
	return res
}

// backoff is the delay to the next poll: the job's age divided by
// Slowdown (half of it by default), within [MinPoll, MaxPoll] (the
// attempt's own MinPoll may raise both). The age counts from the recorded
// intent, so the schedule survives a restart.
func (j *Job) backoff(a *stepruntime.Attempt) time.Duration {
	lo := j.minPoll(a)
	age := external.LaunchedFor(a.Data, j.cfg.Now())
	return min(max(age/time.Duration(j.cfg.Slowdown), lo), max(j.cfg.MaxPoll, lo))
}

// Cancel implements external.Job: Stop, tried a few times.
func (j *Job) Cancel(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	id, _ := a.Data[KeyJobID].(string)
	if id == "" {
		return stepruntime.Result{State: stepruntime.Stopped}
	}
	// Recorded with the result: a poll after the stop reads the job's
	// cancellation as this stop.
	stopped := map[string]any{KeyStopRequested: true}
	var err error
	for try := range 4 {
		if try > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(try) * time.Second):
			}
		}
		if err = j.svc.Stop(ctx, a, id); err == nil || external.AWSState(ctx, err) != stepruntime.PlatformError {
			break
		}
	}
	j.forget(ctx, id)
	if err != nil {
		j.cfg.Logger.Warn("stop AWS job", "service", j.svc.Name(), "job_id", id, "error", err.Error())
		return stepruntime.Result{State: stepruntime.Stopped, Data: stopped, Message: external.AWSMessage("stop "+j.label()+" "+id, err)}
	}
	return stepruntime.Result{State: stepruntime.Stopped, Data: stopped, Message: fmt.Sprintf("stopped %s %s", j.label(), id)}
}
