package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
)

func TestEngineStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.engine
	dataStack := *f.stacks.Data.StackName()
	secretAttachment := logicalID(t, f.stacks.Data.Stack, "AppSecret", "Attachment")

	t.Run("resource counts", func(t *testing.T) {
		for typ, n := range map[string]float64{
			"AWS::ECS::Cluster":                           1,
			"AWS::ECS::Service":                           1,
			"AWS::ECS::TaskDefinition":                    1,
			"AWS::Logs::LogGroup":                         1,
			"AWS::ApplicationAutoScaling::ScalableTarget": 1,
			"AWS::ApplicationAutoScaling::ScalingPolicy":  1, // cpu target tracking, the one signal
		} {
			check(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
		}
	})

	t.Run("fargate service", func(t *testing.T) {
		engineSG := logicalID(t, f.stacks.Network.Stack, "EngineSecurityGroup")
		_, p := tmpl.one(t, "AWS::ECS::Service")
		if p["LaunchType"] != "FARGATE" {
			t.Errorf("LaunchType = %v, want FARGATE", p["LaunchType"])
		}
		if p["DesiredCount"] != float64(f.cfg.EngineDesiredCount) || f.cfg.EngineDesiredCount != 2 {
			t.Errorf("DesiredCount = %v, want 2", p["DesiredCount"])
		}
		vpc, _ := p["NetworkConfiguration"].(map[string]any)["AwsvpcConfiguration"].(map[string]any)
		if vpc["AssignPublicIp"] != "DISABLED" {
			t.Errorf("AssignPublicIp = %v, want DISABLED", vpc["AssignPublicIp"])
		}
		sgs, _ := vpc["SecurityGroups"].([]any)
		if len(sgs) != 1 || !importsFrom(sgs[0], *f.stacks.Network.StackName(), engineSG) {
			t.Errorf("SecurityGroups = %s, want the engine group", asJSON(sgs))
		}
		for _, s := range vpc["Subnets"].([]any) {
			if !strings.Contains(asJSON(s), subnetPrivate+"Subnet") {
				t.Errorf("service subnet %s is not private", asJSON(s))
			}
		}
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::ECS::Service"), map[string]any{
				"DeploymentConfiguration": map[string]any{
					"DeploymentCircuitBreaker": map[string]any{"Enable": true, "Rollback": true},
				},
			})
		})
	})

	t.Run("arm64 task running engine", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
				"RequiresCompatibilities": []any{"FARGATE"},
				"RuntimePlatform":         map[string]any{"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
				"Cpu":                     "512",
				"Memory":                  "1024",
				"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
					"Name":    EngineContainerName,
					"Command": []any{"engine"},
					"HealthCheck": map[string]any{
						"Command":     []any{"CMD", "/maestro", "health", "--live"},
						"StartPeriod": 60,
					},
					"Image": map[string]any{
						"Fn::Sub": assertions.Match_StringLikeRegexp(jsii.String("container-assets")),
					},
				})},
			})
		})
	})

	t.Run("environment", func(t *testing.T) {
		queue := logicalID(t, f.stacks.Events.Stack, "InternalEvents", "Queue")
		_, p := tmpl.one(t, "AWS::ECS::TaskDefinition")
		container := p["ContainerDefinitions"].([]any)[0].(map[string]any)
		if s := container["Secrets"]; s != nil {
			t.Errorf("secrets injected at task start: %s; the engine reads DB_SECRET_ARN itself so that rotation needs no restart", asJSON(s))
		}
		env := map[string]any{}
		for _, e := range container["Environment"].([]any) {
			e := e.(map[string]any)
			env[e["Name"].(string)] = e["Value"]
		}
		// The same group count and cluster name as the functions'
		// (api_test.go, events_test.go).
		if env["LOG_FORMAT"] != "json" || env["MAESTRO_GROUP_COUNT"] != "16" || env["MAESTRO_HEALTH_ADDR"] != EngineHealthAddr ||
			!importsFrom(env["DB_SECRET_ARN"], dataStack, secretAttachment) ||
			!importsFrom(env["MAESTRO_EVENT_QUEUE_URL"], *f.stacks.Events.StackName(), queue) ||
			env["MAESTRO_CLUSTER_NAME"] != "maestro" || asJSON(env["AWS_REGION"]) != `{"Ref":"AWS::Region"}` || len(env) != 8 {
			t.Errorf("environment = %s", asJSON(env))
		}
		// Alert links point at the REST API's stage.
		restAPI := logicalID(t, f.stacks.API.Stack, "RestApi")
		if u := asJSON(env["MAESTRO_PUBLIC_URL"]); !strings.Contains(u, `"Fn::ImportValue":"`+*f.stacks.API.StackName()+":") ||
			!strings.Contains(u, restAPI) || !strings.Contains(u, ".execute-api.") || !strings.HasSuffix(u, `"/"]]}`) {
			t.Errorf("MAESTRO_PUBLIC_URL = %s, want the API stage URL", u)
		}
		if f.stacks.Engine.StepTaskSecurityGroup != nil || len(tmpl.ofType("AWS::EC2::SecurityGroup")) != 0 {
			t.Error("a step task security group without step ECS clusters")
		}
	})

	t.Run("autoscaling on cpu", func(t *testing.T) {
		_, target := tmpl.one(t, "AWS::ApplicationAutoScaling::ScalableTarget")
		if target["MinCapacity"] != 2.0 || target["MaxCapacity"] != float64(f.cfg.EngineMaxCount) || target["ScalableDimension"] != "ecs:service:DesiredCount" {
			t.Errorf("scalable target = %s", asJSON(target))
		}
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalingPolicy"), map[string]any{
				"PolicyType": "TargetTrackingScaling",
				"TargetTrackingScalingPolicyConfiguration": assertions.Match_ObjectLike(&map[string]any{
					"PredefinedMetricSpecification": map[string]any{"PredefinedMetricType": "ECSServiceAverageCPUUtilization"},
					"TargetValue":                   60,
				}),
			})
		})
		// Outbox age is alarmed (monitoring), not scaled on.
		if n := len(tmpl.ofType("AWS::CloudWatch::Alarm")); n != 0 {
			t.Errorf("%d alarms in the engine stack; scaling has one signal", n)
		}
	})

	t.Run("container insights", func(t *testing.T) {
		_, p := tmpl.one(t, "AWS::ECS::Cluster")
		if !strings.Contains(asJSON(p["ClusterSettings"]), `"Value":"enabled"`) {
			t.Errorf("ClusterSettings = %s, want containerInsights enabled", asJSON(p["ClusterSettings"]))
		}
	})

	t.Run("logs with retention", func(t *testing.T) {
		logs, _ := tmpl.one(t, "AWS::Logs::LogGroup")
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{
				"RetentionInDays": f.cfg.LogRetentionDays,
			})
		})
		_, p := tmpl.one(t, "AWS::ECS::TaskDefinition")
		lc := p["ContainerDefinitions"].([]any)[0].(map[string]any)["LogConfiguration"].(map[string]any)
		if lc["LogDriver"] != "awslogs" || asJSON(lc["Options"].(map[string]any)["awslogs-group"]) != asJSON(map[string]any{"Ref": logs}) {
			t.Errorf("LogConfiguration = %s, want awslogs to %s", asJSON(lc), logs)
		}
	})

	t.Run("least privilege", func(t *testing.T) {
		taskRole := logicalID(t, f.stacks.Engine.Stack, "TaskRole")
		execRole := logicalID(t, f.stacks.Engine.Stack, "Task", "ExecutionRole")
		for id, r := range tmpl.ofType("AWS::IAM::Role") {
			if ps := props(r)["ManagedPolicyArns"]; ps != nil {
				t.Errorf("role %s has managed policies %s", id, asJSON(ps))
			}
		}
		for _, r := range tmpl.ofType("AWS::IAM::Policy") {
			p := props(r)
			roles := asJSON(p["Roles"])
			if strings.Contains(roles, taskRole) {
				// The task role reads the database secret and sends internal
				// events, nothing else.
				for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := st.(map[string]any)
					actions := asJSON(st["Action"])
					switch {
					case strings.Contains(actions, "secretsmanager:") && importsFrom(st["Resource"], dataStack, secretAttachment):
					case strings.Contains(actions, "sqs:SendMessage") && importsFrom(st["Resource"], *f.stacks.Events.StackName(), "InternalEventsQueue"):
					default:
						t.Errorf("task role may %s on %s", actions, asJSON(st["Resource"]))
					}
				}
			}
			if !strings.Contains(roles, execRole) {
				continue
			}
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				actions := asJSON(st["Action"])
				if st["Resource"] == "*" && actions != `"ecr:GetAuthorizationToken"` {
					t.Errorf("execution role may %s on *", actions)
				}
				if strings.Contains(actions, "secretsmanager:") && !importsFrom(st["Resource"], dataStack, secretAttachment) {
					t.Errorf("execution role reads secrets %s, want only the database secret", asJSON(st["Resource"]))
				}
			}
		}
	})
}

