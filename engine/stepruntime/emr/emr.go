// Package emr is the Emr step runtime: each attempt adds one step to a
// running EMR cluster (AddJobFlowSteps, from the step's `emr` MAP param:
// cluster_id and the step's name, jar, args, main class, properties and
// action_on_failure) and ends with the step's state. It runs on the
// awsjob machinery: the cluster's "EMR Step Status Change" events complete
// the step (Event), DescribeStep polled with backoff is the fallback, and
// no worker is held while it runs. AddJobFlowSteps has no idempotency
// token, so the EMR step's name carries the attempt's uuid, and after a
// crash or a takeover the next owner finds the step by that name with
// ListSteps instead of adding a second one. Stop, kill and timeout cancel
// the step (CancelSteps). See docs/step-runtimes.md.
package emr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"
	"github.com/aws/aws-sdk-go-v2/service/emr/types"
	"github.com/aws/smithy-go"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/jobparam"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "Emr"

// ParamEMR is the MAP param holding the EMR step's spec.
const ParamEMR = "emr"

// Output params of an EMR step that completed.
const (
	OutputStepID    = "emr_step_id"
	OutputState     = "state"
	OutputClusterID = "cluster_id"
)

// Keys of the runtime data (runtime_state.data), shown in the step's
// details.
const (
	KeyClusterID = "cluster_id"
	// KeyStepID is the EMR step's id (also the job's id, awsjob.KeyJobID).
	KeyStepID   = "step_id"
	KeyStepName = "step_name"
	KeyState    = awsjob.KeyJobState
	KeyReason   = "reason"
	KeyLogFile  = "log_file"
	// KeyCancelled is set once the engine asked EMR to cancel the step.
	KeyCancelled = awsjob.KeyStopRequested
)

// Service is the service's name in the job registry.
const Service = "emr"

// Event is how the step's state-change events name it.
var Event = awsjob.EventSource{Source: "aws.emr", DetailType: "EMR Step Status Change", IDField: "stepId", Service: Service}

// DefaultJar runs a command on the cluster (spark-submit, hive, ...).
const DefaultJar = "command-runner.jar"

// DefaultPollInterval is the first poll's delay; then a step is polled at
// a tenth of its age up to awsjob.PolledMaxPoll, or when its events
// complete it at half its age up to awsjob.DefaultMaxPoll
// (awsjob.PolledConfig).
const DefaultPollInterval = 15 * time.Second

// API is the part of the EMR client the runtime uses; *emr.Client has it.
type API interface {
	AddJobFlowSteps(ctx context.Context, in *awsemr.AddJobFlowStepsInput, opts ...func(*awsemr.Options)) (*awsemr.AddJobFlowStepsOutput, error)
	DescribeStep(ctx context.Context, in *awsemr.DescribeStepInput, opts ...func(*awsemr.Options)) (*awsemr.DescribeStepOutput, error)
	ListSteps(ctx context.Context, in *awsemr.ListStepsInput, opts ...func(*awsemr.Options)) (*awsemr.ListStepsOutput, error)
	CancelSteps(ctx context.Context, in *awsemr.CancelStepsInput, opts ...func(*awsemr.Options)) (*awsemr.CancelStepsOutput, error)
}

