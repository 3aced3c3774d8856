package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

func TestAPIStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.api
	dataStack := *f.stacks.Data.StackName()
	secretAttachment := logicalID(t, f.stacks.Data.Stack, "AppSecret", "Attachment")

	t.Run("resource counts", func(t *testing.T) {
		for typ, n := range map[string]float64{
			"AWS::Lambda::Function":             1,
			"AWS::ApiGateway::RestApi":          1,
			"AWS::ApiGateway::Stage":            1,
			"AWS::ApiGateway::Method":           2, // ANY on / and on /{proxy+}
			"AWS::ApiGateway::RequestValidator": 0, // the function validates (api.go)
			"AWS::Logs::LogGroup":               2, // function logs, access logs
		} {
			check(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
		}
	})

	t.Run("go lambda on arm64", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"Timeout":       29,
			})
		})
	})

	t.Run("traced: stage and function (docs/tracing.md)", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"TracingConfig": map[string]any{"Mode": "Active"},
			})
			tmpl.HasResourceProperties(jsii.String("AWS::ApiGateway::Stage"), map[string]any{
				"TracingEnabled": true,
			})
		})
	})

	t.Run("lambda in the vpc with the function group", func(t *testing.T) {
		functionSG := logicalID(t, f.stacks.Network.Stack, "FunctionSecurityGroup")
		_, p := tmpl.one(t, "AWS::Lambda::Function")
		vpc, _ := p["VpcConfig"].(map[string]any)
		sgs, _ := vpc["SecurityGroupIds"].([]any)
		if len(sgs) != 1 || !importsFrom(sgs[0], *f.stacks.Network.StackName(), functionSG) {
			t.Errorf("SecurityGroupIds = %s, want the function group", asJSON(sgs))
		}
		subnets, _ := vpc["SubnetIds"].([]any)
		if len(subnets) != 2 {
			t.Errorf("SubnetIds = %s, want 2", asJSON(subnets))
		}
		for _, s := range subnets {
			if !strings.Contains(asJSON(s), subnetPrivate+"Subnet") {
				t.Errorf("function subnet %s is not private", asJSON(s))
			}
		}
	})

	t.Run("DB_SECRET_ARN, the proxy, the group count and the cluster name", func(t *testing.T) {
		proxy := logicalID(t, f.stacks.Data.Stack, "Proxy")
		_, p := tmpl.one(t, "AWS::Lambda::Function")
		vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		// Five with the archive bucket (MAESTRO_ARCHIVE_BUCKET, infra/archive_test.go).
		if len(vars) != 5 || !importsFrom(vars["DB_SECRET_ARN"], dataStack, secretAttachment) ||
			!importsFrom(vars["DB_PROXY_ENDPOINT"], dataStack, proxy) || vars["MAESTRO_GROUP_COUNT"] != "16" ||
			vars["MAESTRO_CLUSTER_NAME"] != "maestro" {
			t.Errorf("environment = %s, want DB_SECRET_ARN of the database secret, DB_PROXY_ENDPOINT, MAESTRO_GROUP_COUNT 16 and MAESTRO_CLUSTER_NAME", asJSON(vars))
		}
	})

	t.Run("reserved concurrency", func(t *testing.T) {
		_, p := tmpl.one(t, "AWS::Lambda::Function")
		if p["ReservedConcurrentExecutions"] != 20.0 {
			t.Errorf("ReservedConcurrentExecutions = %v, want 20", p["ReservedConcurrentExecutions"])
		}
	})

	t.Run("execution logs", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::ApiGateway::Stage"), map[string]any{
				"MethodSettings": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"LoggingLevel": "ERROR", "DataTraceEnabled": false,
				})}),
			})
		})
	})

	t.Run("IAM auth on every method", func(t *testing.T) {
		check(t, func() {
			tmpl.AllResourcesProperties(jsii.String("AWS::ApiGateway::Method"), map[string]any{
				"AuthorizationType": "AWS_IAM",
			})
		})
		for id, r := range tmpl.ofType("AWS::ApiGateway::Method") {
			if got := props(r)["AuthorizationType"]; got != "AWS_IAM" {
				t.Errorf("method %s AuthorizationType = %v", id, got)
			}
		}
	})

	t.Run("stage throttling and access logs", func(t *testing.T) {
		accessLogs := logicalID(t, f.stacks.API.Stack, "AccessLogs")
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::ApiGateway::Stage"), map[string]any{
				"StageName": APIStageName,
				"AccessLogSetting": map[string]any{
					"DestinationArn": map[string]any{"Fn::GetAtt": []any{accessLogs, "Arn"}},
					"Format":         assertions.Match_StringLikeRegexp(jsii.String(`"requestId":"\$context\.requestId"`)),
				},
				"MethodSettings": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"HttpMethod":           "*",
					"ResourcePath":         "/*",
					"ThrottlingRateLimit":  f.cfg.APIThrottlingRateLimit,
					"ThrottlingBurstLimit": f.cfg.APIThrottlingBurstLimit,
				})}),
			})
		})
	})

	t.Run("log retention", func(t *testing.T) {
		check(t, func() {
			tmpl.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{
				"RetentionInDays": f.cfg.LogRetentionDays,
			})
		})
		fnLogs := logicalID(t, f.stacks.API.Stack, "Api", "Logs")
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"LoggingConfig": map[string]any{"LogGroup": map[string]any{"Ref": fnLogs}},
			})
		})
	})

	t.Run("least privilege", func(t *testing.T) {
		fnRole := logicalID(t, f.stacks.API.Stack, "Api", "Role")
		fnLogs := logicalID(t, f.stacks.API.Stack, "Api", "Logs")
		// No managed policy: AWSLambdaVPCAccessExecutionRole granted logs on
		// *; its network interface actions are an inline statement.
		if managed := props(tmpl.Resources[fnRole])["ManagedPolicyArns"]; managed != nil {
			t.Errorf("function role managed policies = %s, want none", asJSON(managed))
		}
		var granted []string
		for id, r := range tmpl.ofType("AWS::IAM::Policy") {
			p := props(r)
			if !strings.Contains(asJSON(p["Roles"]), fnRole) {
				continue
			}
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				res := st["Resource"]
				switch {
				case res == "*" && asJSON(st["Action"]) == asJSON(VpcNetworkInterfaceActions):
					granted = append(granted, "eni")
				case res == "*" && asJSON(st["Action"]) == `["xray:PutTelemetryRecords","xray:PutTraceSegments"]`:
					// Active tracing; X-Ray has no resource-level permissions.
				case res == "*":
					t.Errorf("policy %s grants %s on *", id, asJSON(st["Action"]))
				case importsFrom(res, dataStack, secretAttachment):
					granted = append(granted, "secret:"+asJSON(st["Action"]))
				case asJSON(st["Action"]) == `"s3:GetObject"` && strings.Contains(asJSON(res), "Archive:") && strings.Contains(asJSON(res), "/runs/*"):
					// Archived runs (infra/archive_test.go checks the grant).
				case asJSON(res) == asJSON(map[string]any{"Fn::GetAtt": []any{fnLogs, "Arn"}}):
					granted = append(granted, "logs:"+asJSON(st["Action"]))
				default:
					t.Errorf("policy %s grants %s on unexpected %s", id, asJSON(st["Action"]), asJSON(res))
				}
			}
		}
		if got := strings.Join(granted, " "); !strings.Contains(got, "secretsmanager:GetSecretValue") ||
			!strings.Contains(got, "logs:PutLogEvents") {
			t.Errorf("function grants = %s, want secret read and log writes", got)
		}
	})
}

