package ecstask_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask/ecstasktest"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
)

func newRuntime(t *testing.T, api ecstask.API) stepruntime.Runtime {
	t.Helper()
	rt, err := ecstask.New(ecstask.Config{Client: api, Region: "us-east-1", Cluster: "jobs", Subnets: []string{"subnet-1"},
		SecurityGroups: []string{"sg-1"}, PollInterval: 100_000_000, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// setup is a fake ECS with task definition etl (container main) and a
// runtime over it.
func setup(t *testing.T) (*ecstasktest.Fake, stepruntime.Runtime) {
	t.Helper()
	fake := ecstasktest.New()
	fake.Define("etl", "main")
	return fake, newRuntime(t, fake)
}

// attempt is an attempt of an EcsTask step whose container runs with env.
func attempt(env map[string]string, extra map[string]any) *stepruntime.Attempt {
	spec := map[string]any{"task_definition": "etl", "command": []string{"run", "--day", "20240101"}, "env": env, "cpu": "512"}
	for k, v := range extra {
		spec[k] = v
	}
	a := &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 3, RunID: 1, StepID: "job", AttemptID: 2, Type: ecstask.Type,
		UUID: uuid.NewString(), CallbackToken: "token-" + uuid.NewString(), Params: map[string]any{ecstask.ParamECSTask: spec}}
	a.Record = func(context.Context, map[string]any) error { return nil }
	return a
}

// step drives one call as the engine does, keeping the data it returns.
func step(rt stepruntime.Runtime, a *stepruntime.Attempt, call func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
	r := call(context.Background(), a)
	if r.Data != nil {
		a.Data = r.Data
	}
	return r
}

// runToEnd starts the attempt and executes it until it ends.
func runToEnd(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt) stepruntime.Result {
	t.Helper()
	if r := step(rt, a, rt.Start); r.State != stepruntime.Done {
		return r
	}
	for range 20 {
		if r := step(rt, a, rt.Execute); r.State != stepruntime.Continue {
			return r
		}
	}
	t.Fatal("the task never ended")
	return stepruntime.Result{}
}

func TestTaskExitingZeroSucceeds(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(map[string]string{"RUN_FOR": "0s", "DAY": "20240101"}, nil)
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	if fake.Launches(a.UUID) != 1 || fake.Calls("RunTask") != 1 {
		t.Errorf("launches %d, RunTask calls %d", fake.Launches(a.UUID), fake.Calls("RunTask"))
	}
	arn, _ := a.Data[ecstask.KeyTaskARN].(string)
	task, ok := fake.Task(arn)
	if !ok {
		t.Fatalf("no task %q", arn)
	}
	if aws.ToString(task.StartedBy) != a.UUID {
		t.Errorf("startedBy %q, want the attempt uuid", aws.ToString(task.StartedBy))
	}
	co := task.Overrides.ContainerOverrides[0]
	env := map[string]string{}
	for _, kv := range co.Environment {
		env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
	}
	if aws.ToString(co.Name) != "main" || strings.Join(co.Command, " ") != "run --day 20240101" || env["DAY"] != "20240101" ||
		env["MAESTRO_STEP_INSTANCE_UUID"] != a.UUID || env["MAESTRO_STEP_ATTEMPT_ID"] != "2" || aws.ToString(task.Overrides.Cpu) != "512" ||
		env["MAESTRO_STEP_TOKEN"] != a.CallbackToken {
		t.Errorf("overrides %+v env %v", co, env)
	}
	if r.Outputs[ecstask.OutputExitCode].(params.Value).Value != int64(0) || r.Outputs[ecstask.OutputTaskARN].(params.Value).Value != arn {
		t.Errorf("outputs %v", r.Outputs)
	}
	wantStream := "task/main/" + arn[strings.LastIndex(arn, "/")+1:]
	if a.Data[ecstask.KeyLogGroup] != "/ecs/etl" || a.Data[ecstask.KeyLogStream] != wantStream ||
		!strings.Contains(a.Data[ecstask.KeyLogURL].(string), "log-group/$252Fecs$252Fetl/log-events/task$252Fmain$252F") {
		t.Errorf("log link %v", a.Data)
	}
}

func TestTaskEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want stepruntime.State
		msg  string
	}{
		{"non-zero exit is the user's error", map[string]string{"EXIT_CODE": "3"}, stepruntime.UserError, "exited with code 3"},
		{"failing to start is the platform's", map[string]string{"START_FAILS": "1"}, stepruntime.PlatformError, "CannotPullContainerError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rt := setup(t)
			a := attempt(tc.env, nil)
			r := runToEnd(t, rt, a)
			if r.State != tc.want || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("state %s: %s", r.State, r.Message)
			}
		})
	}
}

