// Package ecstask is the EcsTask step runtime, Maestro's container job
// (its Kubernetes and Titus steps) on AWS: each attempt runs one ECS task
// (Fargate by default) from a task definition, with container overrides
// from the step's `ecs_task` MAP param, polls it with DescribeTasks without
// holding a worker, and ends with the essential container's exit code. It
// runs under the external protocol: RunTask carries the attempt's uuid as
// clientToken and startedBy, and after a crash or a takeover the next owner
// finds the task by startedBy instead of launching a second one. See
// docs/step-runtimes.md.
package ecstask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "EcsTask"

// ParamECSTask is the MAP param holding the task's spec.
const ParamECSTask = "ecs_task"

// Output params of a task that exited 0.
const (
	OutputExitCode = "exit_code"
	OutputTaskARN  = "task_arn"
)

// Keys of the runtime data (runtime_state.data), shown in the step's
// details.
const (
	KeyTaskARN       = "task_arn"
	KeyCluster       = "cluster"
	KeyContainer     = "container"
	KeyLastStatus    = "last_status"
	KeyLogGroup      = "log_group"
	KeyLogStream     = "log_stream"
	KeyLogURL        = "log_url"
	KeyExitCode      = "exit_code"
	KeyStoppedReason = "stopped_reason"
	KeyStopCode      = "stop_code"
)

// DefaultPollInterval is how often a running task is described when the
// step sets no poll_interval.
const DefaultPollInterval = 10 * time.Second

// API is the part of the ECS client the runtime uses; *ecs.Client has it.
type API interface {
	RunTask(ctx context.Context, in *ecs.RunTaskInput, opts ...func(*ecs.Options)) (*ecs.RunTaskOutput, error)
	DescribeTasks(ctx context.Context, in *ecs.DescribeTasksInput, opts ...func(*ecs.Options)) (*ecs.DescribeTasksOutput, error)
	StopTask(ctx context.Context, in *ecs.StopTaskInput, opts ...func(*ecs.Options)) (*ecs.StopTaskOutput, error)
	ListTasks(ctx context.Context, in *ecs.ListTasksInput, opts ...func(*ecs.Options)) (*ecs.ListTasksOutput, error)
	DescribeTaskDefinition(ctx context.Context, in *ecs.DescribeTaskDefinitionInput, opts ...func(*ecs.Options)) (*ecs.DescribeTaskDefinitionOutput, error)
}

// Config configures the runtime.
type Config struct {
	// Client calls ECS. Required.
	Client API
	// Region names the region in log links.
	Region string
	// Cluster, Subnets, SecurityGroups and AssignPublicIP are the defaults
	// for steps that do not set cluster, subnets, security_groups and
	// assign_public_ip.
	Cluster        string
	Subnets        []string
	SecurityGroups []string
	AssignPublicIP bool
	// PollInterval is the default poll interval (DefaultPollInterval).
	PollInterval time.Duration
	// Logger receives what the step's timeline does not (required).
	Logger *slog.Logger
}

