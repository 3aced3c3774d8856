package emr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"
	"github.com/aws/aws-sdk-go-v2/service/emr/types"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
)

// fakeEMR is an in-memory cluster whose steps go PENDING → RUNNING → their
// end, one state per DescribeStep; a step whose args hold "fail" fails,
// one holding "hold" stays RUNNING.
type fakeEMR struct {
	mu       sync.Mutex
	steps    []*types.Step // oldest first
	polls    map[string]int
	calls    map[string]int
	loseNext error
}

func newFake() *fakeEMR { return &fakeEMR{polls: map[string]int{}, calls: map[string]int{}} }

func (f *fakeEMR) AddJobFlowSteps(_ context.Context, in *awsemr.AddJobFlowStepsInput, _ ...func(*awsemr.Options)) (*awsemr.AddJobFlowStepsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["AddJobFlowSteps"]++
	out := &awsemr.AddJobFlowStepsOutput{}
	for _, sc := range in.Steps {
		id := fmt.Sprintf("s-%d", len(f.steps)+1)
		f.steps = append(f.steps, &types.Step{Id: aws.String(id), Name: sc.Name, ActionOnFailure: sc.ActionOnFailure,
			Config: &types.HadoopStepConfig{Jar: sc.HadoopJarStep.Jar, Args: sc.HadoopJarStep.Args},
			Status: &types.StepStatus{State: types.StepStatePending}})
		out.StepIds = append(out.StepIds, id)
	}
	if err := f.loseNext; err != nil {
		f.loseNext = nil
		return nil, err
	}
	return out, nil
}

func (f *fakeEMR) step(id string) *types.Step {
	for _, s := range f.steps {
		if aws.ToString(s.Id) == id {
			return s
		}
	}
	return nil
}

func (f *fakeEMR) DescribeStep(_ context.Context, in *awsemr.DescribeStepInput, _ ...func(*awsemr.Options)) (*awsemr.DescribeStepOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["DescribeStep"]++
	s := f.step(aws.ToString(in.StepId))
	if s == nil {
		return nil, errors.New("no such step")
	}
	f.polls[*s.Id]++
	switch st := s.Status; {
	case st.State == types.StepStatePending:
		st.State = types.StepStateRunning
	case st.State == types.StepStateRunning && slices.Contains(s.Config.Args, "hold"):
	case st.State == types.StepStateRunning && slices.Contains(s.Config.Args, "fail"):
		st.State = types.StepStateFailed
		st.FailureDetails = &types.FailureDetails{Reason: aws.String("Unknown Error."), Message: aws.String("exit 1"), LogFile: aws.String("s3://logs/s-1/stderr.gz")}
	case st.State == types.StepStateRunning:
		st.State = types.StepStateCompleted
	}
	cp := *s
	status := *s.Status
	cp.Status = &status
	return &awsemr.DescribeStepOutput{Step: &cp}, nil
}

// ListSteps answers newest first, two a page.
func (f *fakeEMR) ListSteps(_ context.Context, in *awsemr.ListStepsInput, _ ...func(*awsemr.Options)) (*awsemr.ListStepsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ListSteps"]++
	var all []types.StepSummary
	for i := len(f.steps) - 1; i >= 0; i-- {
		s := f.steps[i]
		all = append(all, types.StepSummary{Id: s.Id, Name: s.Name, Status: s.Status})
	}
	start := 0
	if in.Marker != nil {
		fmt.Sscan(*in.Marker, &start)
	}
	end := min(start+2, len(all))
	out := &awsemr.ListStepsOutput{Steps: all[start:end]}
	if end < len(all) {
		out.Marker = aws.String(fmt.Sprint(end))
	}
	return out, nil
}

func (f *fakeEMR) CancelSteps(_ context.Context, in *awsemr.CancelStepsInput, _ ...func(*awsemr.Options)) (*awsemr.CancelStepsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["CancelSteps"]++
	out := &awsemr.CancelStepsOutput{}
	for _, id := range in.StepIds {
		s := f.step(id)
		s.Status.State = types.StepStateCancelled
		out.CancelStepsInfoList = append(out.CancelStepsInfoList, types.CancelStepsInfo{StepId: s.Id, Status: types.CancelStepsRequestStatusSubmitted})
	}
	return out, nil
}