// The engine stopped after RunTask reached ECS but before the task's ARN
// was written: the next owner finds the task by startedBy and follows it.
func TestRecoveryFindsTheLaunchedTask(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(map[string]string{"RUN_FOR": "1h"}, nil)
	var recorded map[string]any
	a.Record = func(_ context.Context, d map[string]any) error { recorded = d; return nil }
	fake.LoseNextAnswer("RunTask", errors.New("connection reset by peer"))
	step(rt, a, rt.Start)
	r := step(rt, a, rt.Execute)
	if r.State != stepruntime.Continue || a.Data[external.KeyLaunch] != external.LaunchIntended {
		t.Fatalf("after a lost answer: %s %v: %s", r.State, a.Data, r.Message)
	}
	// What the database holds is the intent Record wrote; a new owner starts from it.
	a.Data = recorded
	r = step(rt, a, rt.Execute)
	if r.State != stepruntime.Continue || a.Data[ecstask.KeyTaskARN] == nil || a.Data[external.KeyLaunch] != external.LaunchDone {
		t.Fatalf("recovery: %s %v: %s", r.State, a.Data, r.Message)
	}
	// Found by ListTasks: RunTask is not called again (its clientToken would
	// have been the second guard).
	if n, calls := fake.Launches(a.UUID), fake.Calls("RunTask"); n != 1 || calls != 1 {
		t.Fatalf("%d tasks for the attempt, %d RunTask calls", n, calls)
	}
	if r := step(rt, a, rt.Execute); r.State != stepruntime.Continue || a.Data[ecstask.KeyLastStatus] != "RUNNING" {
		t.Fatalf("poll: %s %v", r.State, a.Data)
	}
}

// An intent with no task behind it (the engine stopped before RunTask)
// launches once.
func TestRecoveryLaunchesWhenNothingWasLaunched(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(map[string]string{"RUN_FOR": "0s"}, nil)
	a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: a.UUID}
	if r := runToEnd(t, rt, a); r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	if fake.Launches(a.UUID) != 1 || fake.Calls("ListTasks") == 0 {
		t.Errorf("launches %d, ListTasks calls %d", fake.Launches(a.UUID), fake.Calls("ListTasks"))
	}
}

func TestTerminateStopsTheTask(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(map[string]string{"RUN_FOR": "1h"}, nil)
	step(rt, a, rt.Start)
	step(rt, a, rt.Execute)
	if r := step(rt, a, rt.Terminate); r.State != stepruntime.Stopped {
		t.Fatalf("terminate: %s %s", r.State, r.Message)
	}
	task, _ := fake.Task(a.Data[ecstask.KeyTaskARN].(string))
	if aws.ToString(task.LastStatus) != "STOPPED" || !strings.Contains(aws.ToString(task.StoppedReason), "stopped by Maestro: wf/3/1 step job attempt 2") {
		t.Errorf("task %s: %s", aws.ToString(task.LastStatus), aws.ToString(task.StoppedReason))
	}
}

// A stop that comes while RunTask's answer is unknown finds the task and
// stops it.
func TestTerminateFindsAndStopsATaskLaunchedUnseen(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(map[string]string{"RUN_FOR": "1h"}, nil)
	fake.LoseNextAnswer("RunTask", errors.New("EOF"))
	step(rt, a, rt.Start)
	step(rt, a, rt.Execute)
	if r := step(rt, a, rt.Terminate); r.State != stepruntime.Stopped {
		t.Fatalf("terminate: %s %s", r.State, r.Message)
	}
	if fake.Calls("StopTask") != 1 {
		t.Fatalf("StopTask calls %d", fake.Calls("StopTask"))
	}
}

func TestNoLaunchWhileTheLeaseIsUncertain(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(nil, nil)
	a.Record = func(context.Context, map[string]any) error { return stepruntime.ErrLeaseUncertain }
	step(rt, a, rt.Start)
	if r := step(rt, a, rt.Execute); r.State != stepruntime.Continue || fake.Calls("RunTask") != 0 {
		t.Fatalf("state %s, RunTask calls %d", r.State, fake.Calls("RunTask"))
	}
}

