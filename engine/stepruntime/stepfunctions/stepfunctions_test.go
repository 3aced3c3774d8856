package stepfunctions

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
)

type fakeSFN struct {
	started []*sfn.StartExecutionInput
	exists  bool
	status  types.ExecutionStatus
	output  string
}

func (f *fakeSFN) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	f.started = append(f.started, in)
	if f.exists {
		return nil, &types.ExecutionAlreadyExists{Message: aws.String("exists")}
	}
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String(executionARN(aws.ToString(in.StateMachineArn), aws.ToString(in.Name)))}, nil
}

func (f *fakeSFN) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return &sfn.DescribeExecutionOutput{ExecutionArn: in.ExecutionArn, Status: f.status, Output: aws.String(f.output),
		Error: aws.String("States.TaskFailed"), Cause: aws.String("boom")}, nil
}

func (f *fakeSFN) StopExecution(context.Context, *sfn.StopExecutionInput, ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	return &sfn.StopExecutionOutput{}, nil
}

func attempt(m map[string]any) *stepruntime.Attempt {
	return &stepruntime.Attempt{WorkflowID: "wf", StepID: "s", UUID: "3e0c1e7a-1111-4222-8333-944455556666", Params: map[string]any{Param: m}}
}

func TestExecutionARN(t *testing.T) {
	for sm, want := range map[string]string{
		"arn:aws:states:eu-west-1:123456789012:stateMachine:publish":      "arn:aws:states:eu-west-1:123456789012:execution:publish:maestro-x",
		"arn:aws:states:eu-west-1:123456789012:stateMachine:publish:live": "arn:aws:states:eu-west-1:123456789012:execution:publish:maestro-x",
	} {
		if got := executionARN(sm, ExecutionName("x")); got != want {
			t.Errorf("%s: %s, want %s", sm, got, want)
		}
	}
}

func TestSpec(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{}, "state_machine_arn is required"},
		{map[string]any{"state_machine_arn": "publish"}, "want a state machine ARN"},
		{map[string]any{"state_machine_arn": "arn:aws:states:eu-west-1:1:stateMachine:p", "input": "{nope"}, "input: not valid JSON"},
		{map[string]any{"state_machine_arn": "arn:aws:states:eu-west-1:1:stateMachine:p", "name": "x"}, "unknown field"},
	} {
		if err := (svc{}).Check(attempt(c.m)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}

func TestStartAndEnd(t *testing.T) {
	f := &fakeSFN{status: types.ExecutionStatusSucceeded, output: `{"doubled": 84, "rows": [{"a": 1}]}`}
	s := svc{f}
	a := attempt(map[string]any{"state_machine_arn": "arn:aws:states:eu-west-1:1:stateMachine:p", "input": map[string]any{"n": int64(42)}})
	id, _, err := s.Start(context.Background(), a, a.UUID)
	if err != nil || id != "arn:aws:states:eu-west-1:1:execution:p:maestro-"+a.UUID {
		t.Fatalf("start: %s %v", id, err)
	}
	if in := f.started[0]; aws.ToString(in.Input) != `{"n":42}` || aws.ToString(in.Name) != "maestro-"+a.UUID {
		t.Fatalf("start input %+v", in)
	}
	// A start repeated after a lost answer finds the execution its name gives.
	f.exists = true
	if again, _, err := s.Start(context.Background(), a, a.UUID); err != nil || again != id {
		t.Fatalf("repeated start: %s %v", again, err)
	}
	st, err := s.Describe(context.Background(), a, id)
	if err != nil || st.Phase != awsjob.Succeeded {
		t.Fatalf("describe: %+v %v", st, err)
	}
	if st.Outputs["doubled"] == nil || st.Outputs[OutputOutput] == nil || st.Outputs[OutputExecutionARN] == nil {
		t.Errorf("outputs %v", st.Outputs)
	}
	f.status = types.ExecutionStatusFailed
	if st, _ := s.Describe(context.Background(), a, id); st.Phase != awsjob.Failed || st.Message != "States.TaskFailed: boom" {
		t.Errorf("failed: %+v", st)
	}
	rt, err := New(f, awsjob.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil || rt == nil {
		t.Fatal(err)
	}
}