// Config configures the runtime.
type Config struct {
	// Client calls EMR. Required.
	Client API
	// ClusterID is the default cluster of steps that set no cluster_id.
	ClusterID string
	// PollInterval and MaxPollInterval bound the poll's backoff.
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// Jobs registers added steps for the event path (awsjob.Store); nil:
	// polling only.
	Jobs awsjob.Registry
	// Logger receives what the step's timeline does not (required).
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// New returns the Emr runtime.
func New(cfg Config) (stepruntime.Runtime, error) {
	if cfg.Client == nil || cfg.Logger == nil {
		return nil, errors.New("emr: Config.Client and Config.Logger are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return awsjob.New(&job{cfg: cfg},
		awsjob.PolledConfig(cfg.Jobs, cfg.PollInterval, DefaultPollInterval, cfg.MaxPollInterval, cfg.Logger, cfg.Now))
}

// job is EMR as an awsjob.Service.
type job struct {
	cfg Config
}

// Name implements awsjob.Service.
func (*job) Name() string { return Service }

// Label implements awsjob.Labeler.
func (*job) Label() string { return "EMR step" }

// MinPoll implements awsjob.Pacer: the step's poll_interval.
func (j *job) MinPoll(a *stepruntime.Attempt) time.Duration {
	s, err := j.spec(a)
	if err != nil {
		return 0
	}
	return s.PollInterval
}

// spec is a step's EMR step, read from its `emr` param.
type spec struct {
	ClusterID       string
	Name            string
	Jar             string
	Args            []string
	MainClass       string
	Properties      map[string]string
	ActionOnFailure types.ActionOnFailure
	PollInterval    time.Duration
}

// Fields of the `emr` param and of its step.
var (
	Fields     = []string{"cluster_id", "step", "poll_interval"}
	StepFields = []string{"name", "jar", "args", "main_class", "properties", "action_on_failure"}
)

var actions = []types.ActionOnFailure{types.ActionOnFailureContinue, types.ActionOnFailureCancelAndWait,
	types.ActionOnFailureTerminateCluster, types.ActionOnFailureTerminateJobFlow}

func (j *job) spec(a *stepruntime.Attempt) (*spec, error) {
	r, err := jobparam.Open(a.Params, ParamEMR, "cluster_id and step (a MAP with name, jar, args, main_class, properties, action_on_failure)")
	if err != nil {
		return nil, err
	}
	r.Known(Fields...)
	s := &spec{ClusterID: r.String("cluster_id", j.cfg.ClusterID), Jar: DefaultJar, ActionOnFailure: types.ActionOnFailureContinue,
		PollInterval: r.Duration("poll_interval", j.cfg.PollInterval, 100*time.Millisecond)}
	if s.ClusterID == "" {
		r.Fail("%s.cluster_id is required (this engine has no default cluster)", ParamEMR)
	}
	st := r.Sub("step")
	if st == nil {
		r.Fail("%s.step is required: a MAP with name, jar, args (and main_class, properties, action_on_failure)", ParamEMR)
		return s, r.Err()
	}
	st.Known(StepFields...)
	s.Name = st.String("name", "")
	s.Jar = st.String("jar", DefaultJar)
	s.Args = st.Strings("args")
	s.MainClass = st.String("main_class", "")
	s.Properties = st.StringMap("properties")
	if v := st.String("action_on_failure", ""); v != "" {
		s.ActionOnFailure = types.ActionOnFailure(strings.ToUpper(v))
		found := false
		for _, a := range actions {
			found = found || a == s.ActionOnFailure
		}
		if !found {
			st.Fail("%s.action_on_failure %q: want CONTINUE, CANCEL_AND_WAIT, TERMINATE_CLUSTER or TERMINATE_JOB_FLOW", st.Name, v)
		}
	}
	if s.Jar == "" {
		st.Fail("%s.jar must not be empty", st.Name)
	}
	r.Absorb(st)
	return s, r.Err()
}

// Check implements awsjob.Service.
func (j *job) Check(a *stepruntime.Attempt) error {
	_, err := j.spec(a)
	return err
}

// StepName is the EMR step's name for the attempt: the step's name (else
// "maestro-" and its step id), then the attempt's uuid, 256 characters at
// most. It is what Find looks for.
func StepName(name, stepID, uuid string) string {
	if name == "" {
		name = "maestro-" + stepID
	}
	if max := 256 - len(uuid) - 1; len(name) > max {
		name = name[:max]
	}
	return name + "-" + uuid
}

// Start implements awsjob.Service: AddJobFlowSteps with one step.
func (j *job) Start(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, error) {
	s, err := j.spec(a)
	if err != nil {
		return "", nil, err
	}
	name := StepName(s.Name, a.StepID, key)
	hj := &types.HadoopJarStepConfig{Jar: aws.String(s.Jar), Args: s.Args}
	if s.MainClass != "" {
		hj.MainClass = aws.String(s.MainClass)
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hj.Properties = append(hj.Properties, types.KeyValue{Key: aws.String(k), Value: aws.String(s.Properties[k])})
	}
	// AddJobFlowSteps takes no idempotency token: the SDK must not repeat
	// it on its own. A failure is looked up by the step's name instead.
	out, err := j.cfg.Client.AddJobFlowSteps(ctx, &awsemr.AddJobFlowStepsInput{JobFlowId: aws.String(s.ClusterID),
		Steps: []types.StepConfig{{Name: aws.String(name), ActionOnFailure: s.ActionOnFailure, HadoopJarStep: hj}}},
		func(o *awsemr.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return "", nil, err
	}
	if len(out.StepIds) != 1 {
		return "", nil, fmt.Errorf("AddJobFlowSteps answered %d step ids for one step", len(out.StepIds))
	}
	id := out.StepIds[0]
	return id, map[string]any{KeyClusterID: s.ClusterID, KeyStepID: id, KeyStepName: name, KeyState: "PENDING"}, nil
}

// Find implements awsjob.Service: ListSteps of the cluster (newest first,
// paged), the one whose name is the attempt's.
func (j *job) Find(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, bool, error) {
	s, err := j.spec(a)
	if err != nil {
		return "", nil, false, err
	}
	name := StepName(s.Name, a.StepID, key)
	in := &awsemr.ListStepsInput{ClusterId: aws.String(s.ClusterID)}
	for page := 0; page < 100; page++ {
		out, err := j.cfg.Client.ListSteps(ctx, in)
		if err != nil {
			return "", nil, false, fmt.Errorf("ListSteps: %w", err)
		}
		for _, st := range out.Steps {
			if aws.ToString(st.Name) != name {
				continue
			}
			id := aws.ToString(st.Id)
			state := ""
			if st.Status != nil {
				state = string(st.Status.State)
			}
			return id, map[string]any{KeyClusterID: s.ClusterID, KeyStepID: id, KeyStepName: name, KeyState: state}, true, nil
		}
		if out.Marker == nil {
			break
		}
		in.Marker = out.Marker
	}
	return "", nil, false, nil
}

// Describe implements awsjob.Service: DescribeStep on the step's cluster.
func (j *job) Describe(ctx context.Context, a *stepruntime.Attempt, id string) (awsjob.Status, error) {
	cluster, _ := a.Data[KeyClusterID].(string)
	if cluster == "" {
		return awsjob.Status{Phase: awsjob.Failed, Platform: true, State: "UNKNOWN", Message: "the attempt has no EMR cluster id"}, nil
	}
	out, err := j.cfg.Client.DescribeStep(ctx, &awsemr.DescribeStepInput{ClusterId: aws.String(cluster), StepId: aws.String(id)})
	if err != nil {
		return awsjob.Status{}, err
	}
	if out.Step == nil || out.Step.Status == nil {
		return awsjob.Status{Phase: awsjob.Failed, Platform: true, State: "UNKNOWN",
			Message: fmt.Sprintf("EMR no longer knows the step in cluster %s", cluster)}, nil
	}
	stopped, _ := a.Data[KeyCancelled].(bool)
	return StepStatus(cluster, id, out.Step.Status, stopped), nil
}

// StepState maps an EMR step's state to the attempt's state: PENDING,
// CANCEL_PENDING and RUNNING are Continue, COMPLETED is Done, FAILED is
// the user's error (the job on the cluster failed), CANCELLED is Stopped
// when the engine asked for it and the platform's otherwise (an earlier
// step's action_on_failure, someone else), INTERRUPTED (the cluster went
// away) the platform's. It is a plain function so that an EMR Step Status
// Change event can complete a step as a poll does.
func StepState(state string, cancelledByEngine bool) stepruntime.State {
	switch types.StepState(state) {
	case types.StepStateCompleted:
		return stepruntime.Done
	case types.StepStateFailed:
		return stepruntime.UserError
	case types.StepStateCancelled:
		if cancelledByEngine {
			return stepruntime.Stopped
		}
		return stepruntime.PlatformError
	case types.StepStateInterrupted:
		return stepruntime.PlatformError
	}
	return stepruntime.Continue
}

// StepStatus is what a described EMR step says of the attempt
// (StepState; stopped: the engine asked EMR to cancel it): at its end the
// reason and log file in the runtime data and, when it completed, its
// outputs.
func StepStatus(cluster, id string, st *types.StepStatus, stopped bool) awsjob.Status {
	state := string(st.State)
	out := awsjob.Status{State: state}
	run := StepState(state, stopped)
	if run == stepruntime.Continue {
		return out
	}
	out.Data = map[string]any{}
	why := ""
	if f := st.FailureDetails; f != nil {
		why = strings.TrimPrefix(aws.ToString(f.Reason)+": "+aws.ToString(f.Message), ": ")
		if lf := aws.ToString(f.LogFile); lf != "" {
			out.Data[KeyLogFile] = lf
		}
	}
	if why == "" && st.StateChangeReason != nil {
		why = aws.ToString(st.StateChangeReason.Message)
	}
	if why != "" {
		out.Data[KeyReason] = why
	}
	out.Message = why
	switch run {
	case stepruntime.Done:
		out.Phase = awsjob.Succeeded
		out.Outputs = map[string]any{
			OutputStepID:    params.Value{Type: workflow.ParamTypeString, Value: id},
			OutputState:     params.Value{Type: workflow.ParamTypeString, Value: state},
			OutputClusterID: params.Value{Type: workflow.ParamTypeString, Value: cluster},
		}
	case stepruntime.UserError:
		out.Phase = awsjob.Failed
	case stepruntime.Stopped:
		out.Phase = awsjob.Stopped
	default:
		// Cancelled by someone else (an earlier step's action_on_failure)
		// or interrupted (the cluster went away).
		out.Phase, out.Platform = awsjob.Failed, true
	}
	return out
}

// Stop implements awsjob.Service: CancelSteps, the step's process
// terminated (a pending step is just cancelled).
func (j *job) Stop(ctx context.Context, a *stepruntime.Attempt, id string) error {
	cluster, _ := a.Data[KeyClusterID].(string)
	out, err := j.cfg.Client.CancelSteps(ctx, &awsemr.CancelStepsInput{ClusterId: aws.String(cluster), StepIds: []string{id},
		StepCancellationOption: types.StepCancellationOptionTerminateProcess})
	if err != nil {
		return err
	}
	for _, info := range out.CancelStepsInfoList {
		if info.Status == types.CancelStepsRequestStatusFailed {
			// The service's refusal (the step has ended): not tried again.
			return &smithy.GenericAPIError{Code: "CancelStepsFailed", Message: aws.ToString(info.Reason), Fault: smithy.FaultClient}
		}
	}
	return nil
}