// TestEngineImageContext checks what synth stages as the engine image's
// build context: the Dockerfile and sources, none of ImageExcludes.
func TestEngineImageContext(t *testing.T) {
	f := loadFixture(t)
	dirs, err := filepath.Glob(filepath.Join(f.outdir, "asset.*", "Dockerfile"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("want one staged image context, got %v (%v)", dirs, err)
	}
	root := filepath.Dir(dirs[0])
	var staged []string
	err = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		staged = append(staged, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(staged)
	want := []string{"Dockerfile", "cmd/maestro/x.go", "go.mod"}
	if strings.Join(staged, ",") != strings.Join(want, ",") {
		t.Errorf("staged %v, want %v", staged, want)
	}
}

// TestDockerignoreMatchesImageExcludes keeps the root .dockerignore (used by
// a plain `docker build`) in step with ImageExcludes (used by the CDK).
func TestDockerignoreMatchesImageExcludes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			got = append(got, line)
		}
	}
	want := append([]string(nil), ImageExcludes...)
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf(".dockerignore = %v, ImageExcludes = %v", got, want)
	}
}

// engineEnvStack builds the engine stack of the emulator target (no image
// needed) for the given step targets in an app of its own, and returns its
// template and the resolved environment.
func engineEnvStack(t *testing.T, targets StepTargets, publicURL string) (*stackTemplate, map[string]any) {
	t.Helper()
	app := awscdk.NewApp(nil)
	base := awscdk.NewStack(app, jsii.String("Base"), nil)
	vpc := awsec2.NewVpc(base, jsii.String("Vpc"), &awsec2.VpcProps{MaxAzs: jsii.Number(2),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String(subnetPublic), SubnetType: awsec2.SubnetType_PUBLIC},
			{Name: jsii.String(subnetPrivate), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
		}})
	secret := awssecretsmanager.NewSecret(base, jsii.String("Secret"), nil)
	engine := NewEngineStack(app, "Engine", &EngineStackProps{
		Vpc: vpc, DatabaseSecret: secret, GroupCount: 8, ClusterName: "blue",
		PublicURL: jsii.String(publicURL), StepTargets: targets, Emulator: true,
	})
	tmpl, err := newStackTemplate(engine.Stack)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]any{}
	for k, v := range engine.Environment {
		env[k] = engine.Stack.Resolve(v)
	}
	return tmpl, env
}

