package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// StepTargets are the AWS resources the engine's Lambda and EcsTask steps
// may use. The engine task role gets exactly what they need
// (StepRuntimeStatements), and nothing when they are empty. Each entry is
// an ARN or a name in the deployment's account and region.
type StepTargets struct {
	// LambdaFunctions are the functions Lambda steps invoke (any version or
	// alias of each). Context key maestro:stepLambdaFunctions.
	LambdaFunctions []string
	// EcsClusters are the clusters EcsTask steps run their tasks in.
	// Context key maestro:stepEcsClusters.
	EcsClusters []string
	// EcsTaskDefinitions are the task definitions EcsTask steps run: a
	// family (every revision) or family:revision. Context key
	// maestro:stepEcsTaskDefinitions.
	EcsTaskDefinitions []string
	// PassRoles are the task and execution roles of those task
	// definitions (or of steps' task_role_arn and execution_role_arn):
	// the engine may pass them to ECS tasks, and to nothing else. Context
	// key maestro:stepPassRoles.
	PassRoles []string

	// EcsSubnets and EcsSecurityGroups are the awsvpc network of EcsTask
	// steps that do not name their own (MAESTRO_ECS_SUBNETS,
	// MAESTRO_ECS_SECURITY_GROUPS): subnet and security group ids. When
	// EcsClusters are set and these are not, the tasks run in the
	// deployment's private subnets with a security group of their own that
	// allows egress only. Context keys maestro:stepEcsSubnets and
	// maestro:stepEcsSecurityGroups.
	EcsSubnets        []string
	EcsSecurityGroups []string
	// HTTPAllowedHosts are the hosts Http steps may call
	// (MAESTRO_HTTP_ALLOWED_HOSTS; "*.example.com" for subdomains); empty
	// allows every host but link-local ones. Context key
	// maestro:stepHttpAllowedHosts.
	HTTPAllowedHosts []string

	// AWSJobs are the targets of the AWS job steps (awsjobperms.go).
	AWSJobs AWSJobTargets
	// Jobs are the Batch, Emr and Notebook steps' targets.
	Jobs JobTargets
}

// stepTargetsFromContext reads the StepTargets keys: a JSON list of strings
// in cdk.json, or a comma-separated string from `-c`.
func stepTargetsFromContext(get func(key string) any) (StepTargets, error) {
	var t StepTargets
	var errs []error
	list := func(key string, dst *[]string) {
		v := deref(get(ContextPrefix + key))
		var items []string
		switch x := v.(type) {
		case nil:
			return
		case string:
			items = strings.Split(x, ",")
		case []any:
			for _, e := range x {
				s, ok := deref(e).(string)
				if !ok {
					errs = append(errs, fmt.Errorf("context %s%s: want a list of strings, got a %T in it", ContextPrefix, key, e))
					return
				}
				items = append(items, s)
			}
		case []string:
			items = x
		default:
			errs = append(errs, fmt.Errorf("context %s%s: want a list of strings, got %T", ContextPrefix, key, v))
			return
		}
		for _, s := range items {
			if s = strings.TrimSpace(s); s != "" {
				*dst = append(*dst, s)
			}
		}
	}
	list("stepLambdaFunctions", &t.LambdaFunctions)
	list("stepEcsClusters", &t.EcsClusters)
	list("stepEcsTaskDefinitions", &t.EcsTaskDefinitions)
	list("stepPassRoles", &t.PassRoles)
	list("stepEcsSubnets", &t.EcsSubnets)
	list("stepEcsSecurityGroups", &t.EcsSecurityGroups)
	list("stepHttpAllowedHosts", &t.HTTPAllowedHosts)
	t.AWSJobs = readAWSJobTargets(list)
	t.Jobs = jobTargetsFromContext(get, list)
	return t, errors.Join(errs...)
}

// Validate reports targets that cannot work together.
func (t StepTargets) Validate() error {
	var errs []error
	if len(t.EcsTaskDefinitions) > 0 && len(t.EcsClusters) == 0 {
		errs = append(errs, errors.New("stepEcsTaskDefinitions: EcsTask steps also need stepEcsClusters to run them in"))
	}
	if len(t.EcsClusters) > 0 && len(t.EcsTaskDefinitions) == 0 {
		errs = append(errs, errors.New("stepEcsClusters: EcsTask steps also need stepEcsTaskDefinitions to run"))
	}
	if len(t.PassRoles) > 0 && len(t.EcsTaskDefinitions) == 0 {
		errs = append(errs, errors.New("stepPassRoles: roles are passed only to EcsTask steps' tasks; set stepEcsTaskDefinitions"))
	}
	if (len(t.EcsSubnets) > 0 || len(t.EcsSecurityGroups) > 0) && len(t.EcsClusters) == 0 {
		errs = append(errs, errors.New("stepEcsSubnets, stepEcsSecurityGroups: the network of EcsTask steps; set stepEcsClusters too"))
	}
	for _, id := range t.EcsSubnets {
		if !strings.HasPrefix(id, "subnet-") {
			errs = append(errs, fmt.Errorf("stepEcsSubnets: %q is not a subnet id (subnet-...)", id))
		}
	}
	for _, id := range t.EcsSecurityGroups {
		if !strings.HasPrefix(id, "sg-") {
			errs = append(errs, fmt.Errorf("stepEcsSecurityGroups: %q is not a security group id (sg-...)", id))
		}
	}
	errs = append(errs, t.AWSJobs.Validate())
	errs = append(errs, t.Jobs.Validate(t.EcsTaskDefinitions))
	for _, a := range t.all() {
		if strings.HasPrefix(a, "arn:") && len(strings.SplitN(a, ":", 6)) < 6 {
			errs = append(errs, fmt.Errorf("%q is not an ARN", a))
		}
	}
	return errors.Join(errs...)
}

