package main

import (
	"encoding/json"
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

	t.Run("publish failures", func(t *testing.T) {
		p := alarm(t, "PublishFailures")
		if p["Namespace"] != metrics.Namespace || p["MetricName"] != metrics.PublishFailures || p["Statistic"] != "Sum" ||
			p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["Period"] != 300.0 ||
			p["EvaluationPeriods"] != 2.0 || asJSON(p["Dimensions"]) != `[{"Name":"Service","Value":"publisher"}]` {
			t.Errorf("PublishFailures = %s", asJSON(p))
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

	t.Run("aurora and rds proxy", func(t *testing.T) {
		cluster := logicalID(t, f.stacks.Data.Stack, "Cluster")
		data := *f.stacks.Data.StackName()
		for _, a := range []struct {
			id, metric, stat string
			threshold        float64
		}{
			{"DatabaseCapacityAtMax", "ACUUtilization", "Maximum", DatabaseCapacityAlarmPercent},
			{"DatabaseCpu", "CPUUtilization", "Average", DatabaseCPUAlarmPercent},
			// 4 ACUs: 8 GiB / 9,531,392 = 901 connections, 80 % of them.
			{"DatabaseConnections", "DatabaseConnections", "Maximum", 720},
		} {
			p := alarm(t, a.id)
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/RDS" || p["MetricName"] != a.metric || p["Statistic"] != a.stat || p["Threshold"] != a.threshold ||
				len(dims) != 1 || dims[0].(map[string]any)["Name"] != "DBClusterIdentifier" ||
				!importsFrom(dims[0].(map[string]any)["Value"], data, cluster) {
				t.Errorf("%s = %s", a.id, asJSON(p))
			}
		}
		proxy := logicalID(t, f.stacks.Data.Stack, "Proxy")
		for _, a := range []struct {
			id, metric string
			threshold  float64
		}{
			{"ProxyConnections", "DatabaseConnections", 405}, // 90 % of 50 % of 901
			{"ProxyAuthFailures", "ClientConnectionsSetupFailedAuth", ProxyAuthFailuresAlarm},
		} {
			p := alarm(t, a.id)
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/RDS" || p["MetricName"] != a.metric || p["Threshold"] != a.threshold ||
				len(dims) != 1 || dims[0].(map[string]any)["Name"] != "ProxyName" || !importsFrom(dims[0].(map[string]any)["Value"], data, proxy) {
				t.Errorf("%s = %s", a.id, asJSON(p))
			}
		}
	})

	t.Run("source queue age", func(t *testing.T) {
		for _, q := range []struct{ id, stack, queue string }{
			{"OldestMessageInternalEvents", events, "InternalEventsQueue"},
			{"OldestMessageSignals", *f.stacks.Signals.StackName(), "SignalsQueue"},
		} {
			p := alarm(t, q.id)
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/SQS" || p["MetricName"] != "ApproximateAgeOfOldestMessage" || p["Threshold"] != float64(SourceQueueAgeAlarmSeconds) ||
				len(dims) != 1 || !importsFrom(dims[0].(map[string]any)["Value"], q.stack, q.queue) ||
				strings.Contains(asJSON(dims[0]), "DeadLetter") {
				t.Errorf("%s = %s", q.id, asJSON(p))
			}
		}
	})

	t.Run("lambda throttles and duration near the timeout", func(t *testing.T) {
		for _, fn := range []struct {
			name, stack, path string
			timeout           float64
		}{
			{"Api", *f.stacks.API.StackName(), "ApiFunction", 29},
			{"Publisher", events, "PublisherFunction", PublisherTimeoutSeconds},
			{"Signals", *f.stacks.Signals.StackName(), "SignalsFunction", 60},
			{"Timetrigger", *f.stacks.Triggers.StackName(), "TimeTriggerFunction", 55},
		} {
			p := alarm(t, "Throttles"+fn.name)
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/Lambda" || p["MetricName"] != "Throttles" || p["Statistic"] != "Sum" ||
				len(dims) != 1 || !importsFrom(dims[0].(map[string]any)["Value"], fn.stack, fn.path) {
				t.Errorf("Throttles%s = %s", fn.name, asJSON(p))
			}
			p = alarm(t, "Duration"+fn.name)
			dims = p["Dimensions"].([]any)
			if p["Namespace"] != "AWS/Lambda" || p["MetricName"] != "Duration" || p["Statistic"] != "Maximum" ||
				p["Threshold"] != fn.timeout*1000*0.8 || len(dims) != 1 || !importsFrom(dims[0].(map[string]any)["Value"], fn.stack, fn.path) {
				t.Errorf("Duration%s = %s, want 80 %% of %v s", fn.name, asJSON(p), fn.timeout)
			}
		}
	})

	t.Run("api latency, silent schedule, engine readiness and backlog", func(t *testing.T) {
		p := alarm(t, "ApiLatencyP99")
		if p["Namespace"] != "AWS/ApiGateway" || p["MetricName"] != "Latency" || p["ExtendedStatistic"] != "p99" || p["Threshold"] != float64(APILatencyP99AlarmMs) {
			t.Errorf("ApiLatencyP99 = %s", asJSON(p))
		}
		p = alarm(t, "TimeTriggerSilent")
		dims := p["Dimensions"].([]any)
		if p["Namespace"] != "AWS/Lambda" || p["MetricName"] != "Invocations" || p["Statistic"] != "Sum" || p["Period"] != 300.0 ||
			p["ComparisonOperator"] != "LessThanThreshold" || p["Threshold"] != 1.0 || p["TreatMissingData"] != "breaching" ||
			!importsFrom(dims[0].(map[string]any)["Value"], *f.stacks.Triggers.StackName(), "TimeTriggerFunction") {
			t.Errorf("TimeTriggerSilent = %s", asJSON(p))
		}
		p = alarm(t, "EngineNotReady")
		if p["MetricName"] != metrics.Ready || p["Statistic"] != "Minimum" || p["ComparisonOperator"] != "LessThanThreshold" ||
			p["Threshold"] != 1.0 || p["EvaluationPeriods"] != float64(EngineNotReadyMinutes) {
			t.Errorf("EngineNotReady = %s", asJSON(p))
		}
		p = alarm(t, "EngineBacklog")
		if p["MetricName"] != metrics.QueueAge || p["Threshold"] != float64(f.cfg.EngineScaleQueueAgeSeconds) {
			t.Errorf("EngineBacklog = %s", asJSON(p))
		}
	})

	t.Run("every alarm notifies", func(t *testing.T) {
		for id, r := range tmpl.ofType("AWS::CloudWatch::Alarm") {
			if acts, _ := props(r)["AlarmActions"].([]any); len(acts) == 0 {
				t.Errorf("alarm %s notifies nobody", id)
			}
		}
		// The archive adds 6: its schedule's dead-letter queue, the
		// archiver's errors, throttles and duration, ArchiveFailures and
		// ArchiveLag.
		check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(4+4+5+3+2+2+4+4+4+6)) })
	})

	t.Run("one dashboard with every metric", func(t *testing.T) {
		_, p := tmpl.one(t, "AWS::CloudWatch::Dashboard")
		body := asJSON(p["DashboardBody"])
		for _, m := range []string{
			metrics.StepsEnded, metrics.StepLaunchLatency, metrics.QueueDepth, metrics.QueueAge, metrics.GroupTakeovers,
			metrics.OwnedGroups, metrics.UnownedGroups, metrics.APIRequests, metrics.APIServerErrors, metrics.APILatency,
			metrics.TriggerLag, metrics.SignalsReceived, metrics.SignalsMatched, metrics.PublishFailures,
			"ApproximateNumberOfMessagesVisible", "Throttles", "CPUUtilization", metrics.Ready,
			"ApproximateAgeOfOldestMessage", "Duration", "ACUUtilization", "DatabaseConnections", "ClientConnectionsSetupFailedAuth", "Latency",
		} {
			if !strings.Contains(body, `\"`+m+`\"`) {
				t.Errorf("dashboard lacks %s", m)
			}
		}
	})
}