// New returns the EcsTask runtime.
func New(cfg Config) (stepruntime.Runtime, error) {
	if cfg.Client == nil || cfg.Logger == nil {
		return nil, errors.New("ecstask: Config.Client and Config.Logger are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return external.Runtime{Job: &job{cfg: cfg, defs: map[string]cachedDef{}}}, nil
}

type job struct {
	cfg Config

	mu   sync.Mutex
	defs map[string]cachedDef
}

// cachedDef is what a launch needs of a task definition. A reference with
// a revision (or an ARN) names an immutable definition; a bare family is
// looked up again after a minute.
type cachedDef struct {
	def *types.TaskDefinition
	at  time.Time
}

// spec is a step's task, read from its params.
type spec struct {
	Cluster          string
	TaskDefinition   string
	Container        string
	Command          []string
	Env              map[string]string
	CPU, Memory      string
	LaunchType       types.LaunchType
	Subnets          []string
	SecurityGroups   []string
	AssignPublicIP   bool
	TaskRoleARN      string
	ExecutionRoleARN string
	PlatformVersion  string
	PollInterval     time.Duration
}

var fields = []string{"cluster", "task_definition", "container", "command", "env", "cpu", "memory", "launch_type",
	"subnets", "security_groups", "assign_public_ip", "task_role_arn", "execution_role_arn", "platform_version", "poll_interval"}

// Check implements external.Job.
func (j *job) Check(a *stepruntime.Attempt) error {
	_, err := j.spec(a)
	return err
}

func (j *job) spec(a *stepruntime.Attempt) (*spec, error) {
	m, ok := a.Params[ParamECSTask].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("an EcsTask step needs the %q param: a MAP with task_definition (and cluster, container, command, env, cpu, memory, subnets, security_groups, ...)", ParamECSTask)
	}
	for k := range m {
		if !slices.Contains(fields, k) {
			return nil, fmt.Errorf("%s.%s: unknown field; the fields are %s", ParamECSTask, k, strings.Join(fields, ", "))
		}
	}
	s := &spec{Cluster: j.cfg.Cluster, LaunchType: types.LaunchTypeFargate, Subnets: j.cfg.Subnets,
		SecurityGroups: j.cfg.SecurityGroups, AssignPublicIP: j.cfg.AssignPublicIP, PollInterval: j.cfg.PollInterval}
	var errs []error
	str := func(k string, dst *string) {
		if v, ok := m[k]; ok {
			if s, err := params.Convert(workflow.ParamTypeString, v); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %v", ParamECSTask, k, err))
			} else {
				*dst = strings.TrimSpace(s.(string))
			}
		}
	}
	strs := func(k string, dst *[]string) {
		if v, ok := m[k]; ok {
			if s, err := params.Convert(workflow.ParamTypeStringArray, v); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %v", ParamECSTask, k, err))
			} else {
				*dst = s.([]string)
			}
		}
	}
	str("cluster", &s.Cluster)
	str("task_definition", &s.TaskDefinition)
	str("container", &s.Container)
	strs("command", &s.Command)
	if v, ok := m["env"]; ok {
		if e, err := params.Convert(workflow.ParamTypeStringMap, v); err != nil {
			errs = append(errs, fmt.Errorf("%s.env: %v", ParamECSTask, err))
		} else {
			s.Env = e.(map[string]string)
		}
	}
	str("cpu", &s.CPU)
	str("memory", &s.Memory)
	var lt string
	str("launch_type", &lt)
	if lt != "" {
		s.LaunchType = types.LaunchType(strings.ToUpper(lt))
		if !slices.Contains([]string{"FARGATE", "EC2", "EXTERNAL", "MANAGED_INSTANCES"}, string(s.LaunchType)) {
			errs = append(errs, fmt.Errorf("%s.launch_type %q: want FARGATE or EC2", ParamECSTask, lt))
		}
	}
	strs("subnets", &s.Subnets)
	strs("security_groups", &s.SecurityGroups)
	if v, ok := m["assign_public_ip"]; ok {
		if b, err := params.Convert(workflow.ParamTypeBoolean, v); err != nil {
			errs = append(errs, fmt.Errorf("%s.assign_public_ip: %v", ParamECSTask, err))
		} else {
			s.AssignPublicIP = b.(bool)
		}
	}
	str("task_role_arn", &s.TaskRoleARN)
	str("execution_role_arn", &s.ExecutionRoleARN)
	str("platform_version", &s.PlatformVersion)
	if v, ok := m["poll_interval"]; ok {
		d, err := pollInterval(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.poll_interval: %v", ParamECSTask, err))
		}
		s.PollInterval = d
	}
	if s.TaskDefinition == "" {
		errs = append(errs, fmt.Errorf("%s.task_definition is required", ParamECSTask))
	}
	if s.Cluster == "" {
		errs = append(errs, fmt.Errorf("%s.cluster is required (this engine has no default cluster)", ParamECSTask))
	}
	if s.LaunchType == types.LaunchTypeFargate && len(s.Subnets) == 0 {
		errs = append(errs, fmt.Errorf("%s.subnets is required for a Fargate task (this engine has no default subnets)", ParamECSTask))
	}
	return s, errors.Join(errs...)
}

