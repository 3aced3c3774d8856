package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// ec2Description is what EC2 accepts in a security group's description and
// in a rule's (a-zA-Z0-9. _-:/()#,@[]+=&;{}!$*, up to 255 characters).
var ec2Description = regexp.MustCompile(`^[a-zA-Z0-9. _\-:/()#,@\[\]+=&;{}!$*]{0,255}$`)

// TestAllContextVariant synthesizes the app with every context value set as
// the command line passes it (allContext) and checks what only this variant
// builds: the step tasks' security group (whose description once held an
// apostrophe EC2 refuses), the reader, the endpoints, the e-mail
// subscription, the stage's names. cdk-nag runs over it (TestCdkNag) and so
// does cfn-lint (TestCfnLint).
func TestAllContextVariant(t *testing.T) {
	f := loadAllContextFixture(t)

	t.Run("security group descriptions EC2 accepts", func(t *testing.T) {
		n := 0
		for _, ref := range f.all() {
			for id, r := range (*ref.dst).Resources {
				p := props(r)
				var texts []any
				switch r["Type"] {
				case "AWS::EC2::SecurityGroup":
					texts = append(texts, p["GroupDescription"])
					for _, key := range []string{"SecurityGroupIngress", "SecurityGroupEgress"} {
						rules, _ := p[key].([]any)
						for _, rule := range rules {
							texts = append(texts, rule.(map[string]any)["Description"])
						}
					}
				case "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress":
					texts = append(texts, p["Description"])
				default:
					continue
				}
				for _, text := range texts {
					if text == nil {
						continue
					}
					n++
					if str, ok := text.(string); !ok || !ec2Description.MatchString(str) {
						t.Errorf("%s %s: description %s has characters EC2 refuses", *ref.stack.StackName(), id, asJSON(text))
					}
				}
			}
		}
		if f.stacks.Engine.StepTaskSecurityGroup == nil || n < 5 {
			t.Errorf("checked %d descriptions; the step tasks' security group is %v", n, f.stacks.Engine.StepTaskSecurityGroup)
		}
	})

	t.Run("every value reached the templates", func(t *testing.T) {
		if got := *f.stacks.Network.StackName(); got != "Maestro-qa-Network" {
			t.Errorf("network stack %s, want Maestro-qa-Network", got)
		}
		if n := len(f.data.ofType("AWS::RDS::DBInstance")); n != 2 {
			t.Errorf("%d database instances, want the writer and one reader", n)
		}
		if n := len(f.network.ofType("AWS::EC2::NatGateway")); n != 1 {
			t.Errorf("%d NAT gateways, want 1", n)
		}
		var endpoints []string
		for _, r := range f.network.ofType("AWS::EC2::VPCEndpoint") {
			endpoints = append(endpoints, asJSON(props(r)["ServiceName"]))
		}
		for _, svc := range []string{"secretsmanager", "sqs", "ecr.api", "ecr.dkr", "logs", "lambda", "ecs", "s3"} {
			if !slices.ContainsFunc(endpoints, func(e string) bool { return strings.Contains(e, "."+svc+`"`) }) {
				t.Errorf("no %s endpoint among %v", svc, endpoints)
			}
		}
		check(t, func() {
			f.events.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{
				"Protocol": "email", "Endpoint": "oncall@example.com",
			})
		})
		check(t, func() {
			f.api.HasResourceProperties(jsii.String("AWS::ApiGateway::RestApi"), map[string]any{"Name": "maestro-qa"})
		})
		if n := len(f.api.ofType("AWS::ApiGateway::Account")); n != 0 {
			t.Errorf("apiCloudWatchRole false, yet %d AWS::ApiGateway::Account", n)
		}
		check(t, func() {
			f.engine.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalableTarget"), map[string]any{
				"MinCapacity": 3, "MaxCapacity": 8,
			})
		})
	})
}

