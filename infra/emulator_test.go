package main

import (
	"strings"
	"testing"
)

// ministackTypes are the resource types the pinned ministack (Makefile
// MINISTACK_VERSION) provisions, as read from its CloudFormation
// provisioners: what the emulator target may contain.
var ministackTypes = map[string]bool{
	"AWS::CDK::Metadata": true,
	"AWS::EC2::VPC":      true, "AWS::EC2::Subnet": true, "AWS::EC2::RouteTable": true, "AWS::EC2::Route": true,
	"AWS::EC2::SubnetRouteTableAssociation": true, "AWS::EC2::InternetGateway": true, "AWS::EC2::VPCGatewayAttachment": true,
	"AWS::EC2::SecurityGroup": true, "AWS::EC2::VPCEndpoint": true,
	"AWS::SecretsManager::Secret": true,
	"AWS::SQS::Queue":             true, "AWS::SQS::QueuePolicy": true,
	"AWS::SNS::Topic": true, "AWS::SNS::TopicPolicy": true, "AWS::SNS::Subscription": true,
	"AWS::IAM::Role": true, "AWS::IAM::Policy": true,
	"AWS::Logs::LogGroup":   true,
	"AWS::Lambda::Function": true, "AWS::Lambda::EventSourceMapping": true, "AWS::Lambda::Permission": true,
	// The migrate step: ministack invokes a custom resource's ServiceToken function
	// and waits for its answer on the ResponseURL, as CloudFormation does.
	MigrationResourceType:      true,
	"AWS::Scheduler::Schedule": true,
	"AWS::ApiGateway::RestApi": true, "AWS::ApiGateway::Resource": true, "AWS::ApiGateway::Method": true,
	"AWS::ApiGateway::Deployment": true, "AWS::ApiGateway::Stage": true, "AWS::ApiGateway::Account": true,
	"AWS::ApiGateway::RequestValidator": true,
	"AWS::CloudWatch::Alarm":            true, "AWS::CloudWatch::Dashboard": true,
}

// TestEmulatorTarget checks that `-c maestro:target=emulator` swaps out
// exactly what the emulator cannot host, and nothing else is needed to
// deploy: every resource is of a type ministack provisions.
func TestEmulatorTarget(t *testing.T) {
	f := loadEmulatorFixture(t)
	if e := f.stacks.Engine; e == nil || e.Service != nil || e.Cluster != nil || len(f.engine.ofType("AWS::ECS::Service")) != 0 {
		t.Error("the emulator target deploys the ECS engine; it runs as a local process")
	}
	for _, s := range f.all() {
		tmpl := *s.dst
		for id, r := range tmpl.Resources {
			typ := r["Type"].(string)
			if !ministackTypes[typ] {
				t.Errorf("%s: %s is a %s, which ministack cannot provision", *s.stack.StackName(), id, typ)
			}
			if p := props(r); typ == "AWS::CloudWatch::Alarm" && p["Metrics"] != nil {
				t.Errorf("%s: alarm %s uses metric math, which ministack refuses", *s.stack.StackName(), id)
			}
		}
	}

	t.Run("database secret points at the local postgres", func(t *testing.T) {
		p := props(f.data.Resources[logicalID(t, f.stacks.Data.Stack, "Secret")])
		body := p["SecretString"].(string)
		for _, want := range []string{`"host":"127.0.0.1"`, `"port":"54329"`, `"dbname":"maestro_e2e"`, `"username":"maestro"`, `"password":"secret"`} {
			if !strings.Contains(body, want) {
				t.Errorf("secret %s lacks %s", body, want)
			}
		}
	})

	t.Run("the local engine's environment is the engine stack's output", func(t *testing.T) {
		outputs := f.engine.ToJSON()
		raw := asJSON((*outputs)["Outputs"])
		for _, want := range []string{`"` + EngineEnvironmentOutput + `"`, "DB_SECRET_ARN", "MAESTRO_EVENT_QUEUE_URL",
			"MAESTRO_PUBLIC_URL", "MAESTRO_CLUSTER_NAME", "MAESTRO_GROUP_COUNT", "AWS_REGION"} {
			if !strings.Contains(raw, want) {
				t.Errorf("engine outputs lack %s: %s", want, raw)
			}
		}
	})

	t.Run("functions for the host architecture, without a proxy", func(t *testing.T) {
		for _, tmpl := range []*stackTemplate{f.api, f.events, f.signals, f.triggers} {
			for id, r := range tmpl.ofType("AWS::Lambda::Function") {
				p := props(r)
				if asJSON(p["Architectures"]) != `["x86_64"]` {
					t.Errorf("%s architectures %s", id, asJSON(p["Architectures"]))
				}
				env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
				if env["DB_PROXY_ENDPOINT"] != nil || (env["DB_SECRET_ARN"] == nil) != strings.HasPrefix(id, "Publisher") {
					t.Errorf("%s environment %s", id, asJSON(env))
				}
			}
		}
	})
}
