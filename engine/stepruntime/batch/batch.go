// Package batch is the Batch step runtime: each attempt submits one AWS
// Batch job (SubmitJob on a job queue, from a job definition, with
// container overrides and parameters from the step's `batch` MAP param)
// and ends with the job's status and exit code. It runs on the awsjob
// machinery: the job's "Batch Job State Change" events complete the step
// (Event), DescribeJobs polled with backoff is the fallback, and no
// worker is held while the job runs. SubmitJob has no idempotency token,
// so the job's name is derived from the attempt's uuid (and tagged with
// it), and after a crash or a takeover the next owner finds the job by
// that name with ListJobs instead of submitting a second one. Stop, kill
// and timeout terminate the job (TerminateJob). See docs/step-runtimes.md.
package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/jobparam"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "Batch"

// ParamBatch is the MAP param holding the job's spec.
const ParamBatch = "batch"

// Output params of a job that succeeded.
const (
	OutputJobID    = "job_id"
	OutputStatus   = "status"
	OutputExitCode = "exit_code"
)

// Keys of the runtime data (runtime_state.data), shown in the step's
// details.
const (
	KeyJobID        = awsjob.KeyJobID
	KeyJobARN       = "job_arn"
	KeyJobName      = "job_name"
	KeyJobQueue     = "job_queue"
	KeyStatus       = awsjob.KeyJobState
	KeyStatusReason = "status_reason"
	KeyExitCode     = "exit_code"
	KeyLogStream    = "log_stream"
)

// Service is the service's name in the job registry.
const Service = "batch"

// Event is how the job's state-change events name it.
var Event = awsjob.EventSource{Source: "aws.batch", DetailType: "Batch Job State Change", IDField: "jobId", Service: Service}

// Tag keys every submitted job carries.
const (
	TagStepInstanceUUID = "maestro:step_instance_uuid"
	TagWorkflowID       = "maestro:workflow_id"
	TagStepID           = "maestro:step_id"
)

// DefaultPollInterval is the first poll's delay; then a job is polled at
// a tenth of its age up to awsjob.PolledMaxPoll, or when its events
// complete it at half its age up to awsjob.DefaultMaxPoll
// (awsjob.PolledConfig).
const DefaultPollInterval = 10 * time.Second

// API is the part of the Batch client the runtime uses; *batch.Client
// has it.
type API interface {
	SubmitJob(ctx context.Context, in *awsbatch.SubmitJobInput, opts ...func(*awsbatch.Options)) (*awsbatch.SubmitJobOutput, error)
	DescribeJobs(ctx context.Context, in *awsbatch.DescribeJobsInput, opts ...func(*awsbatch.Options)) (*awsbatch.DescribeJobsOutput, error)
	ListJobs(ctx context.Context, in *awsbatch.ListJobsInput, opts ...func(*awsbatch.Options)) (*awsbatch.ListJobsOutput, error)
	TerminateJob(ctx context.Context, in *awsbatch.TerminateJobInput, opts ...func(*awsbatch.Options)) (*awsbatch.TerminateJobOutput, error)
}