// TestEngineScalingConverges holds that no two scaling policies act on the
// same scalable target in opposite directions: a target-tracking policy
// acts in both (its own alarms scale out and in), a step policy in the
// directions of its adjustments' signs.
func TestEngineScalingConverges(t *testing.T) {
	for name, f := range map[string]*fixture{"default": loadFixture(t), "all context": loadAllContextFixture(t)} {
		t.Run(name, func(t *testing.T) {
			tmpl := f.engine
			targets := tmpl.ofType("AWS::ApplicationAutoScaling::ScalableTarget")
			if len(targets) != 1 {
				t.Fatalf("%d scalable targets, want the engine service's", len(targets))
			}
			directions := map[string]map[string][]string{} // target -> direction -> policies
			for id, r := range tmpl.ofType("AWS::ApplicationAutoScaling::ScalingPolicy") {
				p := props(r)
				target := asJSON(p["ScalingTargetId"])
				if directions[target] == nil {
					directions[target] = map[string][]string{}
				}
				switch p["PolicyType"] {
				case "TargetTrackingScaling":
					directions[target]["out"] = append(directions[target]["out"], id)
					if c, _ := p["TargetTrackingScalingPolicyConfiguration"].(map[string]any); c["DisableScaleIn"] != true {
						directions[target]["in"] = append(directions[target]["in"], id)
					}
				case "StepScaling":
					c := p["StepScalingPolicyConfiguration"].(map[string]any)
					for _, step := range c["StepAdjustments"].([]any) {
						switch adj := step.(map[string]any)["ScalingAdjustment"].(float64); {
						case adj > 0:
							directions[target]["out"] = append(directions[target]["out"], id)
						case adj < 0:
							directions[target]["in"] = append(directions[target]["in"], id)
						}
					}
				default:
					t.Errorf("policy %s of type %v", id, p["PolicyType"])
				}
			}
			for target, dirs := range directions {
				for _, out := range dirs["out"] {
					for _, in := range dirs["in"] {
						if out != in {
							t.Errorf("target %s: %s scales out and %s scales in; one can undo the other", target, out, in)
						}
					}
				}
			}
			// The one signal is CPU (docs/scaling.md).
			check(t, func() {
				tmpl.ResourceCountIs(jsii.String("AWS::ApplicationAutoScaling::ScalingPolicy"), jsii.Number(1))
			})
			check(t, func() {
				tmpl.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalingPolicy"), map[string]any{
					"PolicyType": "TargetTrackingScaling",
					"TargetTrackingScalingPolicyConfiguration": assertions.Match_ObjectLike(&map[string]any{
						"PredefinedMetricSpecification": map[string]any{"PredefinedMetricType": "ECSServiceAverageCPUUtilization"},
						"TargetValue":                   EngineCPUTargetPercent,
					}),
				})
			})
		})
	}
}

