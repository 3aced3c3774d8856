package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"strconv"
)

// APIStageName is the stage of the REST API; clients call
// https://{api-id}.execute-api.{region}.amazonaws.com/{APIStageName}/...
const APIStageName = "prod"

// APIStackProps configures NewAPIStack.
type APIStackProps struct {
	awscdk.StackProps
	// Vpc is the network; the function runs in its private subnets.
	Vpc awsec2.IVpc
	// SecurityGroup is attached to the function; the data stack lets it reach
	// the database.
	SecurityGroup awsec2.ISecurityGroup
	// DatabaseSecret is passed to the function as DB_SECRET_ARN; the function
	// may read this secret and nothing else.
	DatabaseSecret awssecretsmanager.ISecret
	// GroupCount is the number of flow groups (MAESTRO_GROUP_COUNT); it must
	// equal the engine's.
	GroupCount int
	// Code is the function's deployment package: a zip holding `bootstrap`,
	// built for linux/arm64.
	Code awslambda.Code
	// LogRetention applies to the function's and the access log groups.
	LogRetention awslogs.RetentionDays
	// ThrottlingRateLimit (req/s) and ThrottlingBurstLimit bound the stage.
	ThrottlingRateLimit  float64
	ThrottlingBurstLimit int
	// CloudWatchRole creates the account-wide role API Gateway writes access
	// logs with; leave it off when the account already has one.
	CloudWatchRole bool
}

// APIStack holds the API Lambda and the REST API in front of it.
type APIStack struct {
	awscdk.Stack
	// Function is the API Lambda with its role and log group.
	Function *Function
	// RestAPI is the IAM-authorized REST API proxying every path to Function.
	RestAPI awsapigateway.LambdaRestApi
}

// NewAPIStack builds the API Lambda (provided.al2023, arm64, in the VPC) and
// a REST API that proxies every request to it. Every method requires IAM
// (SigV4) authorization; the stage writes JSON access logs and is throttled.
func NewAPIStack(scope constructs.Construct, id string, props *APIStackProps) *APIStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	fn := NewFunction(stack, "Api", &FunctionProps{
		Description: "Maestro REST API",
		Code:        props.Code,
		Environment: map[string]string{
			"DB_SECRET_ARN":       *props.DatabaseSecret.SecretArn(),
			"MAESTRO_GROUP_COUNT": strconv.Itoa(props.GroupCount),
		},
		Vpc:           props.Vpc,
		SecurityGroup: props.SecurityGroup,
		LogRetention:  props.LogRetention,
		// API Gateway gives up after 29 s.
		Timeout: awscdk.Duration_Seconds(jsii.Number(29)),
	})
	props.DatabaseSecret.GrantRead(fn.Role, nil)

	accessLogs := awslogs.NewLogGroup(stack, jsii.String("AccessLogs"), &awslogs.LogGroupProps{
		Retention: props.LogRetention,
	})
	api := awsapigateway.NewLambdaRestApi(stack, jsii.String("RestApi"), &awsapigateway.LambdaRestApiProps{
		RestApiName:    jsii.String("maestro"),
		Description:    jsii.String("Maestro workflow orchestrator REST API"),
		Handler:        fn.Function,
		Proxy:          jsii.Bool(true),
		EndpointTypes:  &[]awsapigateway.EndpointType{awsapigateway.EndpointType_REGIONAL},
		CloudWatchRole: jsii.Bool(props.CloudWatchRole),
		DefaultMethodOptions: &awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_IAM,
		},
		DeployOptions: &awsapigateway.StageOptions{
			StageName:            jsii.String(APIStageName),
			ThrottlingRateLimit:  jsii.Number(props.ThrottlingRateLimit),
			ThrottlingBurstLimit: jsii.Number(props.ThrottlingBurstLimit),
			MetricsEnabled:       jsii.Bool(true),
			AccessLogDestination: awsapigateway.NewLogGroupLogDestination(accessLogs),
			AccessLogFormat: awsapigateway.AccessLogFormat_JsonWithStandardFields(&awsapigateway.JsonWithStandardFieldProps{
				Caller:         jsii.Bool(true),
				HttpMethod:     jsii.Bool(true),
				Ip:             jsii.Bool(true),
				Protocol:       jsii.Bool(true),
				RequestTime:    jsii.Bool(true),
				ResourcePath:   jsii.Bool(true),
				ResponseLength: jsii.Bool(true),
				Status:         jsii.Bool(true),
				User:           jsii.Bool(true),
			}),
		},
	})

	return &APIStack{Stack: stack, Function: fn, RestAPI: api}
}
