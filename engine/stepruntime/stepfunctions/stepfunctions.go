// Package stepfunctions is the StepFunctions step runtime: each attempt
// starts one execution of a Step Functions state machine with
// StartExecution, configured by the step's `step_functions` MAP param
// (state_machine_arn, input), and ends with the execution: its ARN, status
// and output become output params (and each member of an output object one
// of its own). It runs on the awsjob machinery: the execution's name is
// derived from the attempt's uuid, so a repeated start is refused (or, for
// the same input, answered with the same execution) and a new owner after a
// crash finds the execution by its name. See docs/step-runtimes.md.
package stepfunctions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "StepFunctions"

// Param is the MAP param holding the execution.
const Param = "step_functions"

// Service is the service's name in the job registry.
const Service = "states"

// Output params of an execution that ended.
const (
	OutputExecutionARN = "execution_arn"
	OutputStatus       = "status"
	// OutputOutput is the execution's output, JSON text; the members of an
	// object are output params of their own too.
	OutputOutput = "output"
	OutputError  = "error"
)

// Event is how the execution's status-change events name it.
var Event = awsjob.EventSource{Source: "aws.states", DetailType: "Step Functions Execution Status Change",
	IDField: "executionArn", Service: Service}

var fields = []string{"state_machine_arn", "input"}

// API is the part of the Step Functions client the runtime uses;
// *sfn.Client has it.
type API interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
	StopExecution(ctx context.Context, in *sfn.StopExecutionInput, opts ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error)
}

// New returns the StepFunctions runtime over client.
func New(client API, cfg awsjob.Config) (stepruntime.Runtime, error) {
	if client == nil {
		return nil, fmt.Errorf("stepfunctions: a client is required")
	}
	return awsjob.New(svc{client}, cfg)
}

type svc struct{ c API }

type spec struct {
	StateMachineARN string
	Input           string
}

func (svc) Name() string { return Service }

func (s svc) Check(a *stepruntime.Attempt) error {
	_, err := read(a)
	return err
}

func read(a *stepruntime.Attempt) (*spec, error) {
	r, err := awsjob.ReadSpec(a, Param, fields, "state_machine_arn (and input)")
	if err != nil {
		return nil, err
	}
	sp := &spec{StateMachineARN: r.String("state_machine_arn"), Input: r.JSON("input", "{}")}
	r.Require("state_machine_arn", sp.StateMachineARN)
	if sp.StateMachineARN != "" && !strings.Contains(sp.StateMachineARN, ":stateMachine:") {
		return nil, fmt.Errorf("%s.state_machine_arn %q: want a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)",
			Param, sp.StateMachineARN)
	}
	return sp, r.Err()
}

// ExecutionName is the name of the attempt's execution (at most 80
// characters).
func ExecutionName(key string) string { return "maestro-" + key }

// executionARN is the ARN Step Functions gives the execution named name of
// a state machine.
func executionARN(stateMachine, name string) string {
	// A version or alias ARN (stateMachine:NAME:QUALIFIER) runs the state
	// machine NAME.
	parts := strings.Split(stateMachine, ":")
	if len(parts) > 7 {
		parts = parts[:7]
	}
	return strings.Replace(strings.Join(parts, ":"), ":stateMachine:", ":execution:", 1) + ":" + name
}

// Start implements awsjob.Service.
func (s svc) Start(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, error) {
	sp, err := read(a)
	if err != nil {
		return "", nil, err
	}
	out, err := s.c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(sp.StateMachineARN),
		Name: aws.String(ExecutionName(key)), Input: aws.String(sp.Input)})
	var exists *types.ExecutionAlreadyExists
	if errors.As(err, &exists) {
		// Started by this attempt before (its name says so).
		return executionARN(sp.StateMachineARN, ExecutionName(key)), nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return aws.ToString(out.ExecutionArn), nil, nil
}

// Find implements awsjob.Service: DescribeExecution of the execution the
// attempt's name gives.
func (s svc) Find(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, bool, error) {
	sp, err := read(a)
	if err != nil {
		return "", nil, false, err
	}
	arn := executionARN(sp.StateMachineARN, ExecutionName(key))
	_, err = s.c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	var missing *types.ExecutionDoesNotExist
	if errors.As(err, &missing) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("DescribeExecution: %w", err)
	}
	return arn, nil, true, nil
}

// Describe implements awsjob.Service.
func (s svc) Describe(ctx context.Context, _ *stepruntime.Attempt, id string) (awsjob.Status, error) {
	out, err := s.c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(id)})
	if err != nil {
		return awsjob.Status{}, err
	}
	st := awsjob.Status{State: string(out.Status)}
	switch out.Status {
	case types.ExecutionStatusSucceeded:
		st.Phase = awsjob.Succeeded
	case types.ExecutionStatusFailed, types.ExecutionStatusTimedOut:
		st.Phase = awsjob.Failed
		st.Message = strings.TrimPrefix(aws.ToString(out.Error)+": "+aws.ToString(out.Cause), ": ")
	case types.ExecutionStatusAborted:
		st.Phase = awsjob.Cancelled
	default:
		return st, nil
	}
	output := aws.ToString(out.Output)
	st.Outputs = awsjob.ObjectOutputs(output)
	if st.Outputs == nil {
		st.Outputs = map[string]any{}
	}
	st.Outputs[OutputExecutionARN] = awsjob.Output(workflow.ParamTypeString, id)
	st.Outputs[OutputStatus] = awsjob.Output(workflow.ParamTypeString, st.State)
	st.Outputs[OutputOutput] = awsjob.Output(workflow.ParamTypeString, output)
	if st.Message != "" {
		st.Outputs[OutputError] = awsjob.Output(workflow.ParamTypeString, st.Message)
	}
	return st, nil
}

// Stop implements awsjob.Service: StopExecution.
func (s svc) Stop(ctx context.Context, a *stepruntime.Attempt, id string) error {
	_, err := s.c.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(id),
		Error: aws.String("maestro.Stopped"),
		Cause: aws.String(fmt.Sprintf("stopped by Maestro: %s/%d/%d step %s attempt %d", a.WorkflowID, a.InstanceID, a.RunID, a.StepID, a.AttemptID))})
	return err
}