// TestFailurePaths checks that every asynchronous or queue-driven path ends
// in a dead-letter queue whose depth is alarmed: the source queues' redrive
// policies, the SNS subscriptions' redrive policies, the schedule's
// dead-letter queue, the time-trigger function's on-failure destination
// (Scheduler invokes it asynchronously), and a bounded retry for it.
func TestFailurePaths(t *testing.T) {
	f := loadFixture(t)
	alarmed := map[string]bool{} // "stack:logical id" of queues with a depth alarm
	for _, r := range f.monitoring.ofType("AWS::CloudWatch::Alarm") {
		p := props(r)
		if p["MetricName"] != "ApproximateNumberOfMessagesVisible" {
			continue
		}
		v, _ := p["Dimensions"].([]any)[0].(map[string]any)["Value"].(map[string]any)["Fn::ImportValue"].(string)
		alarmed[v] = true
	}
	isAlarmed := func(stack, id string) bool {
		for v := range alarmed {
			if strings.HasPrefix(v, stack+":") && strings.Contains(v, id) {
				return true
			}
		}
		return false
	}

	for _, s := range f.all() {
		tmpl, stack := *s.dst, *s.stack.StackName()
		for id, r := range tmpl.ofType("AWS::SQS::Queue") {
			p := props(r)
			if rp, ok := p["RedrivePolicy"].(map[string]any); ok {
				dlq := asJSON(rp["deadLetterTargetArn"])
				if !strings.Contains(dlq, "DeadLetterQueue") {
					t.Errorf("%s %s: redrive to %s", stack, id, dlq)
				}
				continue
			}
			// No redrive policy: it must be a dead-letter queue, alarmed.
			if !isAlarmed(stack, id) {
				t.Errorf("%s %s: neither redriven nor an alarmed dead-letter queue", stack, id)
			}
		}
		for id, r := range tmpl.ofType("AWS::SNS::Subscription") {
			p := props(r)
			if p["Protocol"] == "sqs" && p["RedrivePolicy"] == nil {
				t.Errorf("%s %s: an SQS subscription without a redrive policy", stack, id)
			}
		}
		for id, r := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
			p := props(r)
			sc, _ := p["ScalingConfig"].(map[string]any)
			if mc, _ := sc["MaximumConcurrency"].(float64); mc < 2 {
				t.Errorf("%s %s: MaximumConcurrency %v", stack, id, sc["MaximumConcurrency"])
			}
		}
	}

	t.Run("time-trigger async invocations", func(t *testing.T) {
		dlq := logicalID(t, f.stacks.Triggers.Stack, "ScheduleDeadLetterQueue")
		fn := logicalID(t, f.stacks.Triggers.Stack, "TimeTrigger", "Function")
		_, p := f.triggers.one(t, "AWS::Lambda::EventInvokeConfig")
		if asJSON(p["FunctionName"]) != asJSON(map[string]any{"Ref": fn}) || p["Qualifier"] != "$LATEST" ||
			p["MaximumRetryAttempts"] != float64(TimeTriggerRetryAttempts) || p["MaximumEventAgeInSeconds"] != float64(TimeTriggerMaxEventAgeSeconds) ||
			asJSON(p["DestinationConfig"]) != asJSON(map[string]any{"OnFailure": map[string]any{
				"Destination": map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}}}) {
			t.Errorf("EventInvokeConfig = %s", asJSON(p))
		}
		if !isAlarmed(*f.stacks.Triggers.StackName(), "ScheduleDeadLetterQueue") {
			t.Error("the time-trigger dead-letter queue has no depth alarm")
		}
		// The function may send its failures there.
		role := logicalID(t, f.stacks.Triggers.Stack, "TimeTrigger", "Role")
		found := false
		for _, r := range f.triggers.ofType("AWS::IAM::Policy") {
			p := props(r)
			if strings.Contains(asJSON(p["Roles"]), role) && strings.Contains(asJSON(p["PolicyDocument"]), "sqs:SendMessage") &&
				strings.Contains(asJSON(p["PolicyDocument"]), dlq) {
				found = true
			}
		}
		if !found {
			t.Error("the time-trigger role may not send to its dead-letter queue")
		}
	})
}

