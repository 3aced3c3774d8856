package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// StackPrefix starts the id (and CloudFormation name) of every stack.
const StackPrefix = "Maestro"

// ImageExcludes are left out of the engine image's build context. They
// mirror the root .dockerignore. Besides VCS data and build outputs, what the
// maestro binary cannot use (infra/, cdk.json, docs, CI, LocalStack setup)
// is left out so that changing it does not rebuild and redeploy the engine.
var ImageExcludes = []string{
	".git",
	".ci",
	".maestro",
	"build",
	"cdk.out",
	"cdk.json",
	"cdk.context.json",
	"docs",
	"infra",
	"localstack",
	"node_modules",
}

// Assets are the build outputs the app deploys. main makes them from the
// repository; tests pass stand-ins so that they need neither a build nor
// Docker.
type Assets struct {
	// APICode is the API Lambda's deployment package.
	APICode awslambda.Code
	// EngineImage is the maestro container image for the engine service.
	EngineImage awsecs.ContainerImage
}

// EngineImageFromDir builds the engine image from dir with the Dockerfile at
// its root, for linux/arm64. Synth only stages the context; the image is
// built by `cdk deploy`.
func EngineImageFromDir(dir string) awsecs.ContainerImage {
	return awsecs.ContainerImage_FromAsset(jsii.String(dir), &awsecs.AssetImageProps{
		File:     jsii.String("Dockerfile"),
		Platform: awsecrassets.Platform_LINUX_ARM64(),
		Exclude:  jsii.Strings(ImageExcludes...),
	})
}

// Stacks are the stacks of one Maestro deployment.
type Stacks struct {
	// Network is the VPC and the database clients' security groups.
	Network *NetworkStack
	// Data is Aurora PostgreSQL and its secret.
	Data *DataStack
	// Engine is the ECS cluster and the engine service.
	Engine *EngineStack
	// API is the API Lambda and its REST API.
	API *APIStack
}

// NewMaestro adds every Maestro stack to scope, wiring cross-stack values
// through Props. Order matters: a stack may only take values from stacks
// built before it. An events stack (queues, topic, the signals, time-trigger
// and publisher functions) belongs after Data and before Engine, so that the
// engine can be given its internal-events queue and the functions reuse
// Network.FunctionSecurityGroup and Data.Secret.
func NewMaestro(scope constructs.Construct, cfg Config, assets Assets) (*Stacks, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("maestro config: %w", err)
	}
	removal, _ := cfg.removalPolicy()
	retention, _ := cfg.logRetention()
	env := stackEnv()

	network := NewNetworkStack(scope, StackPrefix+"Network", &NetworkStackProps{
		StackProps: awscdk.StackProps{Env: env, Description: jsii.String("Maestro network: VPC and security groups")},
	})
	data := NewDataStack(scope, StackPrefix+"Data", &DataStackProps{
		StackProps:           awscdk.StackProps{Env: env, Description: jsii.String("Maestro data: Aurora PostgreSQL Serverless v2")},
		Vpc:                  network.Vpc,
		ClientSecurityGroups: []awsec2.ISecurityGroup{network.EngineSecurityGroup, network.FunctionSecurityGroup},
		MinCapacity:          cfg.DBMinCapacity,
		MaxCapacity:          cfg.DBMaxCapacity,
		Readers:              cfg.DBReaders,
		DeletionProtection:   cfg.DBDeletionProtection,
		RemovalPolicy:        removal,
	})
	engine := NewEngineStack(scope, StackPrefix+"Engine", &EngineStackProps{
		StackProps:     awscdk.StackProps{Env: env, Description: jsii.String("Maestro engine: ECS Fargate service")},
		Vpc:            network.Vpc,
		SecurityGroup:  network.EngineSecurityGroup,
		DatabaseSecret: data.Secret,
		Image:          assets.EngineImage,
		DesiredCount:   cfg.EngineDesiredCount,
		GroupCount:     cfg.GroupCount,
		CPU:            cfg.EngineCPU,
		MemoryMiB:      cfg.EngineMemoryMiB,
		LogRetention:   retention,
		StepTargets:    cfg.StepTargets,
	})
	api := NewAPIStack(scope, StackPrefix+"Api", &APIStackProps{
		StackProps:           awscdk.StackProps{Env: env, Description: jsii.String("Maestro API: Lambda behind an IAM-authorized REST API")},
		Vpc:                  network.Vpc,
		SecurityGroup:        network.FunctionSecurityGroup,
		DatabaseSecret:       data.Secret,
		Code:                 assets.APICode,
		GroupCount:           cfg.GroupCount,
		LogRetention:         retention,
		ThrottlingRateLimit:  cfg.APIThrottlingRateLimit,
		ThrottlingBurstLimit: cfg.APIThrottlingBurstLimit,
		CloudWatchRole:       cfg.APICloudWatchRole,
	})

	awscdk.Tags_Of(scope).Add(jsii.String("project"), jsii.String("maestro"), nil)
	return &Stacks{Network: network, Data: data, Engine: engine, API: api}, nil
}

// stackEnv leaves the stacks environment-agnostic: they deploy to the
// account and region of the credentials `cdk deploy` runs with, and synth
// needs no AWS access.
func stackEnv() *awscdk.Environment {
	return nil
}