func pollInterval(v any) (time.Duration, error) {
	var d time.Duration
	var err error
	switch x := v.(type) {
	case string:
		d, err = workflow.ParseDuration(x)
	case int64:
		d = time.Duration(x) * time.Second
	case float64:
		d = time.Duration(x * float64(time.Second))
	default:
		err = fmt.Errorf("want a duration, got %T", v)
	}
	if err == nil && d < 100*time.Millisecond {
		err = fmt.Errorf("%s is too short", d)
	}
	return d, err
}

// Launch implements external.Job: RunTask with the attempt's uuid as
// clientToken and startedBy.
func (j *job) Launch(ctx context.Context, a *stepruntime.Attempt, key string) stepruntime.Result {
	s, err := j.spec(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	def, err := j.taskDefinition(ctx, s.Cluster, s.TaskDefinition)
	if err != nil {
		return stepruntime.Result{State: external.AWSState(ctx, err), Message: external.AWSMessage("DescribeTaskDefinition "+s.TaskDefinition, err)}
	}
	container, err := targetContainer(def, s.Container)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	in := &ecs.RunTaskInput{
		Cluster:        aws.String(s.Cluster),
		TaskDefinition: def.TaskDefinitionArn,
		Count:          aws.Int32(1),
		ClientToken:    aws.String(key),
		StartedBy:      aws.String(key),
		LaunchType:     s.LaunchType,
		Overrides:      j.overrides(a, s, container),
	}
	if s.PlatformVersion != "" {
		in.PlatformVersion = aws.String(s.PlatformVersion)
	}
	if len(s.Subnets) > 0 {
		ip := types.AssignPublicIpDisabled
		if s.AssignPublicIP {
			ip = types.AssignPublicIpEnabled
		}
		in.NetworkConfiguration = &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{
			Subnets: s.Subnets, SecurityGroups: s.SecurityGroups, AssignPublicIp: ip}}
	}
	out, err := j.cfg.Client.RunTask(ctx, in)
	if err != nil {
		state := external.AWSState(ctx, err)
		msg := external.AWSMessage("RunTask", err)
		switch state {
		case stepruntime.PlatformError:
			// The request may have reached ECS: look the task up before
			// anything else, in this attempt.
			return external.Unknown(stepruntime.Continue, s.PollInterval, msg)
		case stepruntime.Stopped, stepruntime.TimedOut:
			return external.Unknown(state, 0, msg)
		}
		return stepruntime.Result{State: state, Message: msg}
	}
	if len(out.Tasks) == 0 {
		reasons := make([]string, 0, len(out.Failures))
		for _, f := range out.Failures {
			reasons = append(reasons, fmt.Sprintf("%s %s", aws.ToString(f.Reason), aws.ToString(f.Detail)))
		}
		return stepruntime.Result{State: stepruntime.PlatformError, Message: "RunTask started no task: " + strings.Join(reasons, "; ")}
	}
	t := out.Tasks[0]
	data := j.taskData(s.Cluster, container, &t)
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: s.PollInterval, Data: data,
		Message: fmt.Sprintf("started ECS task %s", aws.ToString(t.TaskArn))}
}