// TestFunctionRoles: no function role holds a managed policy (the VPC
// access one granted logs on *); a function in the VPC may manage its
// network interfaces, and every function writes only to its own log group.
// The publisher runs outside the VPC.
func TestFunctionRoles(t *testing.T) {
	f := loadFixture(t)
	for _, name := range []string{FunctionAPI, FunctionSignals, FunctionTimeTrigger, FunctionPublisher} {
		var fn *Function
		switch name {
		case FunctionAPI:
			fn = f.stacks.API.Function
		case FunctionSignals:
			fn = f.stacks.Signals.Function
		case FunctionTimeTrigger:
			fn = f.stacks.Triggers.Function
		case FunctionPublisher:
			fn = f.stacks.Events.Publisher
		}
		stack := awscdk.Stack_Of(fn.Function)
		tmpl, err := newStackTemplate(stack)
		if err != nil {
			t.Fatal(err)
		}
		role := *stack.GetLogicalId(fn.Role.Node().DefaultChild().(awscdk.CfnElement))
		logs := *stack.GetLogicalId(fn.LogGroup.Node().DefaultChild().(awscdk.CfnElement))
		fnID := *stack.GetLogicalId(fn.Function.Node().DefaultChild().(awscdk.CfnElement))
		if mp := props(tmpl.Resources[role])["ManagedPolicyArns"]; mp != nil {
			t.Errorf("%s role has managed policies %s", name, asJSON(mp))
		}
		inVPC := props(tmpl.Resources[fnID])["VpcConfig"] != nil
		if inVPC == (name == FunctionPublisher) {
			t.Errorf("%s in the VPC: %v", name, inVPC)
		}
		var eni bool
		for _, r := range tmpl.ofType("AWS::IAM::Policy") {
			p := props(r)
			if !strings.Contains(asJSON(p["Roles"]), role) {
				continue
			}
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				actions := asJSON(st["Action"])
				if strings.Contains(actions, "logs:") && !strings.Contains(asJSON(st["Resource"]), logs) {
					t.Errorf("%s may %s on %s, want only its own log group", name, actions, asJSON(st["Resource"]))
				}
				if strings.Contains(actions, "ec2:") {
					eni = true
					if st["Resource"] != "*" || actions != asJSON(VpcNetworkInterfaceActions) {
						t.Errorf("%s: ec2 statement %s", name, asJSON(st))
					}
				}
			}
		}
		if eni != inVPC {
			t.Errorf("%s: network interface permissions %v, in the VPC %v", name, eni, inVPC)
		}
	}
}

// TestNetworkDefaults: one NAT gateway per AZ and no interface endpoints
// unless maestro:vpcEndpoints (TestAllContextVariant has them).
func TestNetworkDefaults(t *testing.T) {
	f := loadFixture(t)
	if n := len(f.network.ofType("AWS::EC2::NatGateway")); n != 2 {
		t.Errorf("%d NAT gateways, want one per AZ", n)
	}
	for id, r := range f.network.ofType("AWS::EC2::VPCEndpoint") {
		if props(r)["VpcEndpointType"] == "Interface" {
			t.Errorf("interface endpoint %s without maestro:vpcEndpoints", id)
		}
	}
}

// TestInternalFunctionLogsExpire: every Lambda function of the app, the
// CDK's custom resource providers included, logs to a log group of the app
// that expires.
func TestInternalFunctionLogsExpire(t *testing.T) {
	f := loadFixture(t)
	n := 0
	for _, s := range f.all() {
		tmpl := *s.dst
		for id, r := range tmpl.ofType("AWS::Lambda::Function") {
			n++
			ref, _ := props(r)["LoggingConfig"].(map[string]any)["LogGroup"].(map[string]any)["Ref"].(string)
			group, ok := tmpl.Resources[ref]
			if !ok || group["Type"] != "AWS::Logs::LogGroup" || props(group)["RetentionInDays"] != float64(f.cfg.LogRetentionDays) {
				t.Errorf("%s %s logs to %s, want a log group of the stack with retention", *s.stack.StackName(), id, asJSON(props(r)["LoggingConfig"]))
			}
		}
	}
	if n != 7 { // six functions (migrate and the archiver among them) and the default security group's custom resource
		t.Errorf("%d functions checked, want 7", n)
	}
}

// physicalNames lists the names a template sets itself, the properties
// CloudFormation uses as a resource's name when they are literals, as
// "type key=value" with the resource's logical id.
func physicalNames(tmpl *stackTemplate) map[string]string {
	keys := []string{"Name", "RestApiName", "DashboardName", "AlarmName", "QueueName", "TopicName", "LogGroupName",
		"FunctionName", "ClusterName", "RoleName", "DBProxyName", "DBClusterIdentifier", "ServiceName", "Family", "GroupName"}
	out := map[string]string{}
	for id, r := range tmpl.Resources {
		p := props(r)
		for _, k := range keys {
			if v, ok := p[k].(string); ok && v != "" {
				out[fmt.Sprintf("%s %s=%s", r["Type"], k, v)] = id
			}
		}
	}
	return out
}

