// Package glue is the Glue step runtime: each attempt starts one run of a
// Glue job (Spark or Python shell) with StartJobRun, configured by the
// step's `glue` MAP param (job_name, arguments), and ends with the run:
// its id, state, execution time and error become output params. It runs
// on the awsjob machinery. StartJobRun has no idempotency token, so the
// run carries the attempt's uuid as the argument --maestro_step_instance_uuid,
// and a new owner after a crash finds the run among the job's recent runs
// (GetJobRuns) instead of starting another. See docs/step-runtimes.md.
package glue

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/glue/types"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "Glue"

// Param is the MAP param holding the job run.
const Param = "glue"

// Service is the service's name in the job registry.
const Service = "glue"

// ArgAttempt is the run argument carrying the attempt's uuid.
const ArgAttempt = "--maestro_step_instance_uuid"

// Output params of a run that ended.
const (
	OutputJobRunID      = "job_run_id"
	OutputState         = "state"
	OutputExecutionTime = "execution_time"
	OutputError         = "error"
)

// Event is how the run's state-change events name it.
var Event = awsjob.EventSource{Source: "aws.glue", DetailType: "Glue Job State Change", IDField: "jobRunId", Service: Service}

// findPages bounds the pages of GetJobRuns a lookup reads.
const findPages = 5

var fields = []string{"job_name", "arguments"}

// API is the part of the Glue client the runtime uses; *glue.Client has
// it.
type API interface {
	StartJobRun(ctx context.Context, in *glue.StartJobRunInput, opts ...func(*glue.Options)) (*glue.StartJobRunOutput, error)
	GetJobRun(ctx context.Context, in *glue.GetJobRunInput, opts ...func(*glue.Options)) (*glue.GetJobRunOutput, error)
	GetJobRuns(ctx context.Context, in *glue.GetJobRunsInput, opts ...func(*glue.Options)) (*glue.GetJobRunsOutput, error)
	BatchStopJobRun(ctx context.Context, in *glue.BatchStopJobRunInput, opts ...func(*glue.Options)) (*glue.BatchStopJobRunOutput, error)
}

// New returns the Glue runtime over client.
func New(client API, cfg awsjob.Config) (stepruntime.Runtime, error) {
	if client == nil {
		return nil, fmt.Errorf("glue: a client is required")
	}
	return awsjob.New(svc{client}, cfg)
}

type svc struct{ c API }

type spec struct {
	JobName   string
	Arguments map[string]string
}

func (svc) Name() string { return Service }

func (s svc) Check(a *stepruntime.Attempt) error {
	_, err := read(a)
	return err
}

func read(a *stepruntime.Attempt) (*spec, error) {
	r, err := awsjob.ReadSpec(a, Param, fields, "job_name (and arguments)")
	if err != nil {
		return nil, err
	}
	sp := &spec{JobName: r.String("job_name"), Arguments: map[string]string{}}
	r.Require("job_name", sp.JobName)
	for k, v := range r.StringMap("arguments") {
		// Glue's arguments are named --key; a definition may leave the
		// dashes out.
		if !strings.HasPrefix(k, "--") {
			k = "--" + k
		}
		sp.Arguments[k] = v
	}
	if _, ok := sp.Arguments[ArgAttempt]; ok {
		return nil, fmt.Errorf("%s.arguments: %s is set by Maestro", Param, ArgAttempt)
	}
	return sp, r.Err()
}

// Start implements awsjob.Service.
func (s svc) Start(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, error) {
	sp, err := read(a)
	if err != nil {
		return "", nil, err
	}
	args := maps.Clone(sp.Arguments)
	args[ArgAttempt] = key
	out, err := s.c.StartJobRun(ctx, &glue.StartJobRunInput{JobName: aws.String(sp.JobName), Arguments: args})
	if err != nil {
		return "", nil, err
	}
	return aws.ToString(out.JobRunId), map[string]any{"job_name": sp.JobName}, nil
}

// Find implements awsjob.Service: the job's recent runs whose arguments
// carry the attempt's uuid.
func (s svc) Find(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, bool, error) {
	sp, err := read(a)
	if err != nil {
		return "", nil, false, err
	}
	var next *string
	for range findPages {
		out, err := s.c.GetJobRuns(ctx, &glue.GetJobRunsInput{JobName: aws.String(sp.JobName), NextToken: next})
		if err != nil {
			return "", nil, false, fmt.Errorf("GetJobRuns: %w", err)
		}
		for _, r := range out.JobRuns {
			if r.Arguments[ArgAttempt] == key {
				return aws.ToString(r.Id), map[string]any{"job_name": sp.JobName}, true, nil
			}
		}
		if next = out.NextToken; next == nil {
			break
		}
	}
	return "", nil, false, nil
}

// Describe implements awsjob.Service.
func (s svc) Describe(ctx context.Context, a *stepruntime.Attempt, id string) (awsjob.Status, error) {
	sp, err := read(a)
	if err != nil {
		return awsjob.Status{}, err
	}
	out, err := s.c.GetJobRun(ctx, &glue.GetJobRunInput{JobName: aws.String(sp.JobName), RunId: aws.String(id)})
	if err != nil {
		return awsjob.Status{}, err
	}
	r := out.JobRun
	if r == nil {
		return awsjob.Status{}, fmt.Errorf("GetJobRun %s: empty answer", id)
	}
	st := awsjob.Status{State: string(r.JobRunState), Message: aws.ToString(r.ErrorMessage)}
	switch r.JobRunState {
	case types.JobRunStateSucceeded:
		st.Phase = awsjob.Succeeded
	case types.JobRunStateFailed, types.JobRunStateTimeout, types.JobRunStateExpired:
		st.Phase = awsjob.Failed
	case types.JobRunStateError:
		// Glue's own trouble (capacity, an internal error).
		st.Phase, st.Platform = awsjob.Failed, true
	case types.JobRunStateStopped:
		st.Phase = awsjob.Cancelled
	default:
		return st, nil
	}
	exec := int64(r.ExecutionTime)
	st.Data = map[string]any{OutputExecutionTime: exec}
	st.Outputs = map[string]any{
		OutputJobRunID:      awsjob.Output(workflow.ParamTypeString, id),
		OutputState:         awsjob.Output(workflow.ParamTypeString, st.State),
		OutputExecutionTime: awsjob.Output(workflow.ParamTypeLong, exec),
		OutputError:         awsjob.Output(workflow.ParamTypeString, st.Message),
	}
	return st, nil
}

// Stop implements awsjob.Service: BatchStopJobRun. A run that has already
// ended is no error.
func (s svc) Stop(ctx context.Context, a *stepruntime.Attempt, id string) error {
	sp, err := read(a)
	if err != nil {
		return err
	}
	out, err := s.c.BatchStopJobRun(ctx, &glue.BatchStopJobRunInput{JobName: aws.String(sp.JobName), JobRunIds: []string{id}})
	if err != nil {
		return err
	}
	for _, e := range out.Errors {
		if e.ErrorDetail != nil && aws.ToString(e.ErrorDetail.ErrorCode) != "InvalidInputException" {
			return fmt.Errorf("BatchStopJobRun %s: %s: %s", id, aws.ToString(e.ErrorDetail.ErrorCode), aws.ToString(e.ErrorDetail.ErrorMessage))
		}
	}
	return nil
}