// overrides are the task's overrides: the container's command and
// environment (the step's env and the attempt's identity, so that the
// task can call back with PUT /output-data), and the task's size and
// roles.
func (j *job) overrides(a *stepruntime.Attempt, s *spec, container *types.ContainerDefinition) *types.TaskOverride {
	env := map[string]string{
		"MAESTRO_WORKFLOW_ID":          a.WorkflowID,
		"MAESTRO_WORKFLOW_INSTANCE_ID": fmt.Sprint(a.InstanceID),
		"MAESTRO_WORKFLOW_RUN_ID":      fmt.Sprint(a.RunID),
		"MAESTRO_STEP_ID":              a.StepID,
		"MAESTRO_STEP_ATTEMPT_ID":      fmt.Sprint(a.AttemptID),
		"MAESTRO_STEP_INSTANCE_UUID":   a.UUID,
	}
	for k, v := range s.Env {
		env[k] = v
	}
	// After the step's env: a step cannot replace the callbacks' proof
	// that the caller runs the attempt.
	env["MAESTRO_STEP_TOKEN"] = a.CallbackToken
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	co := types.ContainerOverride{Name: container.Name, Command: s.Command}
	for _, k := range names {
		co.Environment = append(co.Environment, types.KeyValuePair{Name: aws.String(k), Value: aws.String(env[k])})
	}
	o := &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{co}}
	if s.CPU != "" {
		o.Cpu = aws.String(s.CPU)
	}
	if s.Memory != "" {
		o.Memory = aws.String(s.Memory)
	}
	if s.TaskRoleARN != "" {
		o.TaskRoleArn = aws.String(s.TaskRoleARN)
	}
	if s.ExecutionRoleARN != "" {
		o.ExecutionRoleArn = aws.String(s.ExecutionRoleARN)
	}
	return o
}

// taskDefinition describes a task definition, from the cache when it can.
func (j *job) taskDefinition(ctx context.Context, _ string, ref string) (*types.TaskDefinition, error) {
	pinned := strings.HasPrefix(ref, "arn:") || strings.Contains(ref, ":")
	j.mu.Lock()
	c, ok := j.defs[ref]
	j.mu.Unlock()
	if ok && (pinned || time.Since(c.at) < time.Minute) {
		return c.def, nil
	}
	out, err := j.cfg.Client.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(ref)})
	if err != nil {
		return nil, err
	}
	if out.TaskDefinition == nil {
		return nil, fmt.Errorf("task definition %s: empty answer", ref)
	}
	j.mu.Lock()
	j.defs[ref] = cachedDef{def: out.TaskDefinition, at: time.Now()}
	j.mu.Unlock()
	return out.TaskDefinition, nil
}

// targetContainer is the container the overrides apply to and whose exit
// code decides the step: the one named, else the only one, else the first
// essential one.
func targetContainer(def *types.TaskDefinition, name string) (*types.ContainerDefinition, error) {
	var names []string
	for i := range def.ContainerDefinitions {
		c := &def.ContainerDefinitions[i]
		if name != "" && aws.ToString(c.Name) == name {
			return c, nil
		}
		names = append(names, aws.ToString(c.Name))
	}
	if name != "" {
		return nil, fmt.Errorf("%s.container %q is not in task definition %s (it has %s)", ParamECSTask, name,
			aws.ToString(def.TaskDefinitionArn), strings.Join(names, ", "))
	}
	if len(def.ContainerDefinitions) == 0 {
		return nil, fmt.Errorf("task definition %s has no container", aws.ToString(def.TaskDefinitionArn))
	}
	for i := range def.ContainerDefinitions {
		c := &def.ContainerDefinitions[i]
		if c.Essential == nil || *c.Essential {
			return c, nil
		}
	}
	return &def.ContainerDefinitions[0], nil
}