// TestStagesSideBySide builds stages "dev" and "prod" into one App, as two
// deployments in one account, and checks that their stack names and every
// name the templates set are disjoint; and that without a stage the names
// are today's, so that existing deployments and `make e2e` keep theirs.
func TestStagesSideBySide(t *testing.T) {
	ctx, err := cdkJSONContext()
	if err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(filepath.Join(testRoot, "stages", "cdk.out"))})
	imageDir, err := dummyImageContext(filepath.Join(testRoot, "stages", "image"))
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]*fixture{}
	for _, stage := range []string{"dev", "prod"} {
		// An asset belongs to one stack: each stage gets its own.
		assets := Assets{Functions: map[string]awslambda.Code{}, EngineImage: EngineImageFromDir(imageDir)}
		for _, fn := range AllFunctions {
			if assets.Functions[fn], err = dummyLambdaCode(filepath.Join(testRoot, "stages", "lambda", fn)); err != nil {
				t.Fatal(err)
			}
		}
		cfg := DefaultConfig()
		cfg.Stage = stage
		stacks, err := NewMaestro(app, cfg, assets)
		if err != nil {
			t.Fatalf("stage %s: %v", stage, err)
		}
		built[stage] = &fixture{stacks: stacks}
	}
	app.Synth(nil)
	names := map[string]map[string]string{} // stage -> "type key=value" -> logical id
	for stage, f := range built {
		names[stage] = map[string]string{}
		for _, s := range f.all() {
			stackName := *s.stack.StackName()
			names[stage]["stack="+stackName] = stackName
			if !strings.HasPrefix(stackName, "Maestro-"+stage+"-") {
				t.Errorf("stack %s lacks the stage", stackName)
			}
			tmpl, err := newStackTemplate(s.stack)
			if err != nil {
				t.Fatal(err)
			}
			for name, id := range physicalNames(tmpl) {
				names[stage][name] = id
			}
		}
	}
	for k := range names["dev"] {
		if _, clash := names["prod"][k]; clash {
			t.Errorf("dev and prod both set %s", k)
		}
	}
	if len(names["dev"]) < 9 {
		t.Errorf("only %d names checked: %v", len(names["dev"]), slices.Sorted(maps.Keys(names["dev"])))
	}

	// Metrics too: each stage's processes write to, and its alarms read,
	// a namespace of its own, so dev's alarms never read prod's metrics.
	for stage, f := range built {
		want := metrics.NamespaceOf(stage)
		alarms := 0
		for _, s := range f.all() {
			tmpl, err := newStackTemplate(s.stack)
			if err != nil {
				t.Fatal(err)
			}
			for id, r := range tmpl.ofType("AWS::CloudWatch::Alarm") {
				if ns, ok := props(r)["Namespace"].(string); ok && strings.HasPrefix(ns, metrics.Namespace) {
					alarms++
					if ns != want {
						t.Errorf("stage %s: alarm %s reads namespace %s, want %s", stage, id, ns, want)
					}
				}
			}
			for id, r := range tmpl.ofType("AWS::Lambda::Function") {
				if props(r)["Handler"] != "bootstrap" {
					continue
				}
				vars, _ := props(r)["Environment"].(map[string]any)["Variables"].(map[string]any)
				if vars[metrics.NamespaceEnv] != want {
					t.Errorf("stage %s: function %s writes metrics to %v, want %s", stage, id, vars[metrics.NamespaceEnv], want)
				}
			}
		}
		if env := f.stacks.Engine.Environment[metrics.NamespaceEnv]; env == nil || *env != want {
			t.Errorf("stage %s: the engine writes metrics to %v, want %s", stage, env, want)
		}
		if alarms < 5 {
			t.Errorf("stage %s: only %d alarms on Maestro metrics", stage, alarms)
		}
	}

	t.Run("no stage keeps today's names", func(t *testing.T) {
		f := loadFixture(t)
		for _, s := range f.all() {
			if n := *s.stack.StackName(); !regexp.MustCompile(`^Maestro[A-Z][a-z]+$`).MatchString(n) {
				t.Errorf("stack %s", n)
			}
		}
		check(t, func() {
			f.api.HasResourceProperties(jsii.String("AWS::ApiGateway::RestApi"), map[string]any{"Name": "maestro"})
		})
	})
}

