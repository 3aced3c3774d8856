package main

import (
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

func TestMonitoringStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.monitoring
	events := *f.stacks.Events.StackName()
	alertTopic := logicalID(t, f.stacks.Events.Stack, "AlertTopic")

	alarm := func(t *testing.T, id string) map[string]any {
		t.Helper()
		p := props(tmpl.Resources[logicalID(t, tmpl.stack, id)])
		for _, key := range []string{"AlarmActions", "OKActions"} {
			acts, _ := p[key].([]any)
			if len(acts) != 1 || !importsFrom(acts[0], events, alertTopic) {
				t.Errorf("%s %s = %s, want the alert topic", id, key, asJSON(p[key]))
			}
		}
		return p
	}

	t.Run("dead-letter queue depth", func(t *testing.T) {
		for _, q := range []struct{ id, stack, queue string }{
			{"DeadLettersInternalEvents", events, "InternalEventsDeadLetterQueue"},
			{"DeadLettersExampleSubscriber", events, "ExampleSubscriberDeadLetterQueue"},
			{"DeadLettersSignals", *f.stacks.Signals.StackName(), "SignalsQueueDeadLetterQueue"},
			{"DeadLettersTimeTriggerSchedule", *f.stacks.Triggers.StackName(), "ScheduleDeadLetterQueue"},
		} {
			p := alarm(t, q.id)
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/SQS" || p["MetricName"] != "ApproximateNumberOfMessagesVisible" || p["Threshold"] != 1.0 ||
				p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || len(dims) != 1 ||
				!importsFrom(dims[0].(map[string]any)["Value"], q.stack, q.queue) {
				t.Errorf("%s = %s", q.id, asJSON(p))
			}
		}
	})

	t.Run("lambda errors", func(t *testing.T) {
		for _, fn := range []struct{ id, stack, path string }{
			{"ErrorsApi", *f.stacks.API.StackName(), "ApiFunction"},
			{"ErrorsPublisher", events, "PublisherFunction"},
			{"ErrorsSignals", *f.stacks.Signals.StackName(), "SignalsFunction"},
			{"ErrorsTimetrigger", *f.stacks.Triggers.StackName(), "TimeTriggerFunction"},
		} {
			p := alarm(t, fn.id)
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/Lambda" || p["MetricName"] != "Errors" || p["Statistic"] != "Sum" || p["Threshold"] != 1.0 ||
				len(dims) != 1 || !importsFrom(dims[0].(map[string]any)["Value"], fn.stack, fn.path) {
				t.Errorf("%s = %s", fn.id, asJSON(p))
			}
		}
	})

	t.Run("trigger lag above 60 s", func(t *testing.T) {
		p := alarm(t, "TriggerLag")
		if p["Namespace"] != metrics.Namespace || p["MetricName"] != metrics.TriggerLag || p["Statistic"] != "Maximum" ||
			p["Threshold"] != 60.0 || p["ComparisonOperator"] != "GreaterThanThreshold" || p["Period"] != 60.0 ||
			asJSON(p["Dimensions"]) != `[{"Name":"Service","Value":"timetrigger"}]` {
			t.Errorf("TriggerLag = %s", asJSON(p))
		}
	})

	t.Run("engine health", func(t *testing.T) {
		p := alarm(t, "EngineUnownedGroups")
		if p["MetricName"] != metrics.UnownedGroups || p["Threshold"] != 0.0 || p["ComparisonOperator"] != "GreaterThanThreshold" ||
			p["EvaluationPeriods"] != 3.0 || p["TreatMissingData"] != "breaching" {
			t.Errorf("EngineUnownedGroups = %s", asJSON(p))
		}
		p = alarm(t, "EngineTasks")
		if p["Namespace"] != "ECS/ContainerInsights" || p["MetricName"] != "RunningTaskCount" || p["ComparisonOperator"] != "LessThanThreshold" ||
			p["Threshold"] != 1.0 || p["TreatMissingData"] != "breaching" {
			t.Errorf("EngineTasks = %s", asJSON(p))
		}
		alarm(t, "Api5xx")
	})

	t.Run("every alarm notifies", func(t *testing.T) {
		for id, r := range tmpl.ofType("AWS::CloudWatch::Alarm") {
			if acts, _ := props(r)["AlarmActions"].([]any); len(acts) == 0 {
				t.Errorf("alarm %s notifies nobody", id)
			}
		}
		check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(4+4+4)) })
	})

	t.Run("one dashboard with every metric", func(t *testing.T) {
		_, p := tmpl.one(t, "AWS::CloudWatch::Dashboard")
		body := asJSON(p["DashboardBody"])
		for _, m := range []string{
			metrics.StepsEnded, metrics.StepLaunchLatency, metrics.QueueDepth, metrics.QueueAge, metrics.GroupTakeovers,
			metrics.OwnedGroups, metrics.UnownedGroups, metrics.APIRequests, metrics.APIServerErrors, metrics.APILatency,
			metrics.TriggerLag, metrics.SignalsReceived, metrics.SignalsMatched, metrics.PublishFailures,
			"ApproximateNumberOfMessagesVisible", "Throttles", "CPUUtilization",
		} {
			if !strings.Contains(body, `\"`+m+`\"`) {
				t.Errorf("dashboard lacks %s", m)
			}
		}
	})
}
