package main

import (
	"maps"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// TriggerLagThresholdSeconds is the trigger lag above which the TriggerLag
// alarm fires.
const TriggerLagThresholdSeconds = 60

// ArchiveLagThresholdSeconds is the archive lag above which the ArchiveLag
// alarm fires (two hourly passes in a row): a day.
const ArchiveLagThresholdSeconds = 86400

// MonitoringStackProps configures NewMonitoringStack.
type MonitoringStackProps struct {
	awscdk.StackProps
	// AlertTopic is notified when an alarm fires and when it clears.
	AlertTopic awssns.ITopic
	// DeadLetterQueues are alarmed when they hold any message, by name.
	DeadLetterQueues map[string]awssqs.IQueue
	// Functions are alarmed on errors, by name (the deployed ones).
	Functions map[string]*Function
	// RestAPI is alarmed on 5xx responses.
	RestAPI awsapigateway.RestApi
	// Engine, when it runs a service, is alarmed on running tasks and
	// charted (on the emulator target it runs none).
	Engine *EngineStack
	// Data is alarmed on Aurora's capacity, CPU and connections and on RDS
	// Proxy, when they are deployed (not on the emulator target).
	Data *DataStack
	// DBMaxCapacity (ACUs) and ProxyMaxConnectionsPercent size the
	// connection alarms' thresholds.
	DBMaxCapacity              float64
	ProxyMaxConnectionsPercent int
	// SourceQueues are alarmed on the age of their oldest message, by name:
	// the queues a function consumes.
	SourceQueues map[string]awssqs.IQueue
	// EngineBacklogSeconds is the outbox age the EngineBacklog alarm fires
	// above; 0 leaves it out.
	EngineBacklogSeconds int
	// MetricsNamespace is where the deployment's processes write their
	// metrics (metrics.NamespaceOf its stage); empty is metrics.Namespace.
	MetricsNamespace string
}

// namespace is the namespace the alarms and the dashboard read.
func (p *MonitoringStackProps) namespace() string {
	if p.MetricsNamespace == "" {
		return metrics.Namespace
	}
	return p.MetricsNamespace
}

// MonitoringStack holds the alarms and the one dashboard. Every alarm
// notifies AlertTopic; docs/deploy.md says what each means and what to do.
type MonitoringStack struct {
	awscdk.Stack
	// Alarms by construct id.
	Alarms map[string]awscloudwatch.Alarm
	// Dashboard charts the engine, the API, the functions and the queues.
	Dashboard awscloudwatch.Dashboard
}

// Metric is a Maestro metric (engine/metrics) of one service in a
// deployment's namespace.
func Metric(namespace, service, name, statistic string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(namespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{metrics.DimensionService: jsii.String(service)},
		Statistic:     jsii.String(statistic),
		Period:        period,
	})
}

// EngineMetric is a metric the engine emits.
func EngineMetric(namespace, name, statistic string, period awscdk.Duration) awscloudwatch.Metric {
	return Metric(namespace, metrics.ServiceEngine, name, statistic, period)
}