func (f *fakeEMR) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func newRuntime(t *testing.T, api emr.API) stepruntime.Runtime {
	t.Helper()
	rt, err := emr.New(emr.Config{Client: api, PollInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func attempt(args ...any) *stepruntime.Attempt {
	return &stepruntime.Attempt{WorkflowID: "wf", StepID: "spark", UUID: uuid.NewString(),
		Params: map[string]any{emr.ParamEMR: map[string]any{"cluster_id": "j-1", "step": map[string]any{
			"name": "daily agg", "args": append([]any{"spark-submit", "s3://code/agg.py"}, args...), "action_on_failure": "continue",
			"properties": map[string]any{"b": "2", "a": "1"}}}},
		Record: func(context.Context, map[string]any) error { return nil }}
}

func call(a *stepruntime.Attempt, f func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
	r := f(context.Background(), a)
	if r.Data != nil {
		a.Data = r.Data
	}
	return r
}

func runToEnd(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt) stepruntime.Result {
	t.Helper()
	if r := call(a, rt.Start); r.State != stepruntime.Done {
		return r
	}
	for range 20 {
		if r := call(a, rt.Execute); r.State != stepruntime.Continue {
			return r
		}
	}
	t.Fatal("the EMR step never ended")
	return stepruntime.Result{}
}

func TestStepCompletes(t *testing.T) {
	fake := newFake()
	a := attempt()
	r := runToEnd(t, newRuntime(t, fake), a)
	if r.State != stepruntime.Done || fake.count("AddJobFlowSteps") != 1 {
		t.Fatalf("state %s (%s), AddJobFlowSteps %d", r.State, r.Message, fake.count("AddJobFlowSteps"))
	}
	s := fake.steps[0]
	if aws.ToString(s.Name) != "daily agg-"+a.UUID || aws.ToString(s.Config.Jar) != emr.DefaultJar || s.ActionOnFailure != types.ActionOnFailureContinue ||
		strings.Join(s.Config.Args, " ") != "spark-submit s3://code/agg.py" {
		t.Errorf("step %+v %+v", s, s.Config)
	}
	if r.Outputs[emr.OutputStepID].(params.Value).Value != "s-1" || r.Outputs[emr.OutputState].(params.Value).Value != "COMPLETED" {
		t.Errorf("outputs %v", r.Outputs)
	}
}

func TestStepFails(t *testing.T) {
	a := attempt("fail")
	r := runToEnd(t, newRuntime(t, newFake()), a)
	if r.State != stepruntime.UserError || !strings.Contains(r.Message, "exit 1") || a.Data[emr.KeyLogFile] != "s3://logs/s-1/stderr.gz" {
		t.Fatalf("state %s: %s %v", r.State, r.Message, a.Data)
	}
}

// The answer of AddJobFlowSteps was lost: the next Execute finds the step
// by its name among the cluster's others (paging) and adds no second one.
func TestRecoveryFindsTheAddedStep(t *testing.T) {
	fake := newFake()
	rt := newRuntime(t, fake)
	for range 4 {
		runToEnd(t, rt, attempt())
	}
	a := attempt()
	fake.loseNext = errors.New("connection reset by peer")
	call(a, rt.Start)
	if r := call(a, rt.Execute); r.State != stepruntime.Continue || a.Data[external.KeyLaunch] != external.LaunchIntended {
		t.Fatalf("after a lost answer: %s %v", r.State, a.Data)
	}
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done || fake.count("AddJobFlowSteps") != 5 || len(fake.steps) != 5 || a.Data[emr.KeyStepID] != "s-5" {
		t.Fatalf("state %s (%s), %d steps, data %v", r.State, r.Message, len(fake.steps), a.Data)
	}
}

func TestCancelStopsTheStep(t *testing.T) {
	fake := newFake()
	rt := newRuntime(t, fake)
	a := attempt("hold")
	call(a, rt.Start)
	call(a, rt.Execute)
	call(a, rt.Execute)
	if r := call(a, rt.Terminate); r.State != stepruntime.Stopped || fake.count("CancelSteps") != 1 {
		t.Fatalf("terminate: %s %s", r.State, r.Message)
	}
	if fake.steps[0].Status.State != types.StepStateCancelled {
		t.Fatalf("step %s", fake.steps[0].Status.State)
	}
	if r := call(a, rt.Execute); r.State != stepruntime.Stopped {
		t.Fatalf("poll after cancel: %s %s", r.State, r.Message)
	}
}

func TestStepState(t *testing.T) {
	for _, tc := range []struct {
		state     string
		cancelled bool
		want      stepruntime.State
	}{
		{"PENDING", false, stepruntime.Continue}, {"RUNNING", false, stepruntime.Continue}, {"CANCEL_PENDING", true, stepruntime.Continue},
		{"COMPLETED", false, stepruntime.Done}, {"FAILED", false, stepruntime.UserError},
		{"CANCELLED", true, stepruntime.Stopped}, {"CANCELLED", false, stepruntime.PlatformError},
		{"INTERRUPTED", false, stepruntime.PlatformError},
	} {
		if got := emr.StepState(tc.state, tc.cancelled); got != tc.want {
			t.Errorf("%s (cancelled %v): %s, want %s", tc.state, tc.cancelled, got, tc.want)
		}
	}
}

func TestBadSpec(t *testing.T) {
	rt := newRuntime(t, newFake())
	for _, tc := range []struct {
		spec map[string]any
		msg  string
	}{
		{map[string]any{"step": map[string]any{"args": []any{"x"}}}, "emr.cluster_id is required"},
		{map[string]any{"cluster_id": "j-1"}, "emr.step is required"},
		{map[string]any{"cluster_id": "j-1", "step": map[string]any{"action_on_failure": "explode"}}, "emr.step.action_on_failure"},
		{map[string]any{"cluster_id": "j-1", "step": map[string]any{"jars": "x"}}, "emr.step.jars: unknown field"},
	} {
		a := &stepruntime.Attempt{UUID: uuid.NewString(), Params: map[string]any{emr.ParamEMR: tc.spec}}
		if r := rt.Start(context.Background(), a); r.State != stepruntime.FatalError || !strings.Contains(r.Message, tc.msg) {
			t.Errorf("%v: %s %s", tc.spec, r.State, r.Message)
		}
	}
}

// runToEndSlowly is runToEnd for a step that runs in real time.
func runToEndSlowly(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt) stepruntime.Result {
	t.Helper()
	if r := call(a, rt.Start); r.State != stepruntime.Done {
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r := call(a, rt.Execute); r.State != stepruntime.Continue {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the EMR step never ended")
	return stepruntime.Result{}
}

func stepConfig(name string) []types.StepConfig {
	return []types.StepConfig{{Name: aws.String(name), HadoopJarStep: &types.HadoopJarStepConfig{Jar: aws.String(emr.DefaultJar),
		Args: []string{"--run-for=1h"}}}}
}
