package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"strings"
)

// APIStageName is the stage of the REST API; clients call
// https://{api-id}.execute-api.{region}.amazonaws.com/{APIStageName}/...
const APIStageName = "prod"

// APIStackProps configures NewAPIStack.
type APIStackProps struct {
	awscdk.StackProps
	// Functions is what the API function shares with every function; its
	// LogRetention applies to the access and execution logs too.
	Functions FunctionBase
	// Code is the function's deployment package: a zip holding `bootstrap`.
	Code awslambda.Code
	// ReservedConcurrency caps the function; 0 leaves it unreserved.
	ReservedConcurrency int
	// Admins are the principals the API treats as administrators
	// (MAESTRO_ADMINS, comma-separated).
	Admins []string
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

// NewAPIStack builds the API Lambda (provided.al2023, in the VPC) and
// a REST API that proxies every request to it. Every method requires IAM
// (SigV4) authorization; the stage writes JSON access logs and is throttled.
func NewAPIStack(scope constructs.Construct, id string, props *APIStackProps) *APIStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	env := map[string]string{}
	if len(props.Admins) > 0 {
		env["MAESTRO_ADMINS"] = strings.Join(props.Admins, ",")
	}
	fn := NewFunction(stack, "Api", &FunctionProps{
		FunctionBase:        props.Functions,
		Description:         "Maestro REST API",
		Code:                props.Code,
		Environment:         env,
		ReservedConcurrency: props.ReservedConcurrency,
		// API Gateway gives up after 29 s.
		Timeout: awscdk.Duration_Seconds(jsii.Number(29)),
	})

	accessLogs := awslogs.NewLogGroup(stack, jsii.String("AccessLogs"), &awslogs.LogGroupProps{
		Retention: props.Functions.LogRetention,
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
			// Execution logs of errors only; request and response bodies
			// (workflow definitions, params) stay out of the logs.
			LoggingLevel:         awsapigateway.MethodLoggingLevel_ERROR,
			DataTraceEnabled:     jsii.Bool(false),
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

	// API Gateway checks the parameters a method declares and the body
	// against a method's model. The proxy methods declare neither: the
	// function validates every body and answers Maestro's error shape with
	// each problem's JSON path, which a gateway model would pre-empt with its
	// own. The validator is on every method so that a method that declares
	// more is checked.
	validator := api.AddRequestValidator(jsii.String("RequestValidator"), &awsapigateway.RequestValidatorOptions{
		ValidateRequestParameters: jsii.Bool(true),
		ValidateRequestBody:       jsii.Bool(true),
	})
	for _, m := range *api.Methods() {
		m.Node().DefaultChild().(awscdk.CfnResource).AddPropertyOverride(jsii.String("RequestValidatorId"), validator.RequestValidatorId())
	}
	if props.CloudWatchRole {
		nagSuppress(api, "AwsSolutions-IAM4", "the account-wide role API Gateway writes execution and access logs with; AmazonAPIGatewayPushToCloudWatchLogs is the policy AWS documents for it",
			`/^Policy::arn:<AWS::Partition>:iam::aws:policy\/service-role\/AmazonAPIGatewayPushToCloudWatchLogs$/`)
	}
	nagSuppress(api, "AwsSolutions-APIG3", "no WAF web ACL: every method requires IAM (SigV4) authorization and the stage is throttled; attach an account WAF if the API is exposed beyond IAM principals")
	nagSuppress(api, "AwsSolutions-COG4", "the API authorizes with IAM (SigV4), as Maestro's CLI and AWS clients sign requests; there is no Cognito user pool")
	output(stack, "ApiUrl", api.Url(), "REST API base URL (append api/v3/...)")
	return &APIStack{Stack: stack, Function: fn, RestAPI: api}
}
