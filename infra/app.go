package main

import (
	"errors"
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// StackPrefix starts the id (and CloudFormation name) of every stack;
// Config.StackPrefix adds the stage.
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
	// Functions are the Lambda deployment packages by function name
	// (FunctionAPI, ...). The API's is required; a function without one is
	// left out, while its queues, topics and alarms are deployed.
	Functions map[string]awslambda.Code
	// EngineImage is the maestro container image for the engine service;
	// unused on the emulator target.
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
	// Data is Aurora PostgreSQL, its secret and RDS Proxy (on the emulator
	// target only a secret pointing at a local PostgreSQL).
	Data *DataStack
	// Events is the internal-events queue, the publisher and the SNS topics.
	Events *EventsStack
	// Signals is the signals queue and function.
	Signals *SignalsStack
	// Triggers is the time-trigger function and its schedule.
	Triggers *TriggersStack
	// Archive is the archive bucket, the archiver function and its
	// schedule (retention and archival).
	Archive *ArchiveStack
	// Engine is the ECS cluster and the engine service; on the emulator
	// target, where `maestro engine` runs as a local process, only the
	// engine's environment.
	Engine *EngineStack
	// API is the API Lambda and its REST API.
	API *APIStack
	// Monitoring is the alarms and the dashboard.
	Monitoring *MonitoringStack
}