// maestroMetric is a metric of the Maestro namespace that the app reads.
type maestroMetric struct {
	where, name string
	dims        map[string]string
}

// maestroMetrics finds every Maestro metric the synthesized app reads: in
// alarms (monitoring and autoscaling) and in the dashboard's widgets.
func maestroMetrics(t *testing.T, f *fixture) []maestroMetric {
	t.Helper()
	var out []maestroMetric
	for _, s := range f.all() {
		tmpl := *s.dst
		for id, r := range tmpl.ofType("AWS::CloudWatch::Alarm") {
			p := props(r)
			if p["Namespace"] != metrics.Namespace {
				continue
			}
			dims := map[string]string{}
			for _, d := range p["Dimensions"].([]any) {
				d := d.(map[string]any)
				v, ok := d["Value"].(string)
				if !ok {
					t.Errorf("alarm %s: dimension %s is not a literal: %s", id, d["Name"], asJSON(d["Value"]))
				}
				dims[d["Name"].(string)] = v
			}
			out = append(out, maestroMetric{where: "alarm " + id, name: p["MetricName"].(string), dims: dims})
		}
		for id, r := range tmpl.ofType("AWS::CloudWatch::Dashboard") {
			var body struct {
				Widgets []struct {
					Properties struct {
						Metrics [][]any `json:"metrics"`
					} `json:"properties"`
				} `json:"widgets"`
			}
			if err := json.Unmarshal([]byte(joined(props(r)["DashboardBody"])), &body); err != nil {
				t.Fatalf("dashboard %s: %v", id, err)
			}
			for _, w := range body.Widgets {
				for _, m := range w.Properties.Metrics {
					// [namespace, name, dim, value, ..., {options}]
					if len(m) < 2 || m[0] != metrics.Namespace {
						continue
					}
					dims := map[string]string{}
					for i := 2; i+1 < len(m); i += 2 {
						k, _ := m[i].(string)
						v, _ := m[i+1].(string)
						dims[k] = v
					}
					out = append(out, maestroMetric{where: "dashboard " + id, name: m[1].(string), dims: dims})
				}
			}
		}
	}
	return out
}

