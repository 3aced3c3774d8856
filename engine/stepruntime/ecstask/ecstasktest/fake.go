// Package ecstasktest is an in-memory ECS for tests of the EcsTask
// runtime: Fake implements ecstask.API (RunTask with clientToken
// idempotency, DescribeTasks, StopTask, ListTasks by startedBy,
// DescribeTaskDefinition), and Handler serves the same state over ECS's
// JSON protocol, so that the real SDK client of an engine process can call
// it through a custom endpoint.
//
// A fake task "runs" its container for the duration in its RUN_FOR
// environment variable (default 0) and exits with EXIT_CODE (default 0);
// START_FAILS makes it stop with TaskFailedToStart.
package ecstasktest

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
)

// Region and Account appear in the fake's ARNs.
const (
	Region  = "us-east-1"
	Account = "000000000000"
)

// Fake is an in-memory ECS. The zero value is not usable; call New.
type Fake struct {
	mu       sync.Mutex
	now      func() time.Time
	defs     map[string]*types.TaskDefinition // by family:revision
	latest   map[string]int32                 // family -> revision
	tasks    map[string]*task                 // by ARN
	order    []string
	byToken  map[string]string // clientToken -> task ARN
	launches map[string]int    // startedBy -> tasks created
	calls    map[string]int    // operation -> calls
	failNext map[string]error
	loseNext map[string]error
}

type task struct {
	t         types.Task
	started   time.Time
	runFor    time.Duration
	exitCode  int32
	failStart bool
	stopped   bool
}

// New returns an empty fake.
func New() *Fake {
	return &Fake{now: time.Now, defs: map[string]*types.TaskDefinition{}, latest: map[string]int32{},
		tasks: map[string]*task{}, byToken: map[string]string{}, launches: map[string]int{},
		calls: map[string]int{}, failNext: map[string]error{}, loseNext: map[string]error{}}
}

// Define registers a task definition revision with one essential container
// that logs to CloudWatch Logs (group /ecs/<family>, prefix "task"), and
// returns its ARN.
func (f *Fake) Define(family, container string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latest[family]++
	rev := f.latest[family]
	arn := fmt.Sprintf("arn:aws:ecs:%s:%s:task-definition/%s:%d", Region, Account, family, rev)
	f.defs[fmt.Sprintf("%s:%d", family, rev)] = &types.TaskDefinition{
		TaskDefinitionArn: aws.String(arn), Family: aws.String(family), Revision: rev,
		ContainerDefinitions: []types.ContainerDefinition{{
			Name: aws.String(container), Essential: aws.Bool(true), Image: aws.String("example/" + container),
			LogConfiguration: &types.LogConfiguration{LogDriver: types.LogDriverAwslogs, Options: map[string]string{
				"awslogs-group": "/ecs/" + family, "awslogs-stream-prefix": "task", "awslogs-region": Region}},
		}},
	}
	return arn
}

// FailNext makes the next call of op (e.g. "RunTask") fail with err.
func (f *Fake) FailNext(op string, err error) {
	f.mu.Lock()
	f.failNext[op] = err
	f.mu.Unlock()
}

// LoseNextAnswer makes the next call of op happen and then fail with err,
// as when the answer is lost on the way back.
func (f *Fake) LoseNextAnswer(op string, err error) {
	f.mu.Lock()
	f.loseNext[op] = err
	f.mu.Unlock()
}

// lost returns the error that replaces op's answer, if any.
func (f *Fake) lost(op string) error {
	err := f.loseNext[op]
	delete(f.loseNext, op)
	return err
}

// Launches returns how many tasks RunTask created for startedBy.
func (f *Fake) Launches(startedBy string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.launches[startedBy]
}

// AllLaunches returns the tasks created per startedBy.
func (f *Fake) AllLaunches() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.launches)
}

// Calls returns how often op was called.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Task returns a task as DescribeTasks would.
func (f *Fake) Task(arn string) (types.Task, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tasks[arn]
	if !ok {
		return types.Task{}, false
	}
	f.advance(t)
	return t.snapshot(), true
}