// NewMonitoringStack builds the alarms and the dashboard.
func NewMonitoringStack(scope constructs.Construct, id string, props *MonitoringStackProps) *MonitoringStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)
	s := &MonitoringStack{Stack: stack, Alarms: map[string]awscloudwatch.Alarm{}}
	ns := props.namespace()
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	action := awscloudwatchactions.NewSnsAction(props.AlertTopic)

	var alarm alarmFunc = func(id, description string, metric awscloudwatch.IMetric, threshold float64,
		op awscloudwatch.ComparisonOperator, periods int, missing awscloudwatch.TreatMissingData) {
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(description),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: op,
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(periods),
			TreatMissingData:   missing,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		s.Alarms[id] = a
	}
	atLeast := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	above := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	notBreaching := awscloudwatch.TreatMissingData_NOT_BREACHING

	for _, name := range slices.Sorted(maps.Keys(props.DeadLetterQueues)) {
		q := props.DeadLetterQueues[name]
		alarm("DeadLetters"+title(name),
			"Messages in the "+name+" dead-letter queue: they failed every retry and wait to be inspected and redriven (docs/deploy.md).",
			q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: five}),
			1, atLeast, 1, notBreaching)
	}
	for _, name := range slices.Sorted(maps.Keys(props.Functions)) {
		fn := props.Functions[name].Function
		alarm("Errors"+title(name),
			"The "+name+" function failed invocations (crash, timeout or an error returned to its trigger) in the last 5 minutes; see its log group.",
			fn.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five}),
			1, atLeast, 1, notBreaching)
	}
	alarm("TriggerLag",
		"Time triggers fire more than 60 s late: the time-trigger function is failing, throttled or too slow for the due triggers.",
		Metric(ns, metrics.ServiceTimeTrigger, metrics.TriggerLag, "Maximum", minute),
		TriggerLagThresholdSeconds, above, 1, notBreaching)
	alarm("PublishFailures",
		"Events failed to publish in two 5-minute periods in a row (SNS refusing or throttling, a topic or permission missing): they are retried and, after 5 receives, moved to the internal-events dead-letter queue.",
		Metric(ns, metrics.ServicePublisher, metrics.PublishFailures, "Sum", five),
		1, atLeast, 2, notBreaching)
	if props.Functions[FunctionArchiver] != nil {
		hour := awscdk.Duration_Hours(jsii.Number(1))
		alarm("ArchiveFailures",
			"An archiver pass failed (database, S3 or permissions): ended runs stay in the database until a pass succeeds; see the archiver's log group (docs/operations.md, Retention and archival).",
			Metric(ns, metrics.ServiceArchiver, metrics.ArchiveFailures, "Sum", hour),
			1, atLeast, 1, notBreaching)
		alarm("ArchiveLag",
			"The oldest archivable run ended more than a day past its retention: the archiver is failing or cannot keep up (raise MAESTRO_RETENTION_BATCH or the schedule's rate).",
			Metric(ns, metrics.ServiceArchiver, metrics.ArchiveLag, "Maximum", hour),
			ArchiveLagThresholdSeconds, above, 2, notBreaching)
	}
	alarm("EngineUnownedGroups",
		"Flow groups held by no live engine for 3 minutes, or no engine reporting at all: runs in those groups make no progress.",
		EngineMetric(ns, metrics.UnownedGroups, "Maximum", minute),
		0, above, 3, awscloudwatch.TreatMissingData_BREACHING)
	if props.RestAPI != nil {
		alarm("Api5xx",
			"The REST API answered 5 or more server errors in 5 minutes.",
			props.RestAPI.MetricServerError(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five}),
			5, atLeast, 1, notBreaching)
	}
	if e := props.Engine; e != nil && e.Service != nil {
		alarm("EngineTasks",
			"No engine task running for 3 minutes: nothing executes workflows.",
			awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace:  jsii.String("ECS/ContainerInsights"),
				MetricName: jsii.String("RunningTaskCount"),
				DimensionsMap: &map[string]*string{
					"ClusterName": e.Cluster.ClusterName(),
					"ServiceName": e.Service.ServiceName(),
				},
				Statistic: jsii.String("Minimum"),
				Period:    minute,
			}),
			1, awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, 3, awscloudwatch.TreatMissingData_BREACHING)
	}

	addOperationalAlarms(props, alarm)

	s.Dashboard = newDashboard(stack, props, s.Alarms)
	return s
}