// NewMaestro adds every Maestro stack to scope, wiring cross-stack values
// through Props. Order matters: a stack may only take values from stacks
// built before it. cfg.Target "emulator" swaps what an emulator cannot host
// (see Config.Target); nothing else differs between the targets.
func NewMaestro(scope constructs.Construct, cfg Config, assets Assets) (*Stacks, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("maestro config: %w", err)
	}
	if assets.Functions[FunctionAPI] == nil {
		return nil, errors.New("maestro assets: the API function's code is required")
	}
	if !cfg.Emulator() && assets.EngineImage == nil {
		return nil, errors.New("maestro assets: the engine image is required")
	}
	removal, _ := cfg.removalPolicy()
	retention, _ := cfg.logRetention()
	env := stackEnv()
	prefix := cfg.StackPrefix()
	props := func(description string) awscdk.StackProps {
		return awscdk.StackProps{Env: env, Description: jsii.String(description)}
	}

	network := NewNetworkStack(scope, prefix+"Network", &NetworkStackProps{
		StackProps:   props("Maestro network: VPC and security groups"),
		LogRetention: retention,
		Emulator:     cfg.Emulator(),
		NatGateways:  cfg.NatGateways,
		Endpoints:    cfg.VpcEndpoints,
		StepTargets:  cfg.StepTargets,
	})
	dataProps := &DataStackProps{
		StackProps:                 props("Maestro data: Aurora PostgreSQL Serverless v2 and RDS Proxy"),
		Vpc:                        network.Vpc,
		ClientSecurityGroups:       []awsec2.ISecurityGroup{network.EngineSecurityGroup},
		ProxyClientSecurityGroups:  []awsec2.ISecurityGroup{network.FunctionSecurityGroup},
		Proxy:                      cfg.DBProxy,
		ProxyMaxConnectionsPercent: cfg.DBProxyMaxConnectionsPercent,
		RotationDays:               cfg.DBSecretRotationDays,
		MinCapacity:                cfg.DBMinCapacity,
		MaxCapacity:                cfg.DBMaxCapacity,
		Readers:                    cfg.DBReaders,
		DeletionProtection:         cfg.DBDeletionProtection,
		RemovalPolicy:              removal,
	}
	arch := awslambda.Architecture_ARM_64()
	if cfg.LambdaArchitecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	dataProps.MigrateCode, dataProps.MigrateArchitecture, dataProps.LogRetention = assets.Functions[FunctionMigrate], arch, retention
	if cfg.Emulator() {
		dataProps.StackProps = props("Maestro data: the secrets of a local PostgreSQL (emulator target)")
		dataProps.EmulatorURL = cfg.EmulatorDatabaseURL
	}
	data := NewDataStack(scope, prefix+"Data", dataProps)
	if data.Cluster != nil && !cfg.DBDeletionProtection {
		nagSuppress(data.Cluster, "AwsSolutions-RDS10", "deletion protection was turned off for this deployment (maestro:dbDeletionProtection=false)")
	}
	traces := TraceExport{Endpoint: cfg.OTLPEndpoint, Stage: cfg.Stage}
	functions := FunctionBase{
		Vpc:              network.Vpc,
		SecurityGroup:    network.FunctionSecurityGroup,
		DatabaseSecret:   data.Secret,
		ProxyEndpoint:    data.ProxyEndpoint(),
		GroupCount:       cfg.GroupCount,
		ClusterName:      cfg.ClusterName,
		MetricsNamespace: metrics.NamespaceOf(cfg.Stage),
		Traces:           traces,
		Architecture:     arch,
		LogRetention:     retention,
	}

	events := NewEventsStack(scope, prefix+"Events", &EventsStackProps{
		StackProps:          props("Maestro events: internal-events queue, publisher, SNS event and alert topics"),
		Functions:           functions,
		PublisherCode:       assets.Functions[FunctionPublisher],
		ReservedConcurrency: cfg.ReservedConcurrency[FunctionPublisher],
		SubscriberFilter:    cfg.ExampleSubscriberFilter,
		AlarmEmail:          cfg.AlarmEmail,
		Emulator:            cfg.Emulator(),
	})
	signals := NewSignalsStack(scope, prefix+"Signals", &SignalsStackProps{
		StackProps:          props("Maestro signals: signals queue and function"),
		Functions:           functions,
		Code:                assets.Functions[FunctionSignals],
		ReservedConcurrency: cfg.ReservedConcurrency[FunctionSignals],
		S3Buckets:           cfg.S3SignalBuckets,
		S3SignalRules:       cfg.S3SignalRules,

		TableChangeGlueDatabases: cfg.TableChangeGlueDatabases,
		TableChangeTableBuckets:  cfg.TableChangeTableBuckets,
		Iceberg:                  IcebergAccessOf(cfg),
	})
	triggers := NewTriggersStack(scope, prefix+"Triggers", &TriggersStackProps{
		StackProps:          props("Maestro time triggers: function and its one-minute schedule"),
		Functions:           functions,
		Code:                assets.Functions[FunctionTimeTrigger],
		ReservedConcurrency: cfg.ReservedConcurrency[FunctionTimeTrigger],
		Emulator:            cfg.Emulator(),
	})
	archived := NewArchiveStack(scope, prefix+"Archive", &ArchiveStackProps{
		StackProps:          props("Maestro retention: archive bucket, archiver function and its hourly schedule"),
		Functions:           functions,
		Code:                assets.Functions[FunctionArchiver],
		Retention:           cfg.Retention,
		ReservedConcurrency: cfg.ReservedConcurrency[FunctionArchiver],
		RemovalPolicy:       awscdk.RemovalPolicy_RETAIN,
		Emulator:            cfg.Emulator(),
	})
	if removal == awscdk.RemovalPolicy_DESTROY {
		archived.Bucket.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY)
	}

	api := NewAPIStack(scope, prefix+"Api", &APIStackProps{
		StackProps:           props("Maestro API: Lambda behind an IAM-authorized REST API"),
		Functions:            functions,
		Code:                 assets.Functions[FunctionAPI],
		ReservedConcurrency:  cfg.ReservedConcurrency[FunctionAPI],
		Admins:               cfg.Admins,
		ThrottlingRateLimit:  cfg.APIThrottlingRateLimit,
		ThrottlingBurstLimit: cfg.APIThrottlingBurstLimit,
		CloudWatchRole:       cfg.APICloudWatchRole,
		Name:                 cfg.ResourceName("maestro"),
		Iceberg:              IcebergAccessOf(cfg),
	})
	archived.GrantReadArchive(api.Function)
	publicURL := api.RestAPI.Url()
	if cfg.PublicURL != "" {
		publicURL = jsii.String(cfg.PublicURL)
	}
	engineProps := &EngineStackProps{
		StackProps:       props("Maestro engine: ECS Fargate service"),
		Vpc:              network.Vpc,
		SecurityGroup:    network.EngineSecurityGroup,
		DatabaseSecret:   data.Secret,
		EventQueue:       events.Queue.Queue,
		Admins:           cfg.Admins,
		Iceberg:          IcebergAccessOf(cfg),
		Image:            assets.EngineImage,
		DesiredCount:     cfg.EngineDesiredCount,
		MaxCount:         cfg.EngineMaxCount,
		GroupCount:       cfg.GroupCount,
		CPU:              cfg.EngineCPU,
		MemoryMiB:        cfg.EngineMemoryMiB,
		LogRetention:     retention,
		StepTargets:      cfg.StepTargets,
		PublicURL:        publicURL,
		ClusterName:      cfg.ClusterName,
		MetricsNamespace: metrics.NamespaceOf(cfg.Stage),
		Traces:           traces,
	}
	if cfg.Emulator() {
		engineProps.StackProps = props("Maestro engine: its environment, for maestro engine run locally (emulator target)")
		engineProps.Emulator = true
	}
	engine := NewEngineStack(scope, prefix+"Engine", engineProps)

	// No code of the release runs before its migrations completed: the
	// migrate step is in the data stack, and every stack with code deploys
	// after it (most import its secret anyway; this holds for all).
	for _, s := range []awscdk.Stack{events.Stack, signals.Stack, triggers.Stack, archived.Stack, api.Stack, engine.Stack} {
		s.AddStackDependency(data.Stack, jsii.String("the migrate step runs before any code of the release"))
	}

	deployed := map[string]*Function{FunctionAPI: api.Function}
	for name, fn := range map[string]*Function{
		FunctionPublisher: events.Publisher, FunctionSignals: signals.Function, FunctionTimeTrigger: triggers.Function,
		FunctionArchiver: archived.Function,
	} {
		if fn != nil {
			deployed[name] = fn
		}
	}
	deadLetters := map[string]awssqs.IQueue{
		"internalEvents":      events.Queue.DeadLetterQueue,
		"exampleSubscriber":   events.Subscriber.DeadLetterQueue,
		"signals":             signals.Queue.DeadLetterQueue,
		"timeTriggerSchedule": triggers.DeadLetterQueue,
		"archiveSchedule":     archived.DeadLetterQueue,
	}
	if engine.AWSJobEvents != nil {
		deadLetters["awsJobEvents"] = engine.AWSJobEvents.DeadLetterQueue
	}
	monitoring := NewMonitoringStack(scope, prefix+"Monitoring", &MonitoringStackProps{
		StackProps:       props("Maestro monitoring: alarms and dashboard"),
		AlertTopic:       events.AlertTopic,
		DeadLetterQueues: deadLetters,
		Functions:        deployed,
		RestAPI:          api.RestAPI,
		Engine:           engine,
		Data:             data,
		SourceQueues: map[string]awssqs.IQueue{
			"internalEvents": events.Queue.Queue,
			"signals":        signals.Queue.Queue,
		},
		DBMaxCapacity:              cfg.DBMaxCapacity,
		ProxyMaxConnectionsPercent: cfg.DBProxyMaxConnectionsPercent,
		EngineBacklogSeconds:       cfg.EngineScaleQueueAgeSeconds,
		MetricsNamespace:           metrics.NamespaceOf(cfg.Stage),
	})

	awscdk.Aspects_Of(scope).Add(&internalLogRetention{retention: retention}, nil)
	awscdk.Tags_Of(scope).Add(jsii.String("project"), jsii.String("maestro"), nil)
	return &Stacks{
		Network: network, Data: data, Events: events, Signals: signals, Triggers: triggers, Archive: archived,
		Engine: engine, API: api, Monitoring: monitoring,
	}, nil
}

// stackEnv leaves the stacks environment-agnostic: they deploy to the
// account and region of the credentials `cdk deploy` runs with, and synth
// needs no AWS access.
func stackEnv() *awscdk.Environment {
	return nil
}
