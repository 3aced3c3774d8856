package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"strconv"
)

// EngineSecretEnv maps each database variable of the engine container to the
// field of the database secret ECS injects into it at task start.
var EngineSecretEnv = map[string]string{
	"DB_HOST":     "host",
	"DB_PORT":     "port",
	"DB_NAME":     "dbname",
	"DB_USER":     "username",
	"DB_PASSWORD": "password",
}

// EngineContainerName is the name of the engine's container in its task.
const EngineContainerName = "engine"

// EngineStackProps configures NewEngineStack.
type EngineStackProps struct {
	awscdk.StackProps
	// Vpc is the network; tasks run in its private subnets.
	Vpc awsec2.IVpc
	// SecurityGroup is attached to the tasks; the data stack lets it reach
	// the database.
	SecurityGroup awsec2.ISecurityGroup
	// DatabaseSecret holds host, port, dbname, username and password. Only the
	// task execution role may read it.
	DatabaseSecret awssecretsmanager.ISecret
	// Image is the maestro image (linux/arm64); its entrypoint is the maestro
	// binary.
	Image awsecs.ContainerImage
	// DesiredCount is the number of engine tasks.
	DesiredCount int
	// GroupCount is the number of flow groups (MAESTRO_GROUP_COUNT); it must
	// equal the API function's.
	GroupCount int
	// CPU (CPU units) and MemoryMiB size each task.
	CPU, MemoryMiB int
	// LogRetention applies to the engine's log group.
	LogRetention awslogs.RetentionDays
	// StepTargets are what the engine's steps may call; the task role gets
	// exactly those permissions (StepRuntimeStatements).
	StepTargets StepTargets
}

// EngineStack holds the ECS cluster and the Fargate service running
// `maestro engine`.
type EngineStack struct {
	awscdk.Stack
	// Cluster is the ECS cluster; later stacks may run step tasks in it.
	Cluster awsecs.ICluster
	// Service is the engine's Fargate service.
	Service awsecs.FargateService
	// TaskRole is the role the engine's code runs as. It holds no permission
	// yet; grant it what step runtimes and event publishing need.
	TaskRole awsiam.IRole
	// LogGroup receives the engine's JSON logs.
	LogGroup awslogs.ILogGroup
}

// NewEngineStack builds the ECS cluster and the engine service: arm64 Fargate
// tasks running `maestro engine` with database settings injected from the
// secret. The engine applies database migrations at start-up under an
// advisory lock, so the task's database access is all a deployment needs.
func NewEngineStack(scope constructs.Construct, id string, props *EngineStackProps) *EngineStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	cluster := awsecs.NewCluster(stack, jsii.String("Cluster"), &awsecs.ClusterProps{
		Vpc: props.Vpc,
	})

	logGroup := awslogs.NewLogGroup(stack, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention: props.LogRetention,
	})

	task := awsecs.NewFargateTaskDefinition(stack, jsii.String("Task"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(props.CPU),
		MemoryLimitMiB: jsii.Number(props.MemoryMiB),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})

	secrets := make(map[string]awsecs.Secret, len(EngineSecretEnv))
	for env, field := range EngineSecretEnv {
		secrets[env] = awsecs.Secret_FromSecretsManager(props.DatabaseSecret, jsii.String(field))
	}
	task.AddContainer(jsii.String(EngineContainerName), &awsecs.ContainerDefinitionOptions{
		Image:     props.Image,
		Command:   jsii.Strings("engine"),
		Essential: jsii.Bool(true),
		Environment: &map[string]*string{
			"LOG_FORMAT":          jsii.String("json"),
			"MAESTRO_GROUP_COUNT": jsii.String(strconv.Itoa(props.GroupCount)),
		},
		Secrets: &secrets,
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

	for _, st := range StepRuntimeStatements(stack, props.StepTargets) {
		task.AddToTaskRolePolicy(st)
	}

	return &EngineStack{
		Stack:    stack,
		Cluster:  cluster,
		Service:  service,
		TaskRole: task.TaskRole(),
		LogGroup: logGroup,
	}
}