// call counts a call and returns an injected failure.
func (f *Fake) call(op string) error {
	f.calls[op]++
	if err, ok := f.failNext[op]; ok {
		delete(f.failNext, op)
		return err
	}
	return nil
}

func clientError(code, msg string) error {
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: smithy.FaultClient}
}

func (f *Fake) resolveDef(ref string) (*types.TaskDefinition, bool) {
	name := ref
	if i := strings.LastIndex(ref, "task-definition/"); i >= 0 {
		name = ref[i+len("task-definition/"):]
	}
	if !strings.Contains(name, ":") {
		name = fmt.Sprintf("%s:%d", name, f.latest[name])
	}
	d, ok := f.defs[name]
	return d, ok
}

func clusterName(c *string) string {
	name := aws.ToString(c)
	if name == "" {
		return "default"
	}
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

// RunTask implements ecstask.API.
func (f *Fake) RunTask(_ context.Context, in *ecs.RunTaskInput, _ ...func(*ecs.Options)) (*ecs.RunTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RunTask"); err != nil {
		return nil, err
	}
	def, ok := f.resolveDef(aws.ToString(in.TaskDefinition))
	if !ok {
		return nil, clientError("ClientException", "Unable to find task definition: "+aws.ToString(in.TaskDefinition))
	}
	if tok := aws.ToString(in.ClientToken); tok != "" {
		if arn, ok := f.byToken[tok]; ok {
			t := f.tasks[arn]
			f.advance(t)
			return &ecs.RunTaskOutput{Tasks: []types.Task{t.snapshot()}}, nil
		}
	}
	cluster := clusterName(in.Cluster)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	arn := fmt.Sprintf("arn:aws:ecs:%s:%s:task/%s/%s", Region, Account, cluster, id)
	env := map[string]string{}
	var containers []types.Container
	for _, cd := range def.ContainerDefinitions {
		containers = append(containers, types.Container{Name: cd.Name, TaskArn: aws.String(arn), LastStatus: aws.String("PENDING")})
	}
	if in.Overrides != nil {
		for _, co := range in.Overrides.ContainerOverrides {
			for _, kv := range co.Environment {
				env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
			}
		}
	}
	t := &task{started: f.now()}
	t.runFor, _ = time.ParseDuration(env["RUN_FOR"])
	if c, err := strconv.Atoi(env["EXIT_CODE"]); err == nil {
		t.exitCode = int32(c)
	}
	t.failStart = env["START_FAILS"] != ""
	t.t = types.Task{
		TaskArn: aws.String(arn), ClusterArn: aws.String(fmt.Sprintf("arn:aws:ecs:%s:%s:cluster/%s", Region, Account, cluster)),
		TaskDefinitionArn: def.TaskDefinitionArn, LastStatus: aws.String("PROVISIONING"), DesiredStatus: aws.String("RUNNING"),
		StartedBy: in.StartedBy, LaunchType: in.LaunchType, Overrides: in.Overrides, Containers: containers,
	}
	f.tasks[arn] = t
	f.order = append(f.order, arn)
	if tok := aws.ToString(in.ClientToken); tok != "" {
		f.byToken[tok] = arn
	}
	f.launches[aws.ToString(in.StartedBy)]++
	if err := f.lost("RunTask"); err != nil {
		return nil, err
	}
	return &ecs.RunTaskOutput{Tasks: []types.Task{t.snapshot()}}, nil
}

// snapshot is a copy of the task that later changes do not touch (they
// replace pointers and write container elements).
func (t *task) snapshot() types.Task {
	c := t.t
	c.Containers = append([]types.Container(nil), t.t.Containers...)
	return c
}

