package main

import (
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// Names of Maestro's Lambda functions: the directory under functions/, the
// package build/lambda/<name>.zip and the key of Assets.Functions.
const (
	FunctionAPI         = "api"
	FunctionSignals     = "signals"
	FunctionTimeTrigger = "timetrigger"
	FunctionPublisher   = "publisher"
	FunctionArchiver    = "archiver"
	// FunctionMigrate is the deploy step that applies the migrations
	// (NewMigration), in the data stack.
	FunctionMigrate = "migrate"
)

// AllFunctions lists every function the stacks know how to deploy besides
// FunctionMigrate (the data stack's; its concurrency is fixed at one).
var AllFunctions = []string{FunctionAPI, FunctionSignals, FunctionTimeTrigger, FunctionPublisher, FunctionArchiver}

// Built lists the functions whose code exists in this repository; main
// deploys these and leaves the others out (their queues, topics and alarms
// are deployed all the same). When functions/<name> lands, add its name here
// and to LAMBDAS in the Makefile.
var Built = []string{FunctionAPI, FunctionTimeTrigger, FunctionPublisher, FunctionSignals, FunctionMigrate, FunctionArchiver}

// FunctionBase is what every Maestro function shares: where it runs, how it
// reaches the database and how long its logs are kept. NewMaestro fills it
// once and hands it to each stack that deploys a function.
type FunctionBase struct {
	// Vpc and SecurityGroup place the function in the VPC's private subnets;
	// a function without Vpc runs outside the VPC (it needs no database).
	Vpc           awsec2.IVpc
	SecurityGroup awsec2.ISecurityGroup
	// DatabaseSecret is passed as DB_SECRET_ARN; the function may read this
	// secret and nothing else of Secrets Manager.
	DatabaseSecret awssecretsmanager.ISecret
	// ProxyEndpoint, when set, is passed as DB_PROXY_ENDPOINT: the host the
	// function connects to instead of the secret's (RDS Proxy).
	ProxyEndpoint string
	// GroupCount is MAESTRO_GROUP_COUNT; it must equal the engine's.
	GroupCount int
	// ClusterName is MAESTRO_CLUSTER_NAME, the events' cluster_name (the
	// API's event feed and the publisher's messages); it must equal the
	// engine's.
	ClusterName string
	// MetricsNamespace is the deployment's metrics namespace
	// (metrics.NamespaceOf its stage), set as MAESTRO_METRICS_NAMESPACE
	// when it is not the default.
	MetricsNamespace string
	// Traces is where the function exports its spans (OTEL_* variables;
	// none when unset).
	Traces TraceExport
	// Architecture is the packages' architecture; arm64 when nil.
	Architecture awslambda.Architecture
	// LogRetention applies to the function's log group.
	LogRetention awslogs.RetentionDays
}

// FunctionProps configures NewFunction.
type FunctionProps struct {
	FunctionBase
	// Description says what the function does.
	Description string
	// Code is the deployment package: a zip holding `bootstrap`, built for
	// linux/arm64 with -tags lambda.norpc.
	Code awslambda.Code
	// Environment is the function's own environment, besides the database
	// and group count variables FunctionBase sets.
	Environment map[string]string
	// ReservedConcurrency caps concurrent executions (and so database
	// connections); 0 leaves the function unreserved.
	ReservedConcurrency int
	// Timeout bounds one invocation; 30 s when zero.
	Timeout awscdk.Duration
	// MemoryMiB sizes the function; 512 when zero.
	MemoryMiB int
}

// Function is a Go Lambda function of Maestro (provided.al2023, arm64, in the
// VPC) with its own log group (its name is the stack output
// <id>LogGroupName) and a role that may write to that log group, manage its
// VPC network interfaces and do nothing else until granted more. Every
// function of the project is built with it.
type Function struct {
	constructs.Construct
	// Function is the Lambda function.
	Function awslambda.Function
	// Role is the function's execution role.
	Role awsiam.IRole
	// LogGroup receives the function's logs.
	LogGroup awslogs.ILogGroup
	// TimeoutSeconds is the function's timeout (its duration alarm is near
	// it).
	TimeoutSeconds float64
	// ReservedConcurrency is the function's reserved concurrency; 0 when
	// unreserved.
	ReservedConcurrency int
}

// NewFunction builds a Function.
func NewFunction(scope constructs.Construct, id string, props *FunctionProps) *Function {
	c := constructs.NewConstruct(scope, &id)

	timeout := props.Timeout
	if timeout == nil {
		timeout = awscdk.Duration_Seconds(jsii.Number(30))
	}
	memory := props.MemoryMiB
	if memory == 0 {
		memory = 512
	}

	arch := props.Architecture
	if arch == nil {
		arch = awslambda.Architecture_ARM_64()
	}
	var reserved *float64
	if props.ReservedConcurrency > 0 {
		reserved = jsii.Number(props.ReservedConcurrency)
	}

	logGroup := awslogs.NewLogGroup(c, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention: props.LogRetention,
	})
	role := awsiam.NewRole(c, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(props.Description),
	})
	if props.Vpc != nil {
		// What AWSLambdaVPCAccessExecutionRole grants for the function's
		// network interfaces, without its logs:* on every log group (the
		// function writes only to its own, below). These ec2 actions take
		// no resource-level scope at creation, hence "*".
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("VpcNetworkInterfaces"),
			Actions:   jsii.Strings(VpcNetworkInterfaceActions...),
			Resources: jsii.Strings("*"),
		}))
		nagSuppress(role, "AwsSolutions-IAM5", "Lambda's VPC network interface actions (ec2:CreateNetworkInterface and friends) support no resource-level permissions",
			`/^Resource::\*$/`)
	}
	logGroup.GrantWrite(role)

	env := make(map[string]*string, len(props.Environment)+3)
	for k, v := range props.Environment {
		env[k] = jsii.String(v)
	}
	if props.DatabaseSecret != nil {
		env["DB_SECRET_ARN"] = props.DatabaseSecret.SecretArn()
		props.DatabaseSecret.GrantRead(role, nil)
	}
	if props.ProxyEndpoint != "" {
		env["DB_PROXY_ENDPOINT"] = jsii.String(props.ProxyEndpoint)
	}
	if props.GroupCount > 0 {
		env["MAESTRO_GROUP_COUNT"] = jsii.String(strconv.Itoa(props.GroupCount))
	}
	if props.ClusterName != "" {
		env["MAESTRO_CLUSTER_NAME"] = jsii.String(props.ClusterName)
	}
	if ns := props.MetricsNamespace; ns != "" && ns != metrics.Namespace {
		env[metrics.NamespaceEnv] = jsii.String(ns)
	}
	// The service name is engine/tracing's for the function
	// ("maestro-timetrigger" for TimeTrigger). Active tracing (below)
	// already grants the role xray:PutTraceSegments, which X-Ray's OTLP
	// endpoint authorizes.
	for k, v := range props.Traces.Environment("maestro-" + strings.ToLower(id)) {
		env[k] = v
	}
	fnProps := &awslambda.FunctionProps{
		Description:  jsii.String(props.Description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: arch,
		Handler:      jsii.String("bootstrap"),
		Code:         props.Code,
		MemorySize:   jsii.Number(memory),
		Timeout:      timeout,
		Role:         role,
		LogGroup:     logGroup,
		Environment:  &env,
		// Active tracing: Lambda's segment continues the trace API Gateway
		// or SQS (AWSTraceHeader) passes, and engine/tracing's spans are
		// its children (docs/tracing.md).
		Tracing: awslambda.Tracing_ACTIVE,

		ReservedConcurrentExecutions: reserved,
	}
	if props.Vpc != nil {
		fnProps.Vpc = props.Vpc
		fnProps.VpcSubnets = &awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetPrivate)}
		fnProps.SecurityGroups = &[]awsec2.ISecurityGroup{props.SecurityGroup}
	}
	fn := awslambda.NewFunction(c, jsii.String("Function"), fnProps)
	nagSuppress(fn, "Serverless-LambdaDLQ", "no Maestro function is invoked asynchronously without a failure destination: API Gateway invokes the API synchronously, "+
		"SQS event sources invoke signals and publisher (a message that keeps failing goes to its queue's dead-letter queue), and the time-trigger "+
		"function has an on-failure destination (EventInvokeConfig), which takes the place of DeadLetterConfig")
	nagSuppress(role, "AwsSolutions-IAM5", "active tracing's xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions",
		`/^Resource::\*$/`)
	nagSuppress(role, "AwsSolutions-IAM5", "log stream names are generated by Lambda, so writing to the function's own log group needs <group-arn>:*",
		`/^Resource::<.*Logs[0-9A-F]{8}\.Arn>:\*$/`)
	output(awscdk.Stack_Of(scope), id+"LogGroupName", logGroup.LogGroupName(),
		"the "+id+" function's logs and EMF metrics (aws logs tail)")
	return &Function{Construct: c, Function: fn, Role: role, LogGroup: logGroup,
		TimeoutSeconds: *timeout.ToSeconds(nil), ReservedConcurrency: props.ReservedConcurrency}
}