// taskData is the runtime data of a task: its ARN and where its logs are.
func (j *job) taskData(cluster string, container *types.ContainerDefinition, t *types.Task) map[string]any {
	arn := aws.ToString(t.TaskArn)
	data := map[string]any{KeyTaskARN: arn, KeyCluster: cluster, KeyLastStatus: aws.ToString(t.LastStatus)}
	if container == nil {
		return data
	}
	name := aws.ToString(container.Name)
	data[KeyContainer] = name
	if lc := container.LogConfiguration; lc != nil && lc.LogDriver == types.LogDriverAwslogs {
		group, prefix := lc.Options["awslogs-group"], lc.Options["awslogs-stream-prefix"]
		region := lc.Options["awslogs-region"]
		if region == "" {
			region = j.cfg.Region
		}
		if group != "" && prefix != "" {
			stream := prefix + "/" + name + "/" + arn[strings.LastIndex(arn, "/")+1:]
			data[KeyLogGroup], data[KeyLogStream] = group, stream
			if region != "" {
				data[KeyLogURL] = LogURL(region, group, stream)
			}
		}
	}
	return data
}

// LogURL links a CloudWatch Logs stream in the console.
func LogURL(region, group, stream string) string {
	enc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "%", "$25") }
	return fmt.Sprintf("https://%s.console.aws.amazon.com/cloudwatch/home?region=%s#logsV2:log-groups/log-group/%s/log-events/%s",
		region, region, enc(group), enc(stream))
}

// Poll implements external.Job: DescribeTasks, and the task's end.
func (j *job) Poll(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	s, err := j.spec(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	arn, _ := a.Data[KeyTaskARN].(string)
	cluster, _ := a.Data[KeyCluster].(string)
	if arn == "" {
		return stepruntime.Result{State: stepruntime.PlatformError, Message: "the attempt has no task ARN"}
	}
	out, err := j.cfg.Client.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{arn}})
	if err != nil {
		state := external.AWSState(ctx, err)
		if state == stepruntime.PlatformError {
			// A failed look at a task that runs is no reason to give up on it.
			return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: s.PollInterval,
				Message: external.AWSMessage("DescribeTasks", err)}
		}
		return stepruntime.Result{State: state, Message: external.AWSMessage("DescribeTasks", err)}
	}
	if len(out.Tasks) == 0 {
		return stepruntime.Result{State: stepruntime.PlatformError, Message: fmt.Sprintf("ECS no longer knows task %s", arn)}
	}
	t := &out.Tasks[0]
	status := aws.ToString(t.LastStatus)
	if status != "STOPPED" {
		res := stepruntime.Result{State: stepruntime.Continue, NextPollDelay: s.PollInterval}
		if status != a.Data[KeyLastStatus] {
			res.Data = map[string]any{KeyLastStatus: status}
			res.Message = "ECS task " + status
		}
		return res
	}
	return j.ended(a, t)
}

// ended maps a stopped task to the attempt's end.
func (j *job) ended(a *stepruntime.Attempt, t *types.Task) stepruntime.Result {
	name, _ := a.Data[KeyContainer].(string)
	data := map[string]any{KeyLastStatus: "STOPPED", KeyStoppedReason: aws.ToString(t.StoppedReason), KeyStopCode: string(t.StopCode)}
	var exit *int32
	var reason string
	for _, c := range t.Containers {
		if aws.ToString(c.Name) == name || (name == "" && exit == nil) {
			exit, reason = c.ExitCode, aws.ToString(c.Reason)
		}
	}
	why := aws.ToString(t.StoppedReason)
	if reason != "" {
		why += ": " + reason
	}
	switch {
	case t.StopCode == types.TaskStopCodeTaskFailedToStart, t.StopCode == types.TaskStopCodeSpotInterruption,
		t.StopCode == types.TaskStopCodeTerminationNotice, t.StopCode == types.TaskStopCodeInfrastructureHealth:
		return stepruntime.Result{State: stepruntime.PlatformError, Data: data, Message: fmt.Sprintf("ECS task stopped (%s): %s", t.StopCode, why)}
	case exit == nil:
		return stepruntime.Result{State: stepruntime.PlatformError, Data: data, Message: "ECS task stopped without an exit code: " + why}
	}
	data[KeyExitCode] = int64(*exit)
	if *exit != 0 {
		return stepruntime.Result{State: stepruntime.UserError, Data: data,
			Message: fmt.Sprintf("container %s exited with code %d: %s", name, *exit, why)}
	}
	return stepruntime.Result{State: stepruntime.Done, Data: data, Message: fmt.Sprintf("container %s exited with code 0", name),
		Outputs: map[string]any{
			OutputExitCode: params.Value{Type: workflow.ParamTypeLong, Value: int64(0)},
			OutputTaskARN:  params.Value{Type: workflow.ParamTypeString, Value: aws.ToString(t.TaskArn)},
		}}
}

