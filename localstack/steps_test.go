package localstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/lambdastep"
	"github.com/maestro-aws/maestro/localstack"
)

var (
	stepFnOnce sync.Once
	stepFnZip  []byte
)

// deployStepFn deploys testdata/stepfn to the emulator and returns its name.
func deployStepFn(t *testing.T, lc *lambda.Client) string {
	t.Helper()
	stepFnOnce.Do(func() { stepFnZip = buildLambda(t, "./testdata/stepfn") })
	if stepFnZip == nil {
		t.Fatal("stepfn did not build")
	}
	name := fmt.Sprintf("stepfn-%d", time.Now().UnixNano())
	ctx := context.Background()
	_, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName:  aws.String(name),
		Runtime:       lambdatypes.RuntimeProvidedal2023,
		Handler:       aws.String("bootstrap"),
		Role:          aws.String("arn:aws:iam::000000000000:role/stepfn"),
		Code:          &lambdatypes.FunctionCode{ZipFile: stepFnZip},
		Architectures: []lambdatypes.Architecture{lambdatypes.Architecture(archName())},
		Timeout:       aws.Int32(30),
	})
	if err != nil {
		t.Fatalf("create function: %v", err)
	}
	t.Cleanup(func() {
		_, _ = lc.DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
	})
	if err := lambda.NewFunctionActiveV2Waiter(lc).Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("function never became active: %v", err)
	}
	return name
}

// Lambda steps against a real function run by the emulator: a synchronous
// call whose result feeds the next step, a function error, and the
// asynchronous mode where the function calls the REST API back.
func TestLambdaStepInEmulator(t *testing.T) {
	cfg := localstack.Config(t)
	lc := lambda.NewFromConfig(cfg)
	fn := deployStepFn(t, lc)

	env := flowtest.New(t)
	rt, err := lambdastep.New(lambdastep.Config{Client: lc, Completions: completion.NewStore(env.Pool)})
	if err != nil {
		t.Fatal(err)
	}
	env.Engine(stepruntime.Registry{lambdastep.Type: rt}, flow.Config{})
	// As in maestro dev: the function calls back without credentials and
	// is the caller "anonymous" (behind API Gateway it is its IAM role).
	handler, err := api.New(api.Config{DB: env.Pool, Logger: flowtest.Logger(), Definitions: env.Defs, Runs: env.Runs,
		TrustUserHeader: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)

	step := func(id, payload, mode string) string {
		return fmt.Sprintf(`{"step":{"id":%q,"type":"Lambda","retry_policy":{"error_retry_limit":0},"transition":{"successors":{"after":"true"}},
		  "params":{"lambda":{"type":"MAP","value":{"function_name":{"type":"STRING","value":%q},
		    "mode":{"type":"STRING","value":%q},"poll_interval":{"type":"STRING","value":"1h"},
		    "payload":{"type":"STRING","value":%q}}}}}}`, id, fn, mode, payload)
	}
	after := func(expr string) string {
		return fmt.Sprintf(`{"step":{"id":"after","type":"NoOp","params":{"got":{"type":"LONG","expression":%q}}}}`, expr)
	}
	afterValue := func(inst *execution.Instance) any {
		t.Helper()
		var p map[string]struct{ Value any }
		_ = json.Unmarshal(env.Attempts(inst, "after")[0].Params, &p)
		return p["got"].Value
	}

	t.Run("sync", func(t *testing.T) {
		env.Push(`{"workflow":{"id":"lsync","params":{"n":{"type":"LONG","value":21}},"steps":[` +
			step("fn", `{"n": ${n}, "name": "nightly"}`, "sync") + "," + after("params.getFromStep('fn', 'doubled')") + `]}}`)
		inst := env.Start("lsync")
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run ended %s", got.Status)
		}
		if v := afterValue(inst); v != float64(42) {
			t.Errorf("after.got = %v, want 42", v)
		}
		fnStep := env.Attempts(inst, "fn")[0]
		if !strings.Contains(string(fnStep.Outputs), `"echo": "nightly"`) {
			t.Errorf("outputs %s", fnStep.Outputs)
		}
	})

	t.Run("function error", func(t *testing.T) {
		env.Push(`{"workflow":{"id":"lfail","steps":[` + step("fn", `{"action": "fail"}`, "sync") + "," + after("1") + `]}}`)
		inst := env.Start("lfail")
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowFailed {
			t.Fatalf("run ended %s", got.Status)
		}
		a := env.Attempts(inst, "fn")
		if len(a) != 1 || a[0].Status != instance.StepFatallyFailed || !strings.Contains(string(a[0].Timeline), "asked to fail") {
			t.Fatalf("attempts %d: %s %s", len(a), a[0].Status, a[0].Timeline)
		}
	})

	t.Run("async", func(t *testing.T) {
		env.Push(`{"workflow":{"id":"lasync","steps":[` +
			step("fn", fmt.Sprintf(`{"action": "callback", "api": %q, "rows": 5}`, srv.URL), "async") + "," +
			after("params.getFromStep('fn', 'rows') * 10") + `]}}`)
		inst := env.Start("lasync")
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run ended %s", got.Status)
		}
		if v := afterValue(inst); v != float64(50) {
			t.Errorf("after.got = %v, want 50", v)
		}
		if fnStep := env.Attempts(inst, "fn")[0]; !strings.Contains(string(fnStep.Timeline), "reported DONE: loaded 5 rows") {
			t.Errorf("timeline %s", fnStep.Timeline)
		}
	})
}