// VpcNetworkInterfaceActions are what Lambda needs to run a function in a
// VPC: the actions of AWSLambdaVPCAccessExecutionRole without its logs
// (sorted, as the synthesized policy lists them).
var VpcNetworkInterfaceActions = []string{
	"ec2:AssignPrivateIpAddresses",
	"ec2:CreateNetworkInterface",
	"ec2:DeleteNetworkInterface",
	"ec2:DescribeNetworkInterfaces",
	"ec2:DescribeSubnets",
	"ec2:UnassignPrivateIpAddresses",
}

// BatchingWindowSeconds is how long an SQS event source gathers messages
// before it invokes its function with fewer than a full batch.
const BatchingWindowSeconds = 1

// ConsumeQueue makes q the function's event source: batches of up to 10
// messages, each failure reported on its own (ReportBatchItemFailures) so
// that one bad message is retried and, past the queue's receive count,
// moved to its dead-letter queue without blocking the batch.
//
// MaximumConcurrency caps the concurrent invocations the event source makes
// at the function's reserved concurrency (AWS allows 2 to 1,000), so that
// the poller backs off instead of being throttled, which would count
// receives towards the dead-letter queue; unreserved functions get
// DefaultMaximumConcurrency.
func (f *Function) ConsumeQueue(q awssqs.IQueue) {
	maxConcurrency := DefaultMaximumConcurrency
	if f.ReservedConcurrency > 0 {
		maxConcurrency = max(2, f.ReservedConcurrency)
	}
	f.Function.AddEventSource(awslambdaeventsources.NewSqsEventSource(q, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(BatchingWindowSeconds)),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(maxConcurrency),
	}))
	nagSuppress(f.Function, "Serverless-LambdaEventSourceMappingDestination", "an SQS event source has no on-failure destination of its own (those are for stream sources): "+
		"a message that keeps failing moves to the queue's dead-letter queue, whose depth is alarmed")
}

// DefaultMaximumConcurrency caps an unreserved function's SQS event source.
const DefaultMaximumConcurrency = 20