// joined renders an Fn::Join of the template as text, with "?" for the
// parts only known at deploy time.
func joined(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	j, _ := v.(map[string]any)["Fn::Join"].([]any)
	if len(j) != 2 {
		return asJSON(v)
	}
	var b strings.Builder
	for i, part := range j[1].([]any) {
		if i > 0 {
			b.WriteString(j[0].(string))
		}
		if s, ok := part.(string); ok {
			b.WriteString(s)
		} else {
			b.WriteString("?")
		}
	}
	return b.String()
}

// TestAlarmsReadWhatIsEmitted ties the app's alarms, autoscaling and
// dashboard to the code that writes the metrics: every Maestro metric they
// read has exactly the one Service dimension, and that service emits that
// metric (metrics.Catalog, which an Emitter enforces, and which the
// emitting packages' tests check against the lines they really write). A
// metric renamed, or read under another service or dimension, fails here.
func TestAlarmsReadWhatIsEmitted(t *testing.T) {
	f := loadFixture(t)
	read := maestroMetrics(t, f)
	seen := map[string]bool{}
	for _, m := range read {
		service, ok := m.dims[metrics.DimensionService]
		if !ok || len(m.dims) != 1 {
			t.Errorf("%s reads %s with dimensions %v, want only %s", m.where, m.name, m.dims, metrics.DimensionService)
			continue
		}
		if !metrics.Emits(service, m.name) {
			t.Errorf("%s reads %s of service %q, which that service does not emit", m.where, m.name, service)
		}
		seen[service+"/"+m.name] = true
	}
	// And the other way: every metric a service emits is charted.
	for service, names := range metrics.Catalog() {
		for _, name := range names {
			if !seen[service+"/"+name] {
				t.Errorf("%s's %s is emitted but neither alarmed nor charted", service, name)
			}
		}
	}
	for _, want := range []string{"alarm " + logicalID(t, f.stacks.Monitoring.Stack, "TriggerLag"),
		"alarm " + logicalID(t, f.stacks.Monitoring.Stack, "PublishFailures")} {
		found := false
		for _, m := range read {
			found = found || m.where == want
		}
		if !found {
			t.Errorf("%s does not read a Maestro metric", want)
		}
	}
}
