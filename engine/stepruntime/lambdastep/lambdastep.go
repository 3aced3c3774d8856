// Package lambdastep is the Lambda step runtime: each attempt invokes an
// AWS Lambda function with a JSON payload from the step's `lambda` MAP
// param. Synchronously (RequestResponse, the default) the function's result
// becomes the step's outputs; asynchronously (mode "async", an Event
// invocation) the function reports back itself, with PUT
// /api/v3/output-data for its outputs and PUT /api/v3/step-completion when
// it is done. It runs under the external protocol, so an attempt invokes
// the function at most once. See docs/step-runtimes.md.
package lambdastep

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "Lambda"

// ParamLambda is the MAP param holding the invocation.
const ParamLambda = "lambda"

// Modes of invocation.
const (
	ModeSync  = "sync"
	ModeAsync = "async"
)

// OutputResult holds a synchronous function's result when it is not a
// JSON object (an object's members are outputs of their own).
const OutputResult = "result"

// IdentityKey is the member an asynchronous invocation's payload gets: the
// attempt's identity, in the shape the output-data and step-completion
// calls take, so that the function can call back.
const IdentityKey = "maestro"

// Keys of the runtime data (runtime_state.data).
const (
	KeyFunction        = "function_name"
	KeyMode            = "mode"
	KeyRequestID       = "request_id"
	KeyExecutedVersion = "executed_version"
	KeyFunctionError   = "function_error"
)

// DefaultPollInterval is how often an asynchronous attempt checks for its
// completion when no step_update message woke it first.
const DefaultPollInterval = 10 * time.Second

// API is the part of the Lambda client the runtime uses; *lambda.Client
// has it.
type API interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Completions reads an attempt's completion call; *completion.Store has
// it.
type Completions interface {
	Completion(ctx context.Context, stepUUID string) (*completion.Completion, error)
}

// Config configures the runtime.
type Config struct {
	// Client calls Lambda. Required.
	Client API
	// Completions reads completion calls; required for the async mode.
	Completions Completions
	// PollInterval is the async mode's default poll (DefaultPollInterval).
	PollInterval time.Duration
}

// New returns the Lambda runtime.
func New(cfg Config) (stepruntime.Runtime, error) {
	if cfg.Client == nil {
		return nil, errors.New("lambdastep: Config.Client is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return runtime{external.Runtime{Job: &job{cfg: cfg}}}, nil
}

// runtime is the protocol's runtime; a completion call's step_update
// message wakes its attempts at once.
type runtime struct{ external.Runtime }

// WakesOnUpdate implements stepruntime.Woken.
func (runtime) WakesOnUpdate() {}

type job struct {
	cfg Config
}

// spec is a step's invocation, read from its params.
type spec struct {
	Function  string
	Qualifier string
	Payload   []byte
	Mode      string
	Poll      time.Duration
}

// Check implements external.Job.
func (j *job) Check(a *stepruntime.Attempt) error {
	_, err := j.spec(a)
	return err
}

func (j *job) spec(a *stepruntime.Attempt) (*spec, error) {
	m, ok := a.Params[ParamLambda].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a Lambda step needs the %q param: a MAP with function_name (and optionally qualifier, payload, mode)", ParamLambda)
	}
	s := &spec{Mode: ModeSync, Poll: j.cfg.PollInterval}
	for k, v := range m {
		switch k {
		case "function_name", "qualifier", "mode":
			str, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s.%s must be a STRING, got %T", ParamLambda, k, v)
			}
			switch k {
			case "function_name":
				s.Function = strings.TrimSpace(str)
			case "qualifier":
				s.Qualifier = strings.TrimSpace(str)
			default:
				s.Mode = strings.ToLower(strings.TrimSpace(str))
			}
		case "payload":
			p, err := payload(v)
			if err != nil {
				return nil, fmt.Errorf("%s.payload: %v", ParamLambda, err)
			}
			s.Payload = p
		case "poll_interval":
			d, err := pollInterval(v)
			if err != nil {
				return nil, fmt.Errorf("%s.poll_interval: %v", ParamLambda, err)
			}
			s.Poll = d
		default:
			return nil, fmt.Errorf("%s.%s: unknown field; the fields are function_name, qualifier, payload, mode and poll_interval", ParamLambda, k)
		}
	}
	if s.Function == "" {
		return nil, fmt.Errorf("%s.function_name is required", ParamLambda)
	}
	switch s.Mode {
	case ModeSync:
	case ModeAsync:
		if j.cfg.Completions == nil {
			return nil, errors.New("this engine cannot run asynchronous Lambda steps (no completion store)")
		}
		if len(s.Payload) > 0 && s.Payload[0] != '{' {
			return nil, fmt.Errorf("%s.payload must be a JSON object in async mode (it gets a %q member)", ParamLambda, IdentityKey)
		}
	default:
		return nil, fmt.Errorf("%s.mode %q: want sync or async", ParamLambda, s.Mode)
	}
	return s, nil
}

// payload is the function's input: a STRING param holds JSON text, a MAP
// param an object.
func payload(v any) ([]byte, error) {
	if s, ok := v.(string); ok {
		b := bytes.TrimSpace([]byte(s))
		if len(b) == 0 {
			return nil, nil
		}
		if !json.Valid(b) {
			return nil, errors.New("not valid JSON")
		}
		return b, nil
	}
	return json.Marshal(v)
}

func pollInterval(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration string, got %T", v)
	}
	d, err := workflow.ParseDuration(s)
	if err == nil && d < 100*time.Millisecond {
		err = fmt.Errorf("%s is too short", d)
	}
	return d, err
}

