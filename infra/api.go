package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// APIStageName is the stage of the REST API; clients call
// https://{api-id}.execute-api.{region}.amazonaws.com/{APIStageName}/...
const APIStageName = "prod"

// apiName defaults the REST API's name.
func apiName(name string) string {
	if name == "" {
		return "maestro"
	}
	return name
}

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
	// Name is the REST API's name ("maestro", with the stage appended).
	Name string
	// Iceberg is the catalog the API's signal broker reads (table changes
	// posted to it, incremental runs it starts).
	Iceberg IcebergAccess
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
	for k, v := range props.Iceberg.Environment() {
		env[k] = v
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
	props.Iceberg.Grant(stack, fn.Role)

	accessLogs := awslogs.NewLogGroup(stack, jsii.String("AccessLogs"), &awslogs.LogGroupProps{
		Retention: props.Functions.LogRetention,
	})
	api := awsapigateway.NewLambdaRestApi(stack, jsii.String("RestApi"), &awsapigateway.LambdaRestApiProps{
		RestApiName:    jsii.String(apiName(props.Name)),
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
			// X-Ray: the stage starts the trace the API Lambda continues.
			TracingEnabled: jsii.Bool(true),
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

	// No request validator: the proxy methods declare no parameters or
	// models, so one would check nothing. Bodies are validated by the
	// function, which answers Maestro's error shape with each problem's
	// JSON path (a gateway model would pre-empt that with its own message);
	// API Gateway still caps a request at 10 MB and every method needs IAM.
	nagSuppress(api, "AwsSolutions-APIG2", "the function validates every request body and answers Maestro's error shape; the proxy methods declare no model a gateway validator could check")
	if props.CloudWatchRole {
		nagSuppress(api, "AwsSolutions-IAM4", "the account-wide role API Gateway writes execution and access logs with; AmazonAPIGatewayPushToCloudWatchLogs is the policy AWS documents for it",
			`/^Policy::arn:<AWS::Partition>:iam::aws:policy\/service-role\/AmazonAPIGatewayPushToCloudWatchLogs$/`)
	}
	nagSuppress(api, "AwsSolutions-APIG3", "no WAF web ACL: every method requires IAM (SigV4) authorization and the stage is throttled; attach an account WAF if the API is exposed beyond IAM principals")
	nagSuppress(api, "AwsSolutions-COG4", "the API authorizes with IAM (SigV4), as Maestro's CLI and AWS clients sign requests; there is no Cognito user pool")
	output(stack, "ApiUrl", api.Url(), "REST API base URL (append api/v3/...)")
	return &APIStack{Stack: stack, Function: fn, RestAPI: api}
}