// TestTraceExport: with maestro:otlpEndpoint set to X-Ray's OTLP endpoint,
// the engine task and every function get the OTEL_* environment (service
// names with the stage) and the engine task role may call
// xray:PutTraceSegments, the action that endpoint authorizes (functions
// have it from active tracing); without it, neither the environment nor
// the grant exists.
func TestTraceExport(t *testing.T) {
	const endpoint = "https://xray.us-east-1.amazonaws.com/v1/traces"
	taskRoleGrants := func(f *fixture) bool {
		role := *f.engine.stack.GetLogicalId(f.stacks.Engine.TaskRole.Node().DefaultChild().(awscdk.CfnElement))
		for _, r := range f.engine.ofType("AWS::IAM::Policy") {
			p := props(r)
			if !strings.Contains(asJSON(p["Roles"]), role) {
				continue
			}
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if asJSON(st["Action"]) == `"xray:PutTraceSegments"` && st["Resource"] == "*" && st["Effect"] == "Allow" {
					return true
				}
			}
		}
		return false
	}
	functionEnv := func(f *fixture) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, tmpl := range []*stackTemplate{f.api, f.events, f.signals, f.triggers} {
			for id, r := range tmpl.ofType("AWS::Lambda::Function") {
				if props(r)["Handler"] != "bootstrap" {
					continue
				}
				env, _ := props(r)["Environment"].(map[string]any)
				vars, _ := env["Variables"].(map[string]any)
				out[id] = vars
			}
		}
		return out
	}

	on := loadAllContextFixture(t)
	if env := on.stacks.Engine.Environment; env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == nil ||
		*env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != endpoint || *env["OTEL_SERVICE_NAME"] != "maestro-engine-qa" {
		t.Errorf("engine environment %s, want the endpoint and service maestro-engine-qa", asJSON(env))
	}
	if !taskRoleGrants(on) {
		t.Error("the engine task role may not call xray:PutTraceSegments")
	}
	services := map[string]bool{}
	fns := functionEnv(on)
	for id, vars := range fns {
		if vars["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != endpoint {
			t.Errorf("function %s environment %s, want the OTLP endpoint", id, asJSON(vars))
		}
		services[asJSON(vars["OTEL_SERVICE_NAME"])] = true
	}
	for _, want := range []string{"maestro-api-qa", "maestro-publisher-qa", "maestro-signals-qa", "maestro-timetrigger-qa"} {
		if !services[`"`+want+`"`] {
			t.Errorf("no function exports as %s (services %v)", want, services)
		}
	}

	off := loadFixture(t)
	if _, ok := off.stacks.Engine.Environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]; ok || taskRoleGrants(off) {
		t.Errorf("no endpoint set, yet the engine exports (environment %s) or may call X-Ray (%v)", asJSON(off.stacks.Engine.Environment), taskRoleGrants(off))
	}
	for id, vars := range functionEnv(off) {
		if _, ok := vars["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]; ok {
			t.Errorf("no endpoint set, yet function %s exports", id)
		}
	}
	if len(fns) < 4 {
		t.Errorf("%d functions checked, want the four", len(fns))
	}
}
