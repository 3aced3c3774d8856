package main

import (
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// EngineContainerName is the name of the engine's container in its task.
const EngineContainerName = "engine"

// EngineHealthAddr is where the engine container serves its health endpoint
// (MAESTRO_HEALTH_ADDR); the container health check runs `maestro health`,
// which asks it. Only the container itself reaches it.
const EngineHealthAddr = "127.0.0.1:8081"

// EngineLivenessCommand is the container health check: it succeeds while
// the engine process serves its liveness endpoint.
var EngineLivenessCommand = []string{"CMD", "/maestro", "health", "--live"}

// EngineCPUTargetPercent is the engine service's one scaling signal: the
// tasks' average CPU that target tracking keeps.
const EngineCPUTargetPercent = 60

// EngineStackProps configures NewEngineStack.
type EngineStackProps struct {
	awscdk.StackProps
	// Vpc is the network; tasks run in its private subnets.
	Vpc awsec2.IVpc
	// SecurityGroup is attached to the tasks; the data stack lets it reach
	// the database.
	SecurityGroup awsec2.ISecurityGroup
	// DatabaseSecret holds host, port, dbname, username and password. The
	// engine reads it (DB_SECRET_ARN) for every new connection, so a
	// rotated password needs no restart.
	DatabaseSecret awssecretsmanager.ISecret
	// Admins are the principals the engine treats as administrators
	// (MAESTRO_ADMINS, as the API's): a step of a workflow an
	// administrator owns may start any workflow.
	Admins []string
	// EventQueue receives the engine's internal events
	// (MAESTRO_EVENT_QUEUE_URL); nil turns forwarding off.
	EventQueue awssqs.IQueue
	// Image is the maestro image (linux/arm64); its entrypoint is the maestro
	// binary.
	Image awsecs.ContainerImage
	// DesiredCount is the number of engine tasks, and the least autoscaling
	// keeps.
	DesiredCount int
	// MaxCount is the most tasks autoscaling may run.
	MaxCount int
	// GroupCount is the number of flow groups (MAESTRO_GROUP_COUNT); it must
	// equal the API function's.
	GroupCount int
	// CPU (CPU units) and MemoryMiB size each task.
	CPU, MemoryMiB int
	// LogRetention applies to the engine's log group.
	LogRetention awslogs.RetentionDays
	// StepTargets are what the engine's steps may call; the task role gets
	// exactly those permissions (StepRuntimeStatements), and the engine's
	// step settings follow them (EcsTask defaults, Http allowed hosts).
	StepTargets StepTargets
	// Traces is where the engine exports its spans (OTEL_* variables and,
	// for X-Ray's endpoint, xray:PutTraceSegments on the task role).
	Traces TraceExport
	// PublicURL is the base of alert links (MAESTRO_PUBLIC_URL): the API's
	// URL.
	PublicURL *string
	// ClusterName is the events' cluster_name (MAESTRO_CLUSTER_NAME).
	ClusterName string
	// MetricsNamespace is the deployment's metrics namespace
	// (MAESTRO_METRICS_NAMESPACE when not the default).
	MetricsNamespace string
	// Iceberg is the catalog the engine's signal broker reads (the runs of
	// incremental triggers its sweep starts).
	Iceberg IcebergAccess
	// Emulator builds only what a local `maestro engine` needs of the stack
	// (the emulator cannot run ECS tasks): the task's environment, as the
	// Environment output, and the step tasks' security group; no cluster,
	// service, roles or scaling.
	Emulator bool
}

// EngineStack holds the ECS cluster and the Fargate service running
// `maestro engine`. On the emulator target it holds only the engine's
// environment (and the step tasks' security group): the cluster, service,
// task role and scaling are nil.
type EngineStack struct {
	awscdk.Stack
	// Cluster is the ECS cluster; later stacks may run step tasks in it.
	Cluster awsecs.ICluster
	// Service is the engine's Fargate service.
	Service awsecs.FargateService
	// TaskRole is the role the engine's code runs as: it may read the
	// database secret and send to the internal-events queue. Grant it what
	// step runtimes need.
	TaskRole awsiam.IRole
	// AWSJobEvents is the queue of the AWS job steps' state-change events
	// (awsjobevents.go); nil when those steps have no target.
	AWSJobEvents *QueueWithDLQ
	// Scaling is the service's autoscaling target.
	Scaling awsecs.ScalableTaskCount
	// LogGroup receives the engine's JSON logs.
	LogGroup awslogs.ILogGroup
	// Environment is the engine container's environment (EngineEnvironment).
	Environment map[string]*string
	// StepTaskSecurityGroup is the default security group of EcsTask steps'
	// tasks; nil unless step ECS clusters are configured without security
	// groups of their own.
	StepTaskSecurityGroup awsec2.ISecurityGroup
}

// EngineEnvironmentOutput is the engine stack's output, on the emulator
// target, holding the engine's environment as a JSON object: `make e2e`
// starts the local `maestro engine` with it, as ECS would start the task.
const EngineEnvironmentOutput = "Environment"

// EngineTaskRoleOutput is the emulator target's output holding the engine
// task role's ARN, which the local maestro engine assumes.
const EngineTaskRoleOutput = "TaskRoleArn"

// EngineEnvironment is the engine container's environment: the database
// secret, the group count, the event queue, alert links and cluster name,
// the health endpoint, the region, and the step runtimes' settings from the
// step targets. stepSG, when set, is the EcsTask steps' default security
// group.
func EngineEnvironment(props *EngineStackProps, stepSG awsec2.ISecurityGroup) map[string]*string {
	env := map[string]*string{
		"LOG_FORMAT":           jsii.String("json"),
		"MAESTRO_GROUP_COUNT":  jsii.String(strconv.Itoa(props.GroupCount)),
		"DB_SECRET_ARN":        props.DatabaseSecret.SecretArn(),
		"MAESTRO_HEALTH_ADDR":  jsii.String(EngineHealthAddr),
		"MAESTRO_CLUSTER_NAME": jsii.String(props.ClusterName),
		// Fargate tasks have no instance metadata to take the region from;
		// the event queue's and the step runtimes' AWS clients need it.
		"AWS_REGION": awscdk.Aws_REGION(),
	}
	if len(props.Admins) > 0 {
		env["MAESTRO_ADMINS"] = jsii.String(strings.Join(props.Admins, ","))
	}
	if props.PublicURL != nil {
		env["MAESTRO_PUBLIC_URL"] = props.PublicURL
	}
	for k, v := range props.Iceberg.Environment() {
		env[k] = jsii.String(v)
	}
	if ns := props.MetricsNamespace; ns != "" && ns != metrics.Namespace {
		env[metrics.NamespaceEnv] = jsii.String(ns)
	}
	for k, v := range props.Traces.Environment(tracing.ServiceEngine) {
		env[k] = v
	}
	if props.EventQueue != nil {
		env["MAESTRO_EVENT_QUEUE_URL"] = props.EventQueue.QueueUrl()
	}
	t := props.StepTargets
	if len(t.HTTPAllowedHosts) > 0 {
		env["MAESTRO_HTTP_ALLOWED_HOSTS"] = jsii.String(strings.Join(t.HTTPAllowedHosts, ","))
	}
	if len(t.EcsClusters) > 0 {
		// Steps that name no cluster run in the first one.
		env["MAESTRO_ECS_CLUSTER"] = jsii.String(t.EcsClusters[0])
		if len(t.EcsSubnets) > 0 {
			env["MAESTRO_ECS_SUBNETS"] = jsii.String(strings.Join(t.EcsSubnets, ","))
		} else {
			private := props.Vpc.SelectSubnets(&awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetPrivate)})
			env["MAESTRO_ECS_SUBNETS"] = awscdk.Fn_Join(jsii.String(","), private.SubnetIds)
		}
		if len(t.EcsSecurityGroups) > 0 {
			env["MAESTRO_ECS_SECURITY_GROUPS"] = jsii.String(strings.Join(t.EcsSecurityGroups, ","))
		} else if stepSG != nil {
			env["MAESTRO_ECS_SECURITY_GROUPS"] = stepSG.SecurityGroupId()
		}
	}
	JobEnvironment(t.Jobs, env)
	return env
}