// The engine's step runtime settings follow the step targets of the CDK
// context: EcsTask steps default to the first cluster, the deployment's
// private subnets and a security group of their own (egress only), unless
// subnets and security groups are given; Http steps to the allowed hosts.
// On the emulator target the environment is the stack's Environment output.
func TestEngineStepEnvironment(t *testing.T) {
	tmpl, env := engineEnvStack(t, StepTargets{}, "https://maestro.example.com")
	for k := range env {
		if strings.HasPrefix(k, "MAESTRO_ECS_") || k == "MAESTRO_HTTP_ALLOWED_HOSTS" {
			t.Errorf("no step targets, yet %s = %s", k, asJSON(env[k]))
		}
	}
	if env["MAESTRO_PUBLIC_URL"] != "https://maestro.example.com" || env["MAESTRO_CLUSTER_NAME"] != "blue" || env["MAESTRO_GROUP_COUNT"] != "8" {
		t.Errorf("environment %s", asJSON(env))
	}
	if n := len(tmpl.ofType("AWS::ECS::Service")) + len(tmpl.ofType("AWS::ECS::Cluster")); n != 0 {
		t.Errorf("the emulator target's engine stack holds %d ECS resources", n)
	}
	// Only the task role, which the local engine assumes: the account may
	// assume it on the emulator target.
	if roles := tmpl.ofType("AWS::IAM::Role"); len(roles) != 1 {
		t.Errorf("the emulator target's engine stack holds %d roles, want the task role", len(roles))
	} else {
		for _, r := range roles {
			if trust := asJSON(props(r)["AssumeRolePolicyDocument"]); !strings.Contains(trust, "ecs-tasks.amazonaws.com") || !strings.Contains(trust, ":root") {
				t.Errorf("task role trust %s, want ECS tasks and (emulator target) the account", trust)
			}
		}
	}

	tmpl, env = engineEnvStack(t, StepTargets{EcsClusters: []string{"jobs", "gpu"}, EcsTaskDefinitions: []string{"trainer"},
		HTTPAllowedHosts: []string{"api.example.com", "*.internal.example.com"}}, "https://x")
	sg, sgProps := tmpl.one(t, "AWS::EC2::SecurityGroup")
	if asJSON(sgProps["SecurityGroupEgress"]) != `[{"CidrIp":"0.0.0.0/0","Description":"Allow all outbound traffic by default","IpProtocol":"-1"}]` ||
		sgProps["SecurityGroupIngress"] != nil {
		t.Errorf("step task security group %s", asJSON(sgProps))
	}
	subnets := asJSON(env["MAESTRO_ECS_SUBNETS"])
	if env["MAESTRO_ECS_CLUSTER"] != "jobs" || !strings.Contains(subnets, `"Fn::Join":[",",`) || strings.Count(subnets, subnetPrivate+"Subnet") != 2 ||
		asJSON(env["MAESTRO_ECS_SECURITY_GROUPS"]) != asJSON(map[string]any{"Fn::GetAtt": []any{sg, "GroupId"}}) ||
		env["MAESTRO_HTTP_ALLOWED_HOSTS"] != "api.example.com,*.internal.example.com" {
		t.Errorf("environment %s", asJSON(env))
	}
	out := asJSON(tmpl.ToJSON())
	for _, want := range []string{`"` + EngineEnvironmentOutput + `"`, `MAESTRO_ECS_SECURITY_GROUPS`, sg} {
		if !strings.Contains(out, want) {
			t.Errorf("the Environment output lacks %s", want)
		}
	}

	tmpl, env = engineEnvStack(t, StepTargets{EcsClusters: []string{"jobs"}, EcsTaskDefinitions: []string{"trainer"},
		EcsSubnets: []string{"subnet-1", "subnet-2"}, EcsSecurityGroups: []string{"sg-1"}}, "https://x")
	if env["MAESTRO_ECS_SUBNETS"] != "subnet-1,subnet-2" || env["MAESTRO_ECS_SECURITY_GROUPS"] != "sg-1" ||
		len(tmpl.ofType("AWS::EC2::SecurityGroup")) != 0 {
		t.Errorf("given network: environment %s", asJSON(env))
	}
}

// The engine checks a subworkflow step's target with the API's rules
// (issue 27 N1), so it knows the same administrators: MAESTRO_ADMINS as the
// API Lambda has it, and nothing when none are configured.
func TestEngineKnowsTheAdministrators(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Base"), nil)
	secret := awssecretsmanager.NewSecret(stack, jsii.String("Secret"), nil)
	env := EngineEnvironment(&EngineStackProps{DatabaseSecret: secret, GroupCount: 8,
		Admins: []string{"arn:aws:iam::1:role/ops", "alice"}}, nil)
	if v := env["MAESTRO_ADMINS"]; v == nil || *v != "arn:aws:iam::1:role/ops,alice" {
		t.Errorf("MAESTRO_ADMINS = %v, want the API's administrators", v)
	}
	if _, ok := EngineEnvironment(&EngineStackProps{DatabaseSecret: secret, GroupCount: 8}, nil)["MAESTRO_ADMINS"]; ok {
		t.Error("MAESTRO_ADMINS set with no administrators configured")
	}
}