// Config configures the runtime.
type Config struct {
	// Client calls Batch. Required.
	Client API
	// JobQueue is the default queue of steps that set no job_queue.
	JobQueue string
	// PollInterval and MaxPollInterval bound the poll's backoff
	// (DefaultPollInterval; awsjob.PolledConfig).
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// Jobs registers submitted jobs for the event path (awsjob.Store); nil:
	// polling only.
	Jobs awsjob.Registry
	// Logger receives what the step's timeline does not (required).
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// New returns the Batch runtime.
func New(cfg Config) (stepruntime.Runtime, error) {
	s, err := newSvc(cfg)
	if err != nil {
		return nil, err
	}
	return awsjob.New(s, s.jobConfig())
}

// NewJob returns the Batch job under the external protocol, for runtimes
// that carry their work in a Batch job (Notebook).
func NewJob(cfg Config) (*awsjob.Job, error) {
	s, err := newSvc(cfg)
	if err != nil {
		return nil, err
	}
	return awsjob.NewJob(s, s.jobConfig())
}

func newSvc(cfg Config) (*svc, error) {
	if cfg.Client == nil || cfg.Logger == nil {
		return nil, errors.New("batch: Config.Client and Config.Logger are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return &svc{cfg: cfg}, nil
}

func (j *svc) jobConfig() awsjob.Config {
	c := j.cfg
	return awsjob.PolledConfig(c.Jobs, c.PollInterval, DefaultPollInterval, c.MaxPollInterval, c.Logger, c.Now)
}

// svc is Batch as an awsjob.Service.
type svc struct {
	cfg Config
}

// Spec is a step's job, read from its `batch` param.
type Spec struct {
	JobQueue      string
	JobDefinition string
	// JobName is the name's prefix; the attempt's uuid follows it.
	JobName      string
	Parameters   map[string]string
	Command      []string
	Environment  map[string]string
	Vcpus        string
	Memory       string
	GPU          string
	InstanceType string
	Tags         map[string]string
	// Timeout is the job's attempt duration in Batch (0: the definition's).
	Timeout      time.Duration
	PollInterval time.Duration
}

// Fields of the `batch` param and of its container_overrides.
var (
	Fields         = []string{"job_queue", "job_definition", "job_name", "parameters", "container_overrides", "tags", "timeout", "poll_interval"}
	OverrideFields = []string{"command", "environment", "vcpus", "memory", "gpu", "instance_type"}
)

// ReadSpec reads the step's `batch` param.
func (j *svc) ReadSpec(a *stepruntime.Attempt) (*Spec, error) {
	r, err := jobparam.Open(a.Params, ParamBatch, "job_queue and job_definition (and job_name, parameters, container_overrides, tags, timeout)")
	if err != nil {
		return nil, err
	}
	r.Known(Fields...)
	s := &Spec{
		JobQueue:      r.String("job_queue", j.cfg.JobQueue),
		JobDefinition: r.Required("job_definition"),
		JobName:       r.String("job_name", ""),
		Parameters:    r.StringMap("parameters"),
		Tags:          r.StringMap("tags"),
		Timeout:       r.Duration("timeout", 0, 60*time.Second),
		PollInterval:  r.Duration("poll_interval", j.cfg.PollInterval, 100*time.Millisecond),
	}
	if s.JobQueue == "" {
		r.Fail("%s.job_queue is required (this engine has no default job queue)", ParamBatch)
	}
	if o := r.Sub("container_overrides"); o != nil {
		o.Known(OverrideFields...)
		s.Command = o.Strings("command")
		s.Environment = o.StringMap("environment")
		s.Vcpus = o.String("vcpus", "")
		s.Memory = o.String("memory", "")
		s.GPU = o.String("gpu", "")
		s.InstanceType = o.String("instance_type", "")
		for k := range s.Environment {
			if strings.HasPrefix(k, "AWS_BATCH") {
				o.Fail("%s.environment.%s: names starting with AWS_BATCH are reserved by Batch", o.Name, k)
			}
		}
		r.Absorb(o)
	}
	for k := range s.Tags {
		if strings.HasPrefix(k, "maestro:") || strings.HasPrefix(k, "aws:") {
			r.Fail("%s.tags.%s: tags starting with maestro: or aws: are reserved", ParamBatch, k)
		}
	}
	return s, r.Err()
}

// Name implements awsjob.Service.
func (*svc) Name() string { return Service }

// Label implements awsjob.Labeler.
func (*svc) Label() string { return "Batch job" }

// Check implements awsjob.Service.
func (j *svc) Check(a *stepruntime.Attempt) error {
	_, err := j.ReadSpec(a)
	return err
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// JobName is the name of the attempt's job: the prefix (the step's
// job_name, else "maestro-" and its step id), made safe for Batch
// (letters, digits, - and _, starting with a letter or digit), then the
// attempt's uuid, 128 characters at most. It is what Find looks for.
func JobName(prefix, stepID, uuid string) string {
	if prefix == "" {
		prefix = "maestro-" + stepID
	}
	prefix = strings.TrimLeft(nameUnsafe.ReplaceAllString(prefix, "_"), "_-")
	if prefix == "" {
		prefix = "maestro"
	}
	if max := 128 - len(uuid) - 1; len(prefix) > max {
		prefix = prefix[:max]
	}
	return prefix + "-" + uuid
}

// Start implements awsjob.Service: SubmitJob under the attempt's job name.
func (j *svc) Start(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, error) {
	s, err := j.ReadSpec(a)
	if err != nil {
		return "", nil, err
	}
	name := JobName(s.JobName, a.StepID, key)
	in := &awsbatch.SubmitJobInput{
		JobName:            aws.String(name),
		JobQueue:           aws.String(s.JobQueue),
		JobDefinition:      aws.String(s.JobDefinition),
		Parameters:         s.Parameters,
		ContainerOverrides: j.overrides(a, s),
		Tags:               j.tags(a, s, key),
		PropagateTags:      aws.Bool(true),
	}
	if s.Timeout > 0 {
		in.Timeout = &types.JobTimeout{AttemptDurationSeconds: aws.Int32(int32(min(s.Timeout.Seconds(), 1<<31-1)))}
	}
	// SubmitJob takes no idempotency token: the SDK must not repeat it on
	// its own (a repeat could start a second job). A failure is looked up
	// by the job's name instead, then submitted again only if not found.
	out, err := j.cfg.Client.SubmitJob(ctx, in, func(o *awsbatch.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return "", nil, err
	}
	return aws.ToString(out.JobId), map[string]any{KeyJobARN: aws.ToString(out.JobArn), KeyJobName: name, KeyJobQueue: s.JobQueue,
		KeyStatus: "SUBMITTED"}, nil
}

// MinPoll implements awsjob.Pacer: the step's poll_interval.
func (j *svc) MinPoll(a *stepruntime.Attempt) time.Duration {
	s, err := j.ReadSpec(a)
	if err != nil {
		return 0
	}
	return s.PollInterval
}

// overrides are the container's command and environment: the step's, and
// the attempt's identity and callback token, as for an EcsTask step.
func (j *svc) overrides(a *stepruntime.Attempt, s *Spec) *types.ContainerOverrides {
	env := map[string]string{
		"MAESTRO_WORKFLOW_ID":          a.WorkflowID,
		"MAESTRO_WORKFLOW_INSTANCE_ID": fmt.Sprint(a.InstanceID),
		"MAESTRO_WORKFLOW_RUN_ID":      fmt.Sprint(a.RunID),
		"MAESTRO_STEP_ID":              a.StepID,
		"MAESTRO_STEP_ATTEMPT_ID":      fmt.Sprint(a.AttemptID),
		"MAESTRO_STEP_INSTANCE_UUID":   a.UUID,
	}
	for k, v := range s.Environment {
		env[k] = v
	}
	// After the step's environment: a step cannot replace the callbacks'
	// proof that the caller runs the attempt.
	env["MAESTRO_STEP_TOKEN"] = a.CallbackToken
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	o := &types.ContainerOverrides{Command: s.Command}
	for _, k := range names {
		o.Environment = append(o.Environment, types.KeyValuePair{Name: aws.String(k), Value: aws.String(env[k])})
	}
	for _, rr := range []struct {
		t types.ResourceType
		v string
	}{{types.ResourceTypeVcpu, s.Vcpus}, {types.ResourceTypeMemory, s.Memory}, {types.ResourceTypeGpu, s.GPU}} {
		if rr.v != "" {
			o.ResourceRequirements = append(o.ResourceRequirements, types.ResourceRequirement{Type: rr.t, Value: aws.String(rr.v)})
		}
	}
	if s.InstanceType != "" {
		o.InstanceType = aws.String(s.InstanceType)
	}
	return o
}

// tags are the step's tags and the attempt's identity.
func (j *svc) tags(a *stepruntime.Attempt, s *Spec, key string) map[string]string {
	tags := map[string]string{}
	for k, v := range s.Tags {
		tags[k] = v
	}
	tags[TagStepInstanceUUID] = key
	tags[TagWorkflowID] = truncate(a.WorkflowID, 256)
	tags[TagStepID] = truncate(a.StepID, 256)
	return tags
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Find implements awsjob.Service: ListJobs on the step's queue filtered by
// the attempt's job name (a name filter lists jobs in every status), the
// name compared again here.
func (j *svc) Find(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, bool, error) {
	s, err := j.ReadSpec(a)
	if err != nil {
		return "", nil, false, err
	}
	name := JobName(s.JobName, a.StepID, key)
	in := &awsbatch.ListJobsInput{JobQueue: aws.String(s.JobQueue),
		Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{name}}}}
	var found *types.JobSummary
	for page := 0; page < 100; page++ {
		out, err := j.cfg.Client.ListJobs(ctx, in)
		if err != nil {
			return "", nil, false, fmt.Errorf("ListJobs: %w", err)
		}
		for i := range out.JobSummaryList {
			js := &out.JobSummaryList[i]
			if aws.ToString(js.JobName) == name && (found == nil || aws.ToInt64(js.CreatedAt) < aws.ToInt64(found.CreatedAt)) {
				found = js
			}
		}
		if out.NextToken == nil || found != nil {
			break
		}
		in.NextToken = out.NextToken
	}
	if found == nil {
		return "", nil, false, nil
	}
	return aws.ToString(found.JobId), map[string]any{KeyJobARN: aws.ToString(found.JobArn), KeyJobName: name, KeyJobQueue: s.JobQueue,
		KeyStatus: string(found.Status)}, true, nil
}

// Describe implements awsjob.Service: DescribeJobs.
func (j *svc) Describe(ctx context.Context, _ *stepruntime.Attempt, id string) (awsjob.Status, error) {
	out, err := j.cfg.Client.DescribeJobs(ctx, &awsbatch.DescribeJobsInput{Jobs: []string{id}})
	if err != nil {
		return awsjob.Status{}, err
	}
	if len(out.Jobs) == 0 {
		return awsjob.Status{Phase: awsjob.Failed, Platform: true, State: "UNKNOWN", Message: "Batch no longer knows the job"}, nil
	}
	return JobStatus(&out.Jobs[0]), nil
}

// StatusState maps a Batch job's status to the attempt's state: the
// states before the end are Continue, SUCCEEDED is Done, FAILED is the
// user's error when the container exited non-zero, Stopped when Maestro
// terminated it, and the platform's otherwise (no exit code: the job never
// ran to its end, its host went away, its image could not be pulled). It
// is a plain function so that a Batch Job State Change event can complete
// a step as a poll does.
func StatusState(status string, exitCode *int32, reason string) stepruntime.State {
	switch status {
	case "SUCCEEDED":
		return stepruntime.Done
	case "FAILED":
		switch {
		case strings.HasPrefix(reason, TerminateReasonPrefix):
			return stepruntime.Stopped
		case exitCode != nil && *exitCode != 0:
			return stepruntime.UserError
		}
		return stepruntime.PlatformError
	case "SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "":
		return stepruntime.Continue
	}
	return stepruntime.Continue
}

// TerminateReasonPrefix starts the reason Cancel gives TerminateJob, so
// that the job's end reads as stopped, not failed.
const TerminateReasonPrefix = "Terminated by Maestro"

// JobStatus is what a described job says of the attempt (StatusState):
// its status, and at its end the reason, exit code and log stream in the
// runtime data and, when it succeeded, its outputs.
func JobStatus(d *types.JobDetail) awsjob.Status {
	status := string(d.Status)
	reason := aws.ToString(d.StatusReason)
	var exit *int32
	var logStream string
	if c := d.Container; c != nil {
		exit = c.ExitCode
		logStream = aws.ToString(c.LogStreamName)
		if r := aws.ToString(c.Reason); r != "" && r != reason {
			reason = strings.TrimPrefix(reason+": "+r, ": ")
		}
	}
	st := awsjob.Status{State: status, Data: map[string]any{}}
	if logStream != "" {
		st.Data[KeyLogStream] = logStream
	}
	state := StatusState(status, exit, reason)
	if state == stepruntime.Continue {
		return st
	}
	st.Data[KeyStatusReason] = reason
	if exit != nil {
		st.Data[KeyExitCode] = int64(*exit)
	}
	switch state {
	case stepruntime.Done:
		st.Phase = awsjob.Succeeded
		code := int64(0)
		if exit != nil {
			code = int64(*exit)
		}
		st.Outputs = map[string]any{
			OutputJobID:    params.Value{Type: workflow.ParamTypeString, Value: aws.ToString(d.JobId)},
			OutputStatus:   params.Value{Type: workflow.ParamTypeString, Value: status},
			OutputExitCode: params.Value{Type: workflow.ParamTypeLong, Value: code},
		}
	case stepruntime.UserError:
		st.Phase, st.Message = awsjob.Failed, fmt.Sprintf("the container exited with code %d: %s", *exit, reason)
	case stepruntime.Stopped:
		st.Phase, st.Message = awsjob.Stopped, reason
	default:
		st.Phase, st.Platform = awsjob.Failed, true
		st.Message = "without an exit code of its container: " + reason
	}
	return st
}

// Stop implements awsjob.Service: TerminateJob (it cancels a job still
// waiting in its queue too), with Maestro's reason.
func (j *svc) Stop(ctx context.Context, a *stepruntime.Attempt, id string) error {
	reason := fmt.Sprintf("%s: %s/%d/%d step %s attempt %d", TerminateReasonPrefix, a.WorkflowID, a.InstanceID, a.RunID, a.StepID, a.AttemptID)
	_, err := j.cfg.Client.TerminateJob(ctx, &awsbatch.TerminateJobInput{JobId: aws.String(id), Reason: aws.String(truncate(reason, 255))})
	return err
}