// TestAPIStackAdmins builds the API stack alone with admins from context
// and no reserved concurrency.
func TestAPIStackAdmins(t *testing.T) {
	f := loadFixture(t) // the shared App first: jsii is single-threaded anyway
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	code, err := dummyLambdaCode(filepath.Join(t.TempDir(), "api"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	network := NewNetworkStack(app, "Net", &NetworkStackProps{Emulator: true})
	api := NewAPIStack(app, "Api", &APIStackProps{
		Functions: FunctionBase{Vpc: network.Vpc, SecurityGroup: network.FunctionSecurityGroup,
			GroupCount: 16, LogRetention: awslogs.RetentionDays_ONE_DAY},
		Code:                 code,
		Admins:               []string{"arn:aws:iam::1:role/ops", "arn:aws:iam::1:user/alice"},
		ThrottlingRateLimit:  cfg.APIThrottlingRateLimit,
		ThrottlingBurstLimit: cfg.APIThrottlingBurstLimit,
	})
	tmpl, err := newStackTemplate(api.Stack)
	if err != nil {
		t.Fatal(err)
	}
	_, p := tmpl.one(t, "AWS::Lambda::Function")
	vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars["MAESTRO_ADMINS"] != "arn:aws:iam::1:role/ops,arn:aws:iam::1:user/alice" || vars["MAESTRO_GROUP_COUNT"] != "16" {
		t.Errorf("environment = %s", asJSON(vars))
	}
	if p["ReservedConcurrentExecutions"] != nil {
		t.Errorf("reserved concurrency %v, want none", p["ReservedConcurrentExecutions"])
	}
}
