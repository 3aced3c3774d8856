package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// policyGrants lists "action@resource" of every statement of the policies
// attached to role in tmpl.
func policyGrants(tmpl *stackTemplate, role string) []string {
	var out []string
	for _, r := range tmpl.ofType("AWS::IAM::Policy") {
		p := props(r)
		if !strings.Contains(asJSON(p["Roles"]), role) {
			continue
		}
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			out = append(out, asJSON(st["Action"])+"@"+asJSON(st["Resource"]))
		}
	}
	return out
}

// functionEnv is the environment of the function at path in stack.
func functionEnv(t *testing.T, tmpl *stackTemplate, path ...string) map[string]any {
	t.Helper()
	id := logicalID(t, tmpl.stack, path...)
	return props(tmpl.Resources[id])["Environment"].(map[string]any)["Variables"].(map[string]any)
}

// checkFunctionBase checks what every function gets from FunctionBase.
func checkFunctionBase(t *testing.T, f *fixture, tmpl *stackTemplate, fn string, reserved int) {
	t.Helper()
	env := functionEnv(t, tmpl, fn, "Function")
	secret := logicalID(t, f.stacks.Data.Stack, "AppSecret", "Attachment")
	if !importsFrom(env["DB_SECRET_ARN"], *f.stacks.Data.StackName(), secret) || env["MAESTRO_GROUP_COUNT"] != "16" || env["DB_PROXY_ENDPOINT"] == nil ||
		env["MAESTRO_CLUSTER_NAME"] != "maestro" {
		t.Errorf("%s environment = %s, want the database secret, the proxy, the group count and the cluster name", fn, asJSON(env))
	}
	p := props(tmpl.Resources[logicalID(t, tmpl.stack, fn, "Function")])
	if p["ReservedConcurrentExecutions"] != float64(reserved) || p["Runtime"] != "provided.al2023" {
		t.Errorf("%s: reserved %v runtime %v, want %d provided.al2023", fn, p["ReservedConcurrentExecutions"], p["Runtime"], reserved)
	}
	grants := strings.Join(policyGrants(tmpl, logicalID(t, tmpl.stack, fn, "Role")), " ")
	if !strings.Contains(grants, "secretsmanager:GetSecretValue") {
		t.Errorf("%s may not read the database secret: %s", fn, grants)
	}
}

func TestEventsStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.events
	queue := logicalID(t, tmpl.stack, "InternalEvents", "Queue")
	dlq := logicalID(t, tmpl.stack, "InternalEvents", "DeadLetterQueue")
	eventTopic := logicalID(t, tmpl.stack, "EventTopic")
	alertTopic := logicalID(t, tmpl.stack, "AlertTopic")
	subscriber := logicalID(t, tmpl.stack, "ExampleSubscriber", "Queue")

	t.Run("resource counts", func(t *testing.T) {
		for typ, n := range map[string]float64{
			"AWS::SQS::Queue":                 4, // internal events, subscriber, a DLQ each
			"AWS::SNS::Topic":                 2,
			"AWS::SNS::Subscription":          1,
			"AWS::Lambda::Function":           1,
			"AWS::Lambda::EventSourceMapping": 1,
		} {
			check(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
		}
	})

	t.Run("queues encrypted, tls only, with a dead-letter queue", func(t *testing.T) {
		check(t, func() {
			tmpl.AllResourcesProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"SqsManagedSseEnabled": true})
		})
		p := props(tmpl.Resources[queue])
		rp := p["RedrivePolicy"].(map[string]any)
		if asJSON(rp["deadLetterTargetArn"]) != asJSON(map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}) || rp["maxReceiveCount"] != 5.0 {
			t.Errorf("redrive = %s", asJSON(rp))
		}
		if p["VisibilityTimeout"] != 181.0 {
			t.Errorf("visibility %v, want 6x the publisher's 30 s + the 1 s batching window", p["VisibilityTimeout"])
		}
		if n := len(tmpl.ofType("AWS::SQS::QueuePolicy")); n < 4 {
			t.Errorf("%d queue policies, want one denying plain HTTP on each queue", n)
		}
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
				"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				})})},
			})
		})
	})

	t.Run("publisher reads the queue and publishes to both topics", func(t *testing.T) {
		// Exactly what functions/publisher reads, and no database.
		env := functionEnv(t, tmpl, "Publisher", "Function")
		want := map[string]any{
			"MAESTRO_EVENT_TOPIC_ARN": map[string]any{"Ref": eventTopic},
			"MAESTRO_ALERT_TOPIC_ARN": map[string]any{"Ref": alertTopic},
			"MAESTRO_CLUSTER_NAME":    "maestro",
		}
		if asJSON(env) != asJSON(want) {
			t.Errorf("publisher environment = %s, want %s", asJSON(env), asJSON(want))
		}
		p := props(tmpl.Resources[logicalID(t, tmpl.stack, "Publisher", "Function")])
		if p["ReservedConcurrentExecutions"] != 5.0 || p["Runtime"] != "provided.al2023" || p["Timeout"] != float64(PublisherTimeoutSeconds) {
			t.Errorf("publisher: reserved %v runtime %v timeout %v", p["ReservedConcurrentExecutions"], p["Runtime"], p["Timeout"])
		}
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
				"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{queue, "Arn"}},
				"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
				"BatchSize":             10,
			})
		})
		grants := policyGrants(tmpl, logicalID(t, tmpl.stack, "Publisher", "Role"))
		joined := strings.Join(grants, " ")
		for _, want := range []string{`"sns:Publish"@[{"Ref":"` + alertTopic + `"},{"Ref":"` + eventTopic + `"}]`, "sqs:ReceiveMessage"} {
			if !strings.Contains(joined, want) {
				t.Errorf("publisher grants %s, want %s", joined, want)
			}
		}
		for _, g := range grants {
			if g == activeTracingGrant {
				continue // X-Ray has no resource-level permissions
			}
			if strings.Contains(g, `@"*"`) || strings.Contains(g, "secretsmanager:") {
				t.Errorf("publisher may %s", g)
			}
		}
	})

	t.Run("example subscriber: raw delivery, a filter policy on the type attribute, a dead-letter queue", func(t *testing.T) {
		subDLQ := logicalID(t, tmpl.stack, "ExampleSubscriber", "DeadLetterQueue")
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{
				"Protocol":           "sqs",
				"TopicArn":           map[string]any{"Ref": eventTopic},
				"Endpoint":           map[string]any{"Fn::GetAtt": []any{subscriber, "Arn"}},
				"RawMessageDelivery": true,
				"FilterPolicy":       map[string]any{"type": []any{"WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"}},
				"FilterPolicyScope":  "MessageAttributes",
				"RedrivePolicy":      map[string]any{"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{subDLQ, "Arn"}}},
			})
		})
		// The topic may send to the queue.
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
				"Queues": []any{map[string]any{"Ref": subscriber}},
				"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"Action": "sqs:SendMessage", "Effect": "Allow",
					"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": map[string]any{"Ref": eventTopic}}},
				})})},
			})
		})
	})

	t.Run("topics refuse plain http", func(t *testing.T) {
		check(t, func() {
			tmpl.ResourcePropertiesCountIs(jsii.String("AWS::SNS::TopicPolicy"), map[string]any{
				"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				})})},
			}, jsii.Number(2))
		})
	})
}

func TestSignalsStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.signals
	queue := logicalID(t, tmpl.stack, "SignalsQueue", "Queue")
	dlq := logicalID(t, tmpl.stack, "SignalsQueue", "DeadLetterQueue")

	t.Run("queue, dead-letter queue and partial batch failures", func(t *testing.T) {
		rp := props(tmpl.Resources[queue])["RedrivePolicy"].(map[string]any)
		if asJSON(rp["deadLetterTargetArn"]) != asJSON(map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}) {
			t.Errorf("redrive = %s", asJSON(rp))
		}
		if v := props(tmpl.Resources[queue])["VisibilityTimeout"]; v != 361.0 {
			t.Errorf("visibility %v, want 6x the function's 60 s + the 1 s batching window", v)
		}
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
				"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{queue, "Arn"}},
				"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
			})
		})
	})

	t.Run("function", func(t *testing.T) {
		checkFunctionBase(t, f, tmpl, "Signals", 5)
		if env := functionEnv(t, tmpl, "Signals", "Function"); env["MAESTRO_S3_SIGNAL_RULES"] != "[]" {
			t.Errorf("MAESTRO_S3_SIGNAL_RULES = %v", env["MAESTRO_S3_SIGNAL_RULES"])
		}
		for _, g := range policyGrants(tmpl, logicalID(t, tmpl.stack, "Signals", "Role")) {
			// On "*" only its VPC network interfaces (TestFunctionRoles)
			// and active tracing's X-Ray actions.
			if (strings.Contains(g, `@"*"`) && !strings.HasPrefix(g, asJSON(VpcNetworkInterfaceActions)) && g != activeTracingGrant) ||
				strings.Contains(g, "sqs:SendMessage") {
				t.Errorf("signals function may %s", g)
			}
		}
	})
}

func TestTriggersStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.triggers
	fn := logicalID(t, tmpl.stack, "TimeTrigger", "Function")
	dlq := logicalID(t, tmpl.stack, "ScheduleDeadLetterQueue")
	role := logicalID(t, tmpl.stack, "ScheduleRole")

	t.Run("schedule at the start of every minute with retries and a dead-letter queue", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), map[string]any{
				"ScheduleExpression":         "cron(* * * * ? *)",
				"ScheduleExpressionTimezone": "UTC",
				"State":                      "ENABLED",
				"FlexibleTimeWindow":         map[string]any{"Mode": "OFF"},
				"Target": map[string]any{
					"Arn":              map[string]any{"Fn::GetAtt": []any{fn, "Arn"}},
					"RoleArn":          map[string]any{"Fn::GetAtt": []any{role, "Arn"}},
					"Input":            TimeTriggerInput,
					"RetryPolicy":      map[string]any{"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 120},
					"DeadLetterConfig": map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}},
				},
			})
		})
	})

	t.Run("schedule role may invoke the function and fill the dead-letter queue, nothing else", func(t *testing.T) {
		grants := policyGrants(tmpl, role)
		want := []string{
			`"lambda:InvokeFunction"@{"Fn::GetAtt":["` + fn + `","Arn"]}`,
		}
		joined := strings.Join(grants, " ")
		if !strings.Contains(joined, want[0]) || !strings.Contains(joined, `{"Fn::GetAtt":["`+dlq+`","Arn"]}`) || len(grants) != 2 {
			t.Errorf("schedule role grants %v", grants)
		}
	})

	t.Run("function", func(t *testing.T) {
		checkFunctionBase(t, f, tmpl, "TimeTrigger", 2)
		if p := props(tmpl.Resources[fn]); p["Timeout"] != 55.0 {
			t.Errorf("timeout %v, want under a minute", p["Timeout"])
		}
	})
}

// TestQueuesOutlastTheirConsumers checks every SQS event source of the app:
// its queue hides a received message at least six times the function's
// timeout plus the batching window (AWS's advice for Lambda), so that a
// message is not offered again while an invocation may still hold it.
func TestQueuesOutlastTheirConsumers(t *testing.T) {
	f := loadFixture(t)
	n := 0
	for _, s := range f.all() {
		tmpl := *s.dst
		for id, r := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
			p := props(r)
			queue, _ := p["EventSourceArn"].(map[string]any)["Fn::GetAtt"].([]any)
			fn, _ := p["FunctionName"].(map[string]any)["Ref"].(string)
			if len(queue) != 2 || fn == "" {
				t.Errorf("%s: event source %s of %s, want a queue and a function of the same stack", id, asJSON(p["EventSourceArn"]), asJSON(p["FunctionName"]))
				continue
			}
			visibility, _ := props(tmpl.Resources[queue[0].(string)])["VisibilityTimeout"].(float64)
			timeout, _ := props(tmpl.Resources[fn])["Timeout"].(float64)
			window, _ := p["MaximumBatchingWindowInSeconds"].(float64)
			if timeout == 0 || visibility < 6*timeout+window {
				t.Errorf("%s: queue %s hides messages %v s, want at least 6 x %v s + %v s", id, queue[0], visibility, timeout, window)
			}
			if asJSON(p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
				t.Errorf("%s: %s, want partial batch failures", id, asJSON(p["FunctionResponseTypes"]))
			}
			n++
		}
	}
	if n < 2 {
		t.Errorf("%d event sources, want the publisher's and the signals function's", n)
	}
}

// activeTracingGrant is what Lambda active tracing adds to a function's
// role (policyGrants' form): the Lambda service sends the segments as it.
const activeTracingGrant = `["xray:PutTelemetryRecords","xray:PutTraceSegments"]@"*"`
