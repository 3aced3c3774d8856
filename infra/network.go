package main

import (
	"maps"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Subnet group names of the VPC. The database lives in the isolated subnets
// (no route out), everything else in the private ones (egress through NAT).
const (
	subnetPublic   = "public"
	subnetPrivate  = "private"
	subnetIsolated = "data"
)

// VpcCidr is the VPC's address range.
const VpcCidr = "10.40.0.0/16"

// NetworkStackProps configures NewNetworkStack.
type NetworkStackProps struct {
	awscdk.StackProps
	// MaxAzs is the number of availability zones; 2 when zero.
	MaxAzs int
	// NatGateways is the number of NAT gateways; 1 when zero. One per AZ
	// keeps an AZ's loss from taking the other AZ's egress with it.
	NatGateways int
	// Endpoints adds interface endpoints (InterfaceEndpointServices) in the
	// private subnets, so that the engine's and the functions' AWS calls do
	// not go through a NAT gateway.
	Endpoints bool
	// StepTargets adds the Lambda and ECS endpoints when steps call those
	// services (with Endpoints).
	StepTargets StepTargets
	// LogRetention applies to the VPC flow log group.
	LogRetention awslogs.RetentionDays
	// Emulator builds what an emulator can host: no NAT gateway (so no
	// Elastic IP, and the private subnets have no route out), no flow logs,
	// and no custom resource locking down the default security group.
	Emulator bool
}

// NetworkStack holds the VPC and the security groups of the database's
// clients. Every stack that runs code in the VPC takes what it needs from
// here through its Props.
type NetworkStack struct {
	awscdk.Stack
	// Vpc has public, private (egress through NAT) and isolated subnets.
	Vpc awsec2.IVpc
	// EngineSecurityGroup is attached to the engine's Fargate tasks. Its
	// egress is open: step runtimes call AWS APIs and arbitrary HTTP endpoints.
	EngineSecurityGroup awsec2.ISecurityGroup
	// FunctionSecurityGroup is attached to every Lambda function that talks to
	// the database (api, signals, timetrigger; the publisher runs outside the
	// VPC). Its egress is HTTPS to anywhere (AWS APIs through NAT or the
	// interface endpoints) plus whatever the data stack opens towards the
	// database.
	FunctionSecurityGroup awsec2.ISecurityGroup
}

// NewNetworkStack builds the VPC (2 AZs, NatGateways NAT gateways, an S3
// gateway endpoint for image layers, interface endpoints with Endpoints,
// default security group locked down) and the client security groups.
func NewNetworkStack(scope constructs.Construct, id string, props *NetworkStackProps) *NetworkStack {
	if props == nil {
		props = &NetworkStackProps{}
	}
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	maxAzs, nats := props.MaxAzs, props.NatGateways
	if maxAzs == 0 {
		maxAzs = 2
	}
	if nats == 0 {
		nats = 1
	}
	privateType := awsec2.SubnetType_PRIVATE_WITH_EGRESS
	if props.Emulator {
		nats, privateType = 0, awsec2.SubnetType_PRIVATE_ISOLATED
	}

	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		IpAddresses:                  awsec2.IpAddresses_Cidr(jsii.String(VpcCidr)),
		MaxAzs:                       jsii.Number(maxAzs),
		NatGateways:                  jsii.Number(nats),
		RestrictDefaultSecurityGroup: jsii.Bool(!props.Emulator),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String(subnetPublic), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String(subnetPrivate), SubnetType: privateType, CidrMask: jsii.Number(20)},
			{Name: jsii.String(subnetIsolated), SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED, CidrMask: jsii.Number(24)},
		},
		GatewayEndpoints: &map[string]*awsec2.GatewayVpcEndpointOptions{
			"S3": {Service: awsec2.GatewayVpcEndpointAwsService_S3()},
		},
	})

	if !props.Emulator {
		// Rejected connections are what an investigation needs; accepted
		// traffic (engine to database, mostly) would dominate the cost.
		flowLogs := awslogs.NewLogGroup(stack, jsii.String("FlowLogs"), &awslogs.LogGroupProps{Retention: props.LogRetention})
		vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
			Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(flowLogs, nil),
			TrafficType: awsec2.FlowLogTrafficType_REJECT,
		})
	}

	if props.Endpoints {
		addInterfaceEndpoints(stack, vpc, InterfaceEndpointServices(props.StepTargets))
	}

	engineSG := awsec2.NewSecurityGroup(stack, jsii.String("EngineSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Maestro engine tasks"),
		AllowAllOutbound: jsii.Bool(true),
	})

	functionSG := awsec2.NewSecurityGroup(stack, jsii.String("FunctionSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Maestro Lambda functions"),
		AllowAllOutbound: jsii.Bool(false),
	})
	functionSG.AddEgressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(443)),
		jsii.String("HTTPS to AWS APIs"), nil)

	return &NetworkStack{
		Stack:                 stack,
		Vpc:                   vpc,
		EngineSecurityGroup:   engineSG,
		FunctionSecurityGroup: functionSG,
	}
}