func (t StepTargets) all() []string {
	var out []string
	for _, l := range [][]string{t.LambdaFunctions, t.EcsClusters, t.EcsTaskDefinitions, t.PassRoles} {
		out = append(out, l...)
	}
	return out
}

// StepRuntimeStatements are the engine task role's permissions for the
// step targets, names resolved in stack's account and region:
//   - lambda:InvokeFunction on each function and its versions and aliases;
//   - ecs:RunTask on each task definition, only in the clusters;
//   - ecs:DescribeTasks and ecs:StopTask on the clusters' tasks;
//   - ecs:ListTasks (finding a task by startedBy after a restart) limited
//     to the clusters;
//   - ecs:DescribeTaskDefinition, which supports no resource-level
//     permissions;
//   - iam:PassRole on the roles, to ECS tasks only.
func StepRuntimeStatements(stack awscdk.Stack, t StepTargets) []awsiam.PolicyStatement {
	arn := func(ref, service, resource string, format awscdk.ArnFormat, global bool) string {
		if strings.HasPrefix(ref, "arn:") {
			return ref
		}
		c := &awscdk.ArnComponents{Service: jsii.String(service), Resource: jsii.String(resource),
			ResourceName: jsii.String(ref), ArnFormat: format}
		if global {
			c.Region = jsii.String("")
		}
		return *stack.FormatArn(c)
	}
	out := JobStatements(stack, t.Jobs)
	if len(t.LambdaFunctions) > 0 {
		var fns []string
		for _, f := range t.LambdaFunctions {
			a := arn(f, "lambda", "function", awscdk.ArnFormat_COLON_RESOURCE_NAME, false)
			fns = append(fns, a, a+":*")
		}
		out = append(out, statement("InvokeStepFunctions", []string{"lambda:InvokeFunction"}, fns, nil))
	}
	out = append(out, AWSJobStatements(stack, t.AWSJobs)...)
	if len(t.EcsClusters) == 0 || len(t.EcsTaskDefinitions) == 0 {
		return out
	}
	var clusters, tasks, defs []string
	for _, c := range t.EcsClusters {
		a := arn(c, "ecs", "cluster", awscdk.ArnFormat_SLASH_RESOURCE_NAME, false)
		clusters = append(clusters, a)
		name := c[strings.LastIndex(c, "/")+1:]
		tasks = append(tasks, arn(name+"/*", "ecs", "task", awscdk.ArnFormat_SLASH_RESOURCE_NAME, false))
	}
	for _, d := range t.EcsTaskDefinitions {
		if !strings.HasPrefix(d, "arn:") && !strings.Contains(d, ":") {
			d += ":*"
		}
		defs = append(defs, arn(d, "ecs", "task-definition", awscdk.ArnFormat_SLASH_RESOURCE_NAME, false))
	}
	inClusters := map[string]any{"ArnEquals": map[string]any{"ecs:cluster": clusters}}
	out = append(out,
		statement("RunStepTasks", []string{"ecs:RunTask"}, defs, inClusters),
		statement("WatchStepTasks", []string{"ecs:DescribeTasks", "ecs:StopTask"}, tasks, nil),
		statement("FindStepTasks", []string{"ecs:ListTasks"}, []string{"*"}, inClusters),
		statement("DescribeStepTaskDefinitions", []string{"ecs:DescribeTaskDefinition"}, []string{"*"}, nil),
	)
	if len(t.PassRoles) > 0 {
		var roles []string
		for _, r := range t.PassRoles {
			roles = append(roles, arn(r, "iam", "role", awscdk.ArnFormat_SLASH_RESOURCE_NAME, true))
		}
		out = append(out, statement("PassStepTaskRoles", []string{"iam:PassRole"}, roles,
			map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "ecs-tasks.amazonaws.com"}}))
	}
	return out
}

func statement(sid string, actions, resources []string, conditions map[string]any) awsiam.PolicyStatement {
	props := &awsiam.PolicyStatementProps{Sid: jsii.String(sid), Effect: awsiam.Effect_ALLOW,
		Actions: jsii.Strings(actions...), Resources: jsii.Strings(resources...)}
	if conditions != nil {
		props.Conditions = &conditions
	}
	return awsiam.NewPolicyStatement(props)
}
