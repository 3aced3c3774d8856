package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionProps configures NewFunction.
type FunctionProps struct {
	// Description says what the function does.
	Description string
	// Code is the deployment package: a zip holding `bootstrap`, built for
	// linux/arm64 with -tags lambda.norpc.
	Code awslambda.Code
	// Environment is the function's environment.
	Environment map[string]string
	// Vpc and SecurityGroup place the function in the VPC's private subnets.
	Vpc           awsec2.IVpc
	SecurityGroup awsec2.ISecurityGroup
	// LogRetention applies to the function's log group.
	LogRetention awslogs.RetentionDays
	// Timeout bounds one invocation; 30 s when zero.
	Timeout awscdk.Duration
	// MemoryMiB sizes the function; 512 when zero.
	MemoryMiB int
}

// Function is a Go Lambda function of Maestro (provided.al2023, arm64, in the
// VPC) with its own log group and a role that may write to that log group,
// manage its VPC network interfaces and do nothing else until granted more.
// Every function of the project (api now; signals, timetrigger, publisher
// later) is built with it.
type Function struct {
	constructs.Construct
	// Function is the Lambda function.
	Function awslambda.Function
	// Role is the function's execution role.
	Role awsiam.IRole
	// LogGroup receives the function's logs.
	LogGroup awslogs.ILogGroup
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

	logGroup := awslogs.NewLogGroup(c, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention: props.LogRetention,
	})
	role := awsiam.NewRole(c, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(props.Description),
		ManagedPolicies: &[]awsiam.IManagedPolicy{
			// ENI management for a function in a VPC; no log permissions on *.
			awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("service-role/AWSLambdaVPCAccessExecutionRole")),
		},
	})
	logGroup.GrantWrite(role)

	env := make(map[string]*string, len(props.Environment))
	for k, v := range props.Environment {
		env[k] = jsii.String(v)
	}
	fn := awslambda.NewFunction(c, jsii.String("Function"), &awslambda.FunctionProps{
		Description:    jsii.String(props.Description),
		Runtime:        awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:   awslambda.Architecture_ARM_64(),
		Handler:        jsii.String("bootstrap"),
		Code:           props.Code,
		MemorySize:     jsii.Number(memory),
		Timeout:        timeout,
		Role:           role,
		LogGroup:       logGroup,
		Vpc:            props.Vpc,
		VpcSubnets:     &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
		SecurityGroups: &[]awsec2.ISecurityGroup{props.SecurityGroup},
		Environment:    &env,
	})
	return &Function{Construct: c, Function: fn, Role: role, LogGroup: logGroup}
}