// newDashboard charts what an operator looks at first.
func newDashboard(stack awscdk.Stack, props *MonitoringStackProps, alarms map[string]awscloudwatch.Alarm) awscloudwatch.Dashboard {
	ns := props.namespace()
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	graph := func(title string, left []awscloudwatch.IMetric, right ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		p := &awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6)}
		if len(right) > 0 {
			p.Right = &right
		}
		return awscloudwatch.NewGraphWidget(p)
	}
	labelled := func(m awscloudwatch.Metric, label string) awscloudwatch.IMetric {
		return m.With(&awscloudwatch.MetricOptions{Label: jsii.String(label)})
	}
	steps := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("steps / PERIOD(steps)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"steps": EngineMetric(ns, metrics.StepsEnded, "Sum", minute)},
		Label:        jsii.String("steps/s"),
		Period:       minute,
	})
	rows := [][]awscloudwatch.IWidget{{
		graph("Engine: steps per second", []awscloudwatch.IMetric{steps}),
		graph("Engine: step launch latency (ms)", []awscloudwatch.IMetric{
			labelled(EngineMetric(ns, metrics.StepLaunchLatency, "p50", minute), "p50"),
			labelled(EngineMetric(ns, metrics.StepLaunchLatency, "p99", minute), "p99"),
		}),
		graph("Engine: outbox queue", []awscloudwatch.IMetric{
			labelled(EngineMetric(ns, metrics.QueueDepth, "Maximum", minute), "depth"),
		}, labelled(EngineMetric(ns, metrics.QueueAge, "Maximum", minute), "oldest due (s)")),
	}, {
		graph("Engine: flow groups", []awscloudwatch.IMetric{
			labelled(EngineMetric(ns, metrics.OwnedGroups, "Sum", minute), "owned (all nodes)"),
			labelled(EngineMetric(ns, metrics.UnownedGroups, "Maximum", minute), "unowned"),
		}, labelled(EngineMetric(ns, metrics.GroupTakeovers, "Sum", minute), "takeovers")),
		graph("API", []awscloudwatch.IMetric{
			labelled(Metric(ns, metrics.ServiceAPI, metrics.APIRequests, "Sum", minute), "requests"),
			labelled(Metric(ns, metrics.ServiceAPI, metrics.APIServerErrors, "Sum", minute), "5xx"),
		}, labelled(Metric(ns, metrics.ServiceAPI, metrics.APILatency, "p99", minute), "p99 latency (ms)")),
		graph("Triggers, signals, events", []awscloudwatch.IMetric{
			labelled(Metric(ns, metrics.ServiceSignals, metrics.SignalsReceived, "Sum", minute), "signals in"),
			labelled(Metric(ns, metrics.ServiceSignals, metrics.SignalsMatched, "Sum", minute), "signals out"),
			labelled(Metric(ns, metrics.ServicePublisher, metrics.PublishFailures, "Sum", minute), "publish failures"),
		}, labelled(Metric(ns, metrics.ServiceTimeTrigger, metrics.TriggerLag, "Maximum", minute), "trigger lag (s)")),
	}}

	if props.Functions[FunctionArchiver] != nil {
		hour := awscdk.Duration_Hours(jsii.Number(1))
		rows = append(rows, []awscloudwatch.IWidget{graph("Retention: archived per hour", []awscloudwatch.IMetric{
			labelled(Metric(ns, metrics.ServiceArchiver, metrics.RunsArchived, "Sum", hour), "runs"),
			labelled(Metric(ns, metrics.ServiceArchiver, metrics.StepsArchived, "Sum", hour), "step attempts"),
		}, labelled(Metric(ns, metrics.ServiceArchiver, metrics.ArchiveLag, "Maximum", hour), "archive lag (s)"))})
	}
	var invocations, errs []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(props.Functions)) {
		fn := props.Functions[name].Function
		invocations = append(invocations, fn.MetricInvocations(&awscloudwatch.MetricOptions{Label: jsii.String(name), Period: minute}))
		errs = append(errs, fn.MetricErrors(&awscloudwatch.MetricOptions{Label: jsii.String(name + " errors"), Period: minute}),
			fn.MetricThrottles(&awscloudwatch.MetricOptions{Label: jsii.String(name + " throttles"), Period: minute}))
	}
	var dlqs []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(props.DeadLetterQueues)) {
		dlqs = append(dlqs, props.DeadLetterQueues[name].MetricApproximateNumberOfMessagesVisible(
			&awscloudwatch.MetricOptions{Label: jsii.String(name), Statistic: jsii.String("Maximum"), Period: minute}))
	}
	rows = append(rows, []awscloudwatch.IWidget{
		graph("Lambda invocations", invocations),
		graph("Lambda errors and throttles", errs),
		graph("Dead-letter queues", dlqs),
	})
	var durations, ages []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(props.Functions)) {
		durations = append(durations, props.Functions[name].Function.MetricDuration(
			&awscloudwatch.MetricOptions{Label: jsii.String(name + " max (ms)"), Statistic: jsii.String("Maximum"), Period: minute}))
	}
	for _, name := range slices.Sorted(maps.Keys(props.SourceQueues)) {
		ages = append(ages, props.SourceQueues[name].MetricApproximateAgeOfOldestMessage(
			&awscloudwatch.MetricOptions{Label: jsii.String(name), Statistic: jsii.String("Maximum"), Period: minute}))
	}
	operations := []awscloudwatch.IWidget{
		graph("Lambda duration", durations),
		graph("Source queues: oldest message (s)", ages),
	}
	if props.RestAPI != nil {
		operations = append(operations, graph("API Gateway: latency (ms) and 5xx", []awscloudwatch.IMetric{
			props.RestAPI.MetricLatency(&awscloudwatch.MetricOptions{Label: jsii.String("p99"), Statistic: jsii.String("p99"), Period: minute}),
		}, props.RestAPI.MetricServerError(&awscloudwatch.MetricOptions{Label: jsii.String("5xx"), Statistic: jsii.String("Sum"), Period: minute})))
	}
	rows = append(rows, operations)
	var lastRow []awscloudwatch.IWidget
	if e := props.Engine; e != nil && e.Service != nil {
		lastRow = append(lastRow, graph("Engine tasks: CPU and memory (%), readiness", []awscloudwatch.IMetric{
			e.Service.MetricCpuUtilization(&awscloudwatch.MetricOptions{Period: minute}),
			e.Service.MetricMemoryUtilization(&awscloudwatch.MetricOptions{Period: minute}),
		}, labelled(EngineMetric(ns, metrics.Ready, "Minimum", minute), "ready (min over tasks)")))
	} else {
		lastRow = append(lastRow, graph("Engine readiness", []awscloudwatch.IMetric{
			labelled(EngineMetric(ns, metrics.Ready, "Minimum", minute), "ready (min over tasks)"),
		}))
	}
	if d := props.Data; d != nil && d.Cluster != nil {
		lastRow = append(lastRow, graph("Aurora: capacity (% of max ACU), CPU (%)", []awscloudwatch.IMetric{
			d.Cluster.Metric(jsii.String("ACUUtilization"), &awscloudwatch.MetricOptions{Label: jsii.String("ACU %"), Statistic: jsii.String("Maximum"), Period: minute}),
			d.Cluster.MetricCPUUtilization(&awscloudwatch.MetricOptions{Label: jsii.String("CPU %"), Period: minute}),
		}, d.Cluster.MetricDatabaseConnections(&awscloudwatch.MetricOptions{Label: jsii.String("connections"), Statistic: jsii.String("Maximum"), Period: minute})))
	}
	if d := props.Data; d != nil && d.Proxy != nil {
		proxy := func(name, statistic, label string) awscloudwatch.IMetric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/RDS"), MetricName: jsii.String(name), Label: jsii.String(label),
				DimensionsMap: &map[string]*string{"ProxyName": d.Proxy.DbProxyName()},
				Statistic:     jsii.String(statistic), Period: minute,
			})
		}
		lastRow = append(lastRow, graph("RDS Proxy", []awscloudwatch.IMetric{
			proxy("ClientConnections", "Maximum", "client connections"),
			proxy("DatabaseConnections", "Maximum", "database connections"),
		}, proxy("ClientConnectionsSetupFailedAuth", "Sum", "auth failures")))
	}
	rows = append(rows, lastRow)
	list := make([]interfacesawscloudwatch.IAlarmRef, 0, len(alarms))
	for _, id := range slices.Sorted(maps.Keys(alarms)) {
		list = append(list, alarms[id])
	}
	rows = append(rows, []awscloudwatch.IWidget{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title: jsii.String("Alarms"), Alarms: &list, Width: jsii.Number(24),
	})})

	widgets := make([]*[]awscloudwatch.IWidget, len(rows))
	for i := range rows {
		widgets[i] = &rows[i]
	}
	return awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: stack.StackName(),
		Widgets:       &widgets,
	})
}

// title upper-cases the first letter of a name for a construct id.
func title(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