// Find implements external.Job: ListTasks by startedBy (the key), running
// tasks first (startedBy alone, which ECS wants as the only filter), then
// stopped ones. Should ECS refuse the second filter, the relaunch that
// follows repeats the clientToken, and ECS answers it with the task it
// started for that token instead of a new one.
func (j *job) Find(ctx context.Context, a *stepruntime.Attempt, key string) (stepruntime.Result, bool, error) {
	s, err := j.spec(a)
	if err != nil {
		return stepruntime.Result{}, false, err
	}
	queries := []*ecs.ListTasksInput{
		{Cluster: aws.String(s.Cluster), StartedBy: aws.String(key)},
		{Cluster: aws.String(s.Cluster), StartedBy: aws.String(key), DesiredStatus: types.DesiredStatusStopped},
	}
	for i, in := range queries {
		out, err := j.cfg.Client.ListTasks(ctx, in)
		if err != nil {
			if i > 0 && external.AWSState(ctx, err) == stepruntime.FatalError {
				break
			}
			return stepruntime.Result{}, false, fmt.Errorf("ListTasks: %w", err)
		}
		if len(out.TaskArns) == 0 {
			continue
		}
		desc, err := j.cfg.Client.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(s.Cluster), Tasks: out.TaskArns[:1]})
		if err != nil {
			return stepruntime.Result{}, false, fmt.Errorf("DescribeTasks: %w", err)
		}
		if len(desc.Tasks) == 0 {
			continue
		}
		var container *types.ContainerDefinition
		if def, err := j.taskDefinition(ctx, s.Cluster, aws.ToString(desc.Tasks[0].TaskDefinitionArn)); err == nil {
			container, _ = targetContainer(def, s.Container)
		}
		data := j.taskData(s.Cluster, container, &desc.Tasks[0])
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Millisecond, Data: data,
			Message: fmt.Sprintf("found ECS task %s, started for this attempt before the engine restarted", data[KeyTaskARN])}, true, nil
	}
	return stepruntime.Result{}, false, nil
}

// Cancel implements external.Job: StopTask, tried a few times.
func (j *job) Cancel(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	arn, _ := a.Data[KeyTaskARN].(string)
	cluster, _ := a.Data[KeyCluster].(string)
	if arn == "" {
		return stepruntime.Result{State: stepruntime.Stopped}
	}
	var err error
	for try := range 4 {
		if try > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(try) * time.Second):
			}
		}
		_, err = j.cfg.Client.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(cluster), Task: aws.String(arn),
			Reason: aws.String(fmt.Sprintf("stopped by Maestro: %s/%d/%d step %s attempt %d", a.WorkflowID, a.InstanceID, a.RunID, a.StepID, a.AttemptID))})
		if err == nil || external.AWSState(ctx, err) != stepruntime.PlatformError {
			break
		}
	}
	if err != nil && external.AWSState(ctx, err) != stepruntime.FatalError {
		j.cfg.Logger.Warn("stop ECS task", "task_arn", arn, "error", err.Error())
		return stepruntime.Result{State: stepruntime.Stopped, Message: external.AWSMessage("StopTask "+arn, err)}
	}
	return stepruntime.Result{State: stepruntime.Stopped, Message: "stopped ECS task " + arn}
}