// advance moves a task along its life by the clock.
func (f *Fake) advance(t *task) {
	if t.stopped {
		return
	}
	age := f.now().Sub(t.started)
	switch {
	case t.failStart:
		f.stop(t, types.TaskStopCodeTaskFailedToStart, "CannotPullContainerError: pull image manifest has been retried 5 time(s)", nil)
	case age >= t.runFor:
		code := t.exitCode
		f.stop(t, types.TaskStopCodeEssentialContainerExited, "Essential container in task exited", &code)
	default:
		t.t.LastStatus = aws.String("RUNNING")
		for i := range t.t.Containers {
			t.t.Containers[i].LastStatus = aws.String("RUNNING")
		}
	}
}

func (f *Fake) stop(t *task, code types.TaskStopCode, reason string, exit *int32) {
	t.stopped = true
	t.t.LastStatus, t.t.DesiredStatus = aws.String("STOPPED"), aws.String("STOPPED")
	t.t.StopCode, t.t.StoppedReason = code, aws.String(reason)
	for i := range t.t.Containers {
		t.t.Containers[i].LastStatus = aws.String("STOPPED")
		t.t.Containers[i].ExitCode = exit
	}
}

// DescribeTasks implements ecstask.API.
func (f *Fake) DescribeTasks(_ context.Context, in *ecs.DescribeTasksInput, _ ...func(*ecs.Options)) (*ecs.DescribeTasksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeTasks"); err != nil {
		return nil, err
	}
	out := &ecs.DescribeTasksOutput{}
	for _, arn := range in.Tasks {
		t, ok := f.tasks[arn]
		if !ok {
			out.Failures = append(out.Failures, types.Failure{Arn: aws.String(arn), Reason: aws.String("MISSING")})
			continue
		}
		f.advance(t)
		out.Tasks = append(out.Tasks, t.snapshot())
	}
	return out, nil
}

// StopTask implements ecstask.API.
func (f *Fake) StopTask(_ context.Context, in *ecs.StopTaskInput, _ ...func(*ecs.Options)) (*ecs.StopTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("StopTask"); err != nil {
		return nil, err
	}
	t, ok := f.tasks[aws.ToString(in.Task)]
	if !ok {
		return nil, clientError("InvalidParameterException", "The referenced task was not found.")
	}
	f.advance(t)
	if !t.stopped {
		exit := int32(137)
		f.stop(t, types.TaskStopCodeUserInitiated, aws.ToString(in.Reason), &exit)
	}
	snap := t.snapshot()
	return &ecs.StopTaskOutput{Task: &snap}, nil
}

// ListTasks implements ecstask.API.
func (f *Fake) ListTasks(_ context.Context, in *ecs.ListTasksInput, _ ...func(*ecs.Options)) (*ecs.ListTasksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListTasks"); err != nil {
		return nil, err
	}
	want := string(in.DesiredStatus)
	if want == "" {
		want = "RUNNING"
	}
	cluster := clusterName(in.Cluster)
	out := &ecs.ListTasksOutput{TaskArns: []string{}}
	for _, arn := range f.order {
		t := f.tasks[arn]
		f.advance(t)
		if clusterName(t.t.ClusterArn) != cluster || aws.ToString(t.t.DesiredStatus) != want {
			continue
		}
		if in.StartedBy != nil && aws.ToString(t.t.StartedBy) != aws.ToString(in.StartedBy) {
			continue
		}
		out.TaskArns = append(out.TaskArns, arn)
	}
	return out, nil
}

// DescribeTaskDefinition implements ecstask.API.
func (f *Fake) DescribeTaskDefinition(_ context.Context, in *ecs.DescribeTaskDefinitionInput, _ ...func(*ecs.Options)) (*ecs.DescribeTaskDefinitionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeTaskDefinition"); err != nil {
		return nil, err
	}
	d, ok := f.resolveDef(aws.ToString(in.TaskDefinition))
	if !ok {
		return nil, clientError("ClientException", "Unable to describe task definition.")
	}
	return &ecs.DescribeTaskDefinitionOutput{TaskDefinition: d}, nil
}