func TestTransientDescribeErrorKeepsPolling(t *testing.T) {
	fake, rt := setup(t)
	a := attempt(map[string]string{"RUN_FOR": "1h"}, nil)
	step(rt, a, rt.Start)
	step(rt, a, rt.Execute)
	fake.FailNext("DescribeTasks", errors.New("dial tcp: i/o timeout"))
	if r := step(rt, a, rt.Execute); r.State != stepruntime.Continue {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
}

func TestBadSpecFailsAtStart(t *testing.T) {
	fake, rt := setup(t)
	for name, tc := range map[string]struct {
		params map[string]any
		want   string
	}{
		"no param":        {map[string]any{}, `needs the "ecs_task" param`},
		"no definition":   {map[string]any{ecstask.ParamECSTask: map[string]any{"cluster": "c"}}, "task_definition is required"},
		"unknown field":   {map[string]any{ecstask.ParamECSTask: map[string]any{"task_definition": "etl", "image": "x"}}, "ecs_task.image: unknown field"},
		"bad launch type": {map[string]any{ecstask.ParamECSTask: map[string]any{"task_definition": "etl", "launch_type": "LAMBDA"}}, "launch_type"},
		"short poll":      {map[string]any{ecstask.ParamECSTask: map[string]any{"task_definition": "etl", "poll_interval": "1ms"}}, "too short"},
	} {
		t.Run(name, func(t *testing.T) {
			r := rt.Start(context.Background(), &stepruntime.Attempt{Params: tc.params})
			if r.State != stepruntime.FatalError || !strings.Contains(r.Message, tc.want) {
				t.Fatalf("state %s: %q, want %q", r.State, r.Message, tc.want)
			}
		})
	}
	a := attempt(nil, map[string]any{"container": "sidecar"})
	step(rt, a, rt.Start)
	if r := step(rt, a, rt.Execute); r.State != stepruntime.FatalError || !strings.Contains(r.Message, `container "sidecar" is not in task definition`) {
		t.Fatalf("unknown container: %s %s", r.State, r.Message)
	}
	noNet, _ := ecstask.New(ecstask.Config{Client: fake, Cluster: "jobs", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if r := noNet.Start(context.Background(), attempt(nil, nil)); r.State != stepruntime.FatalError || !strings.Contains(r.Message, "subnets is required") {
		t.Fatalf("no subnets: %s %s", r.State, r.Message)
	}
}

// The fake's HTTP face speaks ECS's protocol to the real SDK client, as the
// engine processes of the kill test use it.
func TestFakeOverTheSDK(t *testing.T) {
	fake := ecstasktest.New()
	fake.Define("etl", "main")
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	client := ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	rt := newRuntime(t, client)
	a := attempt(map[string]string{"RUN_FOR": "1h"}, nil)
	step(rt, a, rt.Start)
	if r := step(rt, a, rt.Execute); r.State != stepruntime.Continue || a.Data[ecstask.KeyTaskARN] == nil || a.Data[ecstask.KeyLogURL] == nil {
		t.Fatalf("launch: %s %v %s", r.State, a.Data, r.Message)
	}
	if r := step(rt, a, rt.Execute); r.State != stepruntime.Continue || a.Data[ecstask.KeyLastStatus] != "RUNNING" {
		t.Fatalf("poll: %s %v %s", r.State, a.Data, r.Message)
	}
	intent := map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: a.UUID}
	b := *a
	b.Data = intent
	if r := step(rt, &b, rt.Execute); r.State != stepruntime.Continue || b.Data[ecstask.KeyTaskARN] != a.Data[ecstask.KeyTaskARN] {
		t.Fatalf("find: %s %v %s", r.State, b.Data, r.Message)
	}
	if r := step(rt, a, rt.Terminate); r.State != stepruntime.Stopped {
		t.Fatalf("stop: %s %s", r.State, r.Message)
	}
	if fake.Launches(a.UUID) != 1 || fake.Calls("StopTask") != 1 {
		t.Errorf("launches %d, StopTask calls %d", fake.Launches(a.UUID), fake.Calls("StopTask"))
	}
	_, err := client.RunTask(context.Background(), &ecs.RunTaskInput{TaskDefinition: aws.String("nope")})
	if err == nil || !strings.Contains(err.Error(), "ClientException") {
		t.Errorf("error over the protocol: %v", err)
	}
}
