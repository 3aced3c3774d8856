package lambdastep_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/lambdastep"
)

// fakeLambda answers Invoke with answer and keeps the inputs.
type fakeLambda struct {
	mu     sync.Mutex
	inputs []*lambda.InvokeInput
	answer func(in *lambda.InvokeInput) (*lambda.InvokeOutput, error)
}

func (f *fakeLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	f.mu.Lock()
	f.inputs = append(f.inputs, in)
	f.mu.Unlock()
	return f.answer(in)
}

// completions is an in-memory completion store.
type completions map[string]*completion.Completion

func (c completions) Completion(_ context.Context, id string) (*completion.Completion, error) {
	return c[id], nil
}

func attempt(spec map[string]any) *stepruntime.Attempt {
	a := &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 1, RunID: 2, StepID: "fn", AttemptID: 3, Type: lambdastep.Type,
		UUID: uuid.NewString(), CallbackToken: "token-" + uuid.NewString(), Params: map[string]any{lambdastep.ParamLambda: spec}}
	a.Record = func(context.Context, map[string]any) error { return nil }
	return a
}

func drive(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt, executes int) stepruntime.Result {
	t.Helper()
	r := rt.Start(context.Background(), a)
	if r.State != stepruntime.Done {
		return r
	}
	for range executes {
		r = rt.Execute(context.Background(), a)
		if r.Data != nil {
			a.Data = r.Data
		}
		if r.State != stepruntime.Continue {
			break
		}
	}
	return r
}

func newRuntime(t *testing.T, f *fakeLambda, c completions) stepruntime.Runtime {
	t.Helper()
	cfg := lambdastep.Config{Client: f}
	if c != nil {
		cfg.Completions = c
	}
	rt, err := lambdastep.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestSyncResultBecomesOutputs(t *testing.T) {
	f := &fakeLambda{answer: func(in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		return &lambda.InvokeOutput{StatusCode: 200, ExecutedVersion: aws.String("$LATEST"),
			Payload: []byte(`{"rows": 12, "table": "t1", "parts": [{"a": 1}], "nothing": null, "ratio": 0.5}`)}, nil
	}}
	a := attempt(map[string]any{"function_name": "etl", "payload": `{"day": "20240101"}`, "qualifier": "live"})
	r := drive(t, newRuntime(t, f, nil), a, 1)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	in := f.inputs[0]
	if string(in.Payload) != `{"day": "20240101"}` || aws.ToString(in.Qualifier) != "live" || in.InvocationType != "RequestResponse" {
		t.Errorf("input %s %v %s", in.Payload, aws.ToString(in.Qualifier), in.InvocationType)
	}
	cc, _ := base64.StdEncoding.DecodeString(aws.ToString(in.ClientContext))
	if !strings.Contains(string(cc), a.UUID) {
		t.Errorf("client context %s lacks the attempt's uuid", cc)
	}
	if _, err := params.Outputs(nil, r.Outputs); err != nil {
		t.Fatalf("outputs %v are not params: %v", r.Outputs, err)
	}
	if r.Outputs["rows"] != json.Number("12") || r.Outputs["table"] != "t1" || r.Outputs["parts"].(params.Value).Value != `[{"a":1}]` {
		t.Errorf("outputs %v", r.Outputs)
	}
	if _, ok := r.Outputs["nothing"]; ok {
		t.Errorf("a null member became an output")
	}
	if r.Data[lambdastep.KeyExecutedVersion] != "$LATEST" || r.Data[external.KeyLaunch] != external.LaunchDone {
		t.Errorf("data %v", r.Data)
	}
}

func TestSyncFailures(t *testing.T) {
	respErr := func(code int, api smithy.APIError) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: api}
	}
	for _, tc := range []struct {
		name string
		out  *lambda.InvokeOutput
		err  error
		want stepruntime.State
		msg  string
	}{
		{"function error is the user's", &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"),
			Payload: []byte(`{"errorMessage": "division by zero", "errorType": "ZeroDivisionError"}`)}, nil, stepruntime.UserError, "ZeroDivisionError: division by zero"},
		{"throttling is the platform's", nil, respErr(429, &smithy.GenericAPIError{Code: "TooManyRequestsException", Message: "Rate exceeded"}), stepruntime.PlatformError, "Rate exceeded"},
		{"5xx is the platform's", nil, respErr(502, &smithy.GenericAPIError{Code: "ServiceException", Message: "internal", Fault: smithy.FaultServer}), stepruntime.PlatformError, "internal"},
		{"no answer is the platform's", nil, errors.New("dial tcp: connection refused"), stepruntime.PlatformError, "connection refused"},
		{"missing function is fatal", nil, respErr(404, &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Function not found"}), stepruntime.FatalError, "Function not found"},
		{"a result that is not JSON is fatal", &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`not json`)}, nil, stepruntime.FatalError, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLambda{answer: func(*lambda.InvokeInput) (*lambda.InvokeOutput, error) { return tc.out, tc.err }}
			r := drive(t, newRuntime(t, f, nil), attempt(map[string]any{"function_name": "etl"}), 1)
			if r.State != tc.want || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("state %s: %q", r.State, r.Message)
			}
		})
	}
}