// NewEngineStack builds the ECS cluster (Container Insights on) and the
// engine service: arm64 Fargate tasks running `maestro engine`, with a
// liveness health check and target-tracking autoscaling on CPU. The engine
// applies database migrations at start-up under an advisory lock.
func NewEngineStack(scope constructs.Construct, id string, props *EngineStackProps) *EngineStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	logGroup := awslogs.NewLogGroup(stack, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention: props.LogRetention,
	})
	var stepSG awsec2.ISecurityGroup
	if t := props.StepTargets; len(t.EcsClusters) > 0 && len(t.EcsSecurityGroups) == 0 {
		stepSG = awsec2.NewSecurityGroup(stack, jsii.String("StepTaskSecurityGroup"), &awsec2.SecurityGroupProps{
			Vpc:              props.Vpc,
			Description:      jsii.String("Maestro EcsTask step tasks: egress only"),
			AllowAllOutbound: jsii.Bool(true),
		})
	}
	env := EngineEnvironment(props, stepSG)
	jobEvents := newAWSJobEvents(stack, props.StepTargets)
	if jobEvents != nil {
		env[AWSJobEventsQueueEnv] = jobEvents.Queue.QueueUrl()
	}
	s := &EngineStack{Stack: stack, LogGroup: logGroup, Environment: env, StepTaskSecurityGroup: stepSG, AWSJobEvents: jobEvents}

	// The role the engine's code runs as, with the same grants on both
	// targets: on the emulator target the harness runs maestro engine as
	// this role (the account may assume it there), so the e2e IAM check
	// holds the engine's calls against what a task would be allowed.
	taskRole := awsiam.NewRole(stack, jsii.String("TaskRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("Maestro engine task: the database secret, the internal-events queue and the configured step targets"),
	})
	props.DatabaseSecret.GrantRead(taskRole, nil)
	if props.EventQueue != nil {
		props.EventQueue.GrantSendMessages(taskRole)
	}
	for _, st := range StepRuntimeStatements(stack, props.StepTargets) {
		taskRole.AddToPrincipalPolicy(st)
	}
	props.Traces.Grant(taskRole)
	props.Iceberg.Grant(stack, taskRole)
	if t := props.StepTargets; len(t.LambdaFunctions) > 0 || len(t.EcsClusters) > 0 {
		nagSuppress(taskRole, "AwsSolutions-IAM5", "step targets (StepRuntimeStatements): a step function's versions and aliases (<fn>:*), "+
			"every revision of a step task definition family (<family>:*), the tasks of a step cluster (task/<cluster>/*), "+
			"ecs:ListTasks on * limited by an ecs:cluster condition, and ecs:DescribeTaskDefinition, which takes no resource",
			`/^Resource::.*:function:[^:*]+:\*$/`, `/^Resource::.*:task-definition\/[^:*]+:\*$/`, `/^Resource::.*:task\/[^/*]+\/\*$/`, `/^Resource::\*$/`)
	}
	nagAcceptAWSJobs(taskRole, props.StepTargets.AWSJobs)
	if jobEvents != nil {
		jobEvents.Queue.GrantConsumeMessages(taskRole)
		if props.Emulator {
			EmulatorBatchGrant(taskRole, "sqs:DeleteMessageBatch", jobEvents.Queue.QueueArn())
		}
	}
	if props.Emulator && len(props.StepTargets.AWSJobs.AthenaWorkgroups) > 0 {
		// AWS authorises the calls that name a query by its id against the
		// query's workgroup; the emulator, which cannot tell the workgroup
		// from the request, against "*".
		for _, action := range []string{"athena:GetQueryExecution", "athena:GetQueryResults", "athena:StopQueryExecution", "athena:BatchGetQueryExecution"} {
			EmulatorBatchGrant(taskRole, action, jsii.String("*"))
		}
		nagSuppress(taskRole, "AwsSolutions-IAM5", "emulator target only: the emulator authorises Athena calls naming a query by id against *, AWS against the query's workgroup",
			`/^Resource::\*$/`)
	}
	if t := props.StepTargets.Jobs; props.Emulator && len(t.BatchJobQueues) > 0 && len(t.BatchJobDefinitions) > 0 {
		// AWS authorises SubmitJob against the job queue and the job
		// definition (SubmitStepJobs); the emulator, which derives no
		// resource from a Batch request, against "*".
		EmulatorBatchGrant(taskRole, "batch:SubmitJob", jsii.String("*"))
		nagSuppress(taskRole, "AwsSolutions-IAM5", "emulator target only: the emulator authorises Batch's SubmitJob against *, AWS against the job queue and definition",
			`/^Resource::\*$/`)
	}
	jobNagSuppressions(taskRole, props.StepTargets.Jobs)
	s.TaskRole = taskRole
	if props.Emulator {
		if props.EventQueue != nil {
			EmulatorBatchGrant(taskRole, "sqs:SendMessageBatch", props.EventQueue.QueueArn())
		}
		taskRole.AssumeRolePolicy().AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:    jsii.Strings("sts:AssumeRole"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()},
		}))
		output(stack, EngineEnvironmentOutput, stack.ToJsonString(env, nil),
			"the engine's environment, as the ECS task would have it (the emulator target runs maestro engine locally)")
		output(stack, EngineTaskRoleOutput, taskRole.RoleArn(),
			"the engine task's role, which the emulator target's local maestro engine runs as")
		return s
	}

	cluster := awsecs.NewCluster(stack, jsii.String("Cluster"), &awsecs.ClusterProps{
		Vpc:                            props.Vpc,
		ContainerInsightsV2:            awsecs.ContainerInsights_ENABLED,
		EnableFargateCapacityProviders: jsii.Bool(true),
	})

	task := awsecs.NewFargateTaskDefinition(stack, jsii.String("Task"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(props.CPU),
		MemoryLimitMiB: jsii.Number(props.MemoryMiB),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
		TaskRole: taskRole,
	})

	task.AddContainer(jsii.String(EngineContainerName), &awsecs.ContainerDefinitionOptions{
		Image:       props.Image,
		Command:     jsii.Strings("engine"),
		Essential:   jsii.Bool(true),
		Environment: &env,
		// Liveness only: the process answers its health endpoint
		// (`maestro health --live`, engine/health). It does not ask the
		// database, so a writer failover does not make ECS replace every
		// task at once; readiness (database, leases) is the engine's Ready
		// metric and its alarm. The start period covers migrations.
		HealthCheck: &awsecs.HealthCheck{
			Command:     jsii.Strings(EngineLivenessCommand...),
			Interval:    awscdk.Duration_Seconds(jsii.Number(15)),
			Timeout:     awscdk.Duration_Seconds(jsii.Number(5)),
			Retries:     jsii.Number(3),
			StartPeriod: awscdk.Duration_Seconds(jsii.Number(60)),
		},
		Logging: awsecs.LogDriver_AwsLogs(&awsecs.AwsLogDriverProps{
			LogGroup:     logGroup,
			StreamPrefix: jsii.String(EngineContainerName),
			Mode:         awsecs.AwsLogDriverMode_NON_BLOCKING,
		}),
		// Time to hand flow groups over cleanly on SIGTERM.
		StopTimeout: awscdk.Duration_Seconds(jsii.Number(60)),
	})

	service := awsecs.NewFargateService(stack, jsii.String("Service"), &awsecs.FargateServiceProps{
		Cluster:              cluster,
		TaskDefinition:       task,
		DesiredCount:         jsii.Number(props.DesiredCount),
		MinHealthyPercent:    jsii.Number(100),
		MaxHealthyPercent:    jsii.Number(200),
		CircuitBreaker:       &awsecs.DeploymentCircuitBreaker{Enable: jsii.Bool(true), Rollback: jsii.Bool(true)},
		SecurityGroups:       &[]awsec2.ISecurityGroup{props.SecurityGroup},
		VpcSubnets:           &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
		AssignPublicIp:       jsii.Bool(false),
		EnableECSManagedTags: jsii.Bool(true),
		PropagateTags:        awsecs.PropagatedTagSource_SERVICE,
	})

	scaling := service.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(props.DesiredCount),
		MaxCapacity: jsii.Number(props.MaxCount),
	})
	// One scaling signal, so that no policy undoes another: CPU target
	// tracking owns both directions (its scale-in alarm is the same
	// metric's). Outbox age is alarmed (EngineBacklog), not scaled on: more
	// tasks do not drain a backlog the database or a flow group's owner
	// holds up (docs/scaling.md).
	scaling.ScaleOnCpuUtilization(jsii.String("Cpu"), &awsecs.CpuUtilizationScalingProps{
		TargetUtilizationPercent: jsii.Number(EngineCPUTargetPercent),
		ScaleInCooldown:          awscdk.Duration_Minutes(jsii.Number(5)),
		ScaleOutCooldown:         awscdk.Duration_Minutes(jsii.Number(1)),
	})
	nagSuppress(task.ExecutionRole(), "AwsSolutions-IAM5", "ecr:GetAuthorizationToken takes no resource; the image pull actions are scoped to the asset repository", `/^Resource::\*$/`)
	nagSuppress(task, "AwsSolutions-ECS2", "the environment holds no secret: the database password is read from Secrets Manager (DB_SECRET_ARN) by the engine itself")
	s.Cluster, s.Service, s.Scaling = cluster, service, scaling
	return s
}

// EmulatorBatchGrant grants action on resources, on the emulator target
// only. AWS authorises a batch call by its single action (SendMessageBatch
// is sqs:SendMessage, PublishBatch sns:Publish), which the roles are
// granted; the emulator, evaluating IAM in make e2e, asks for an action of
// the batch call's own name, which AWS does not define.
func EmulatorBatchGrant(role awsiam.IRole, action string, resources ...*string) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(action),
		Resources: &resources,
	}))
}