// identity is the attempt as the output-data and step-completion calls
// name it.
func identity(a *stepruntime.Attempt) map[string]any {
	return map[string]any{
		"workflow_id": a.WorkflowID, "workflow_instance_id": a.InstanceID, "workflow_run_id": a.RunID,
		"step_id": a.StepID, "step_attempt_id": a.AttemptID, "step_instance_uuid": a.UUID,
		// The callbacks' proof that the caller runs the attempt.
		"step_token": a.CallbackToken,
	}
}

// Launch implements external.Job: it invokes the function.
func (j *job) Launch(ctx context.Context, a *stepruntime.Attempt, _ string) stepruntime.Result {
	s, err := j.spec(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	in := &lambda.InvokeInput{FunctionName: aws.String(s.Function), Payload: s.Payload}
	if s.Qualifier != "" {
		in.Qualifier = aws.String(s.Qualifier)
	}
	data := map[string]any{KeyFunction: s.Function, KeyMode: s.Mode}
	if s.Mode == ModeAsync {
		in.InvocationType = types.InvocationTypeEvent
		obj := map[string]any{}
		if len(s.Payload) > 0 {
			dec := json.NewDecoder(bytes.NewReader(s.Payload))
			dec.UseNumber()
			if err := dec.Decode(&obj); err != nil {
				return stepruntime.Result{State: stepruntime.FatalError, Message: fmt.Sprintf("%s.payload: %v", ParamLambda, err)}
			}
		}
		obj[IdentityKey] = identity(a)
		in.Payload, _ = json.Marshal(obj)
		data[completion.KeyAwaits] = true
	} else {
		in.InvocationType = types.InvocationTypeRequestResponse
		cc, _ := json.Marshal(map[string]any{"custom": identity(a)})
		if len(cc) <= 3583*3/4 {
			in.ClientContext = aws.String(base64.StdEncoding.EncodeToString(cc))
		}
	}
	out, err := j.cfg.Client.Invoke(ctx, in)
	if err != nil {
		return stepruntime.Result{State: external.AWSState(ctx, err), Data: data, Message: external.AWSMessage("Invoke "+s.Function, err)}
	}
	if id, ok := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata); ok {
		data[KeyRequestID] = id
	}
	if out.ExecutedVersion != nil {
		data[KeyExecutedVersion] = *out.ExecutedVersion
	}
	if s.Mode == ModeAsync {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: s.Poll, Data: data,
			Message: fmt.Sprintf("invoked %s asynchronously; waiting for its completion call", s.Function)}
	}
	if out.FunctionError != nil {
		data[KeyFunctionError] = *out.FunctionError
		return stepruntime.Result{State: stepruntime.UserError, Data: data,
			Message: fmt.Sprintf("function %s failed (%s): %s", s.Function, *out.FunctionError, functionError(out.Payload))}
	}
	outputs, err := resultOutputs(out.Payload)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Data: data, Message: fmt.Sprintf("function %s: %v", s.Function, err)}
	}
	return stepruntime.Result{State: stepruntime.Done, Data: data, Outputs: outputs, Message: fmt.Sprintf("function %s returned", s.Function)}
}

// functionError words a function's error payload
// ({"errorMessage", "errorType"}).
func functionError(payload []byte) string {
	var e struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}
	if json.Unmarshal(payload, &e) == nil && e.Message != "" {
		if e.Type != "" {
			return e.Type + ": " + e.Message
		}
		return e.Message
	}
	s := string(payload)
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return s
}

// resultOutputs turns a function's result into output params: an object's
// members each (a member whose value no param type holds, such as an array
// of objects, as its JSON text), anything else as OutputResult.
func resultOutputs(payload []byte) (map[string]any, error) {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 || string(payload) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the result is not JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		obj = map[string]any{OutputResult: v}
	}
	out := make(map[string]any, len(obj))
	for k, e := range obj {
		if e == nil {
			continue
		}
		if _, err := params.Infer(e); err != nil {
			b, _ := json.Marshal(e)
			e = params.Value{Type: workflow.ParamTypeString, Value: string(b)}
		}
		out[k] = e
	}
	return out, nil
}

// Find implements external.Job: an invocation cannot be looked up.
func (j *job) Find(context.Context, *stepruntime.Attempt, string) (stepruntime.Result, bool, error) {
	return stepruntime.Result{}, false, external.ErrCannotFind
}

// Poll implements external.Job: an asynchronous attempt waits for its
// completion call.
func (j *job) Poll(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	s, err := j.spec(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	if s.Mode != ModeAsync {
		return stepruntime.Result{State: stepruntime.PlatformError, Message: "the function's answer was lost"}
	}
	c, err := j.cfg.Completions.Completion(ctx, a.UUID)
	if err != nil {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: s.Poll, Message: err.Error()}
	}
	if c == nil {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: s.Poll}
	}
	msg := fmt.Sprintf("function %s reported %s", s.Function, c.State)
	if c.Message != "" {
		msg += ": " + c.Message
	}
	switch c.State {
	case "DONE":
		return stepruntime.Result{State: stepruntime.Done, Message: msg}
	case "USER_ERROR":
		return stepruntime.Result{State: stepruntime.UserError, Message: msg}
	case "PLATFORM_ERROR":
		return stepruntime.Result{State: stepruntime.PlatformError, Message: msg}
	}
	return stepruntime.Result{State: stepruntime.FatalError, Message: msg}
}

// Cancel implements external.Job: an invocation cannot be recalled; a
// completion call that comes later is refused.
func (j *job) Cancel(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}