func TestAsyncWaitsForTheCompletionCall(t *testing.T) {
	f := &fakeLambda{answer: func(*lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		return &lambda.InvokeOutput{StatusCode: 202}, nil
	}}
	done := completions{}
	rt := newRuntime(t, f, done)
	a := attempt(map[string]any{"function_name": "etl", "mode": "async", "payload": map[string]any{"day": int64(20240101)}})
	r := drive(t, rt, a, 3)
	if r.State != stepruntime.Continue || len(f.inputs) != 1 {
		t.Fatalf("before the completion: %s after %d invocations", r.State, len(f.inputs))
	}
	var sent map[string]any
	_ = json.Unmarshal(f.inputs[0].Payload, &sent)
	id, _ := sent[lambdastep.IdentityKey].(map[string]any)
	if f.inputs[0].InvocationType != "Event" || sent["day"] != float64(20240101) || id["step_instance_uuid"] != a.UUID || id["step_attempt_id"] != float64(3) ||
		id["step_token"] != a.CallbackToken {
		t.Fatalf("payload %s", f.inputs[0].Payload)
	}
	if a.Data[completion.KeyAwaits] != true {
		t.Errorf("data %v does not await a completion", a.Data)
	}
	done[a.UUID] = &completion.Completion{State: "USER_ERROR", Message: "bad input"}
	if r := rt.Execute(context.Background(), a); r.State != stepruntime.UserError || !strings.Contains(r.Message, "bad input") {
		t.Fatalf("after the completion: %s %s", r.State, r.Message)
	}
}

// An invocation interrupted by an engine stop is not repeated in the same
// attempt.
func TestInterruptedInvocationIsNotRepeated(t *testing.T) {
	f := &fakeLambda{answer: func(*lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		return &lambda.InvokeOutput{StatusCode: 200}, nil
	}}
	a := attempt(map[string]any{"function_name": "etl"})
	a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: a.UUID}
	if r := newRuntime(t, f, nil).Execute(context.Background(), a); r.State != stepruntime.PlatformError || len(f.inputs) != 0 {
		t.Fatalf("state %s after %d invocations", r.State, len(f.inputs))
	}
}

func TestBadSpec(t *testing.T) {
	f := &fakeLambda{}
	for name, tc := range map[string]struct {
		spec map[string]any
		want string
	}{
		"no function":         {map[string]any{"payload": "{}"}, "function_name is required"},
		"payload not JSON":    {map[string]any{"function_name": "x", "payload": "{day"}, "not valid JSON"},
		"bad mode":            {map[string]any{"function_name": "x", "mode": "later"}, "want sync or async"},
		"async needs object":  {map[string]any{"function_name": "x", "mode": "async", "payload": "[1]"}, "must be a JSON object"},
		"unknown field":       {map[string]any{"function_name": "x", "role": "r"}, "lambda.role: unknown field"},
		"async without store": {map[string]any{"function_name": "x", "mode": "async"}, "cannot run asynchronous"},
	} {
		t.Run(name, func(t *testing.T) {
			c := completions{}
			if name == "async without store" {
				c = nil
			}
			r := newRuntime(t, f, c).Start(context.Background(), attempt(tc.spec))
			if r.State != stepruntime.FatalError || !strings.Contains(r.Message, tc.want) {
				t.Fatalf("state %s: %q, want %q", r.State, r.Message, tc.want)
			}
		})
	}
}