// InterfaceEndpointServices are the AWS services called from inside the VPC,
// by endpoint id (the construct id is its title): Secrets Manager (the
// database secret: engine, api, signals, time-trigger, rotation), SQS (the
// engine's internal events), ECR api and dkr (the engine image; its layers
// come through the S3 gateway endpoint), CloudWatch Logs (the tasks' awslogs
// driver), and Lambda and ECS when steps call them. Not needed: SNS (only
// the publisher calls it, outside the VPC), STS (tasks and functions take
// their credentials from ECS and Lambda, not STS) and CloudWatch monitoring
// (metrics are EMF lines in the logs, no PutMetricData).
func InterfaceEndpointServices(t StepTargets) map[string]awsec2.InterfaceVpcEndpointAwsService {
	out := map[string]awsec2.InterfaceVpcEndpointAwsService{
		"SecretsManager": awsec2.InterfaceVpcEndpointAwsService_SECRETS_MANAGER(),
		"Sqs":            awsec2.InterfaceVpcEndpointAwsService_SQS(),
		"EcrApi":         awsec2.InterfaceVpcEndpointAwsService_ECR(),
		"EcrDocker":      awsec2.InterfaceVpcEndpointAwsService_ECR_DOCKER(),
		"Logs":           awsec2.InterfaceVpcEndpointAwsService_CLOUDWATCH_LOGS(),
	}
	if len(t.LambdaFunctions) > 0 {
		out["Lambda"] = awsec2.InterfaceVpcEndpointAwsService_LAMBDA()
	}
	if len(t.EcsClusters) > 0 {
		out["Ecs"] = awsec2.InterfaceVpcEndpointAwsService_ECS()
	}
	return out
}

// addInterfaceEndpoints puts one interface endpoint per service in the
// private subnets (one network interface per AZ), with private DNS so that
// the SDKs' default endpoints resolve to them, behind a security group
// that admits HTTPS from the VPC only.
func addInterfaceEndpoints(stack awscdk.Stack, vpc awsec2.Vpc, services map[string]awsec2.InterfaceVpcEndpointAwsService) {
	sg := awsec2.NewSecurityGroup(stack, jsii.String("EndpointSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Maestro interface endpoints: HTTPS from the VPC"),
		AllowAllOutbound: jsii.Bool(false),
	})
	sg.AddIngressRule(awsec2.Peer_Ipv4(jsii.String(VpcCidr)), awsec2.Port_Tcp(jsii.Number(443)), jsii.String("HTTPS from the VPC"), nil)
	for _, id := range slices.Sorted(maps.Keys(services)) {
		vpc.AddInterfaceEndpoint(jsii.String(id), &awsec2.InterfaceVpcEndpointOptions{
			Service:           services[id],
			Subnets:           &awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetPrivate)},
			SecurityGroups:    &[]awsec2.ISecurityGroup{sg},
			PrivateDnsEnabled: jsii.Bool(true),
			Open:              jsii.Bool(false),
		})
	}
}