// The EcsTask runtime against the emulator's ECS API, as far as it goes:
// ministack keeps tasks RUNNING (it runs no containers without Docker),
// so the test launches a task, finds it again by startedBy as a new owner
// would, and stops it; the engine stops it on a run stop too. Tasks that
// exit are covered against ecstasktest's fake.
func TestEcsTaskStepInEmulator(t *testing.T) {
	ctx := context.Background()
	client := ecs.NewFromConfig(localstack.Config(t))
	cluster := fmt.Sprintf("steps-%d", time.Now().UnixNano())
	if _, err := client.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	def, err := client.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String(cluster + "-etl"), NetworkMode: ecstypes.NetworkModeAwsvpc, Cpu: aws.String("256"), Memory: aws.String("512"),
		RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("main"), Image: aws.String("busybox"), Essential: aws.Bool(true),
			LogConfiguration: &ecstypes.LogConfiguration{LogDriver: ecstypes.LogDriverAwslogs, Options: map[string]string{
				"awslogs-group": "/ecs/etl", "awslogs-stream-prefix": "etl", "awslogs-region": localstack.Region}}}},
	})
	if err != nil {
		t.Fatalf("register task definition: %v", err)
	}
	rt, err := ecstask.New(ecstask.Config{Client: client, Region: localstack.Region, Cluster: cluster, Subnets: []string{"subnet-1"},
		PollInterval: 200 * time.Millisecond, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	family := aws.ToString(def.TaskDefinition.Family)

	t.Run("launch, find again, stop", func(t *testing.T) {
		a := &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "job", AttemptID: 1, UUID: "6f1c2f9e-0d7b-4c55-9a43-1d2b3c4d5e6f",
			Params: map[string]any{ecstask.ParamECSTask: map[string]any{"task_definition": family, "command": []string{"echo", "hi"}}}}
		var recorded map[string]any
		a.Record = func(_ context.Context, d map[string]any) error { recorded = d; return nil }
		call := func(f func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
			r := f(ctx, a)
			if r.Data != nil {
				a.Data = r.Data
			}
			return r
		}
		if r := call(rt.Start); r.State != stepruntime.Done {
			t.Fatalf("start: %s %s", r.State, r.Message)
		}
		if r := call(rt.Execute); r.State != stepruntime.Continue || a.Data[ecstask.KeyTaskARN] == nil {
			t.Fatalf("launch: %s %v %s", r.State, a.Data, r.Message)
		}
		arn := a.Data[ecstask.KeyTaskARN].(string)
		if r := call(rt.Execute); r.State != stepruntime.Continue || a.Data[ecstask.KeyLastStatus] != "RUNNING" {
			t.Fatalf("poll: %s %v %s", r.State, a.Data, r.Message)
		}
		if !strings.Contains(a.Data[ecstask.KeyLogURL].(string), "log-group/$252Fecs$252Fetl") {
			t.Errorf("log link %v", a.Data[ecstask.KeyLogURL])
		}
		// A new owner starts from what was recorded before RunTask.
		a.Data = recorded
		if a.Data[external.KeyLaunch] != external.LaunchIntended {
			t.Fatalf("recorded %v", recorded)
		}
		if r := call(rt.Execute); r.State != stepruntime.Continue || a.Data[ecstask.KeyTaskARN] != arn {
			t.Fatalf("recovery: %s %v %s", r.State, a.Data, r.Message)
		}
		list, err := client.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(cluster), StartedBy: aws.String(a.UUID)})
		if err != nil || len(list.TaskArns) != 1 {
			t.Fatalf("tasks started by the attempt: %v %v", list, err)
		}
		if r := call(rt.Terminate); r.State != stepruntime.Stopped {
			t.Fatalf("terminate: %s %s", r.State, r.Message)
		}
		desc, err := client.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{arn}})
		if err != nil || aws.ToString(desc.Tasks[0].LastStatus) != "STOPPED" || !strings.Contains(aws.ToString(desc.Tasks[0].StoppedReason), "stopped by Maestro") {
			t.Fatalf("after stop: %+v %v", desc, err)
		}
	})

	t.Run("engine stops the task with the run", func(t *testing.T) {
		env := flowtest.New(t)
		env.Engine(stepruntime.Registry{ecstask.Type: rt}, flow.Config{})
		env.Push(fmt.Sprintf(`{"workflow":{"id":"etl","steps":[{"step":{"id":"job","type":"EcsTask",
		  "params":{"ecs_task":{"type":"MAP","value":{"task_definition":{"type":"STRING","value":%q}}}}}}]}}`, family))
		inst := env.Start("etl")
		arn := env.WaitData(inst, "job", ecstask.KeyTaskARN, time.Minute)[ecstask.KeyTaskARN].(string)
		if _, err := env.Runs.Act(ctx, "etl", inst.InstanceID, inst.RunID, run.ActionStop); err != nil {
			t.Fatal(err)
		}
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowStopped {
			t.Fatalf("run ended %s", got.Status)
		}
		desc, err := client.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{arn}})
		if err != nil || aws.ToString(desc.Tasks[0].LastStatus) != "STOPPED" {
			t.Fatalf("task after the run stopped: %+v %v", desc, err)
		}
	})
}
