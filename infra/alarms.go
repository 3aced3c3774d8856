package main

import (
	"maps"
	"math"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// Thresholds of the operational alarms (docs/deploy.md, Alarms).
const (
	// DatabaseCapacityAlarmPercent: Aurora Serverless v2 near its maximum
	// ACUs (ACUUtilization) for 15 minutes; raise maestro:dbMaxCapacity.
	DatabaseCapacityAlarmPercent = 90
	// DatabaseCPUAlarmPercent: the writer's CPU for 15 minutes.
	DatabaseCPUAlarmPercent = 80
	// DatabaseConnectionsAlarmPercent of the estimated max_connections.
	DatabaseConnectionsAlarmPercent = 80
	// ProxyConnectionsAlarmPercent of the proxy's connection cap.
	ProxyConnectionsAlarmPercent = 90
	// ProxyAuthFailuresAlarm: client connections the proxy refused at
	// authentication in 5 minutes (a secret the proxy cannot read, a
	// rotation gone wrong).
	ProxyAuthFailuresAlarm = 5
	// SourceQueueAgeAlarmSeconds: the oldest message of a source queue has
	// waited this long for two 5-minute periods.
	SourceQueueAgeAlarmSeconds = 300
	// FunctionThrottlesAlarm: throttled invocations of a function in 5
	// minutes.
	FunctionThrottlesAlarm = 5
	// FunctionDurationAlarmPercent of a function's timeout that its longest
	// invocation reached in two 5-minute periods in a row.
	FunctionDurationAlarmPercent = 80
	// APILatencyP99AlarmMs: API Gateway's p99 latency over 15 minutes.
	APILatencyP99AlarmMs = 3000
	// TimeTriggerSilenceMinutes: no time-trigger invocation for this long
	// means the schedule stopped firing (missing data is breaching).
	TimeTriggerSilenceMinutes = 5
	// EngineNotReadyMinutes: an engine task reporting not ready (database
	// unreachable, lease rounds failing, no groups while some are free) for
	// this many minutes in a row.
	EngineNotReadyMinutes = 5
	// EngineBacklogMinutes: the outbox's oldest due message above
	// maestro:engineScaleQueueAgeSeconds for this many minutes.
	EngineBacklogMinutes = 5
)

// EstimatedMaxConnections is Aurora PostgreSQL's default max_connections
// for Serverless v2 at maxACU: LEAST(DBInstanceClassMemory/9531392, 5000),
// with 2 GiB per ACU. An estimate: AWS documents the formula, and the
// memory the instance class reports is a little below the nominal.
func EstimatedMaxConnections(maxACU float64) float64 {
	return math.Min(math.Floor(maxACU*2*(1<<30)/9531392), 5000)
}

// alarmFunc builds one alarm that notifies the alert topic.
type alarmFunc func(id, description string, metric awscloudwatch.IMetric, threshold float64,
	op awscloudwatch.ComparisonOperator, periods int, missing awscloudwatch.TreatMissingData)

// addOperationalAlarms adds the alarms on the AWS side of the deployment:
// Aurora, RDS Proxy, the source queues' age, each function's throttles and
// duration, API latency, a silent schedule, and the engine's readiness and
// backlog.
func addOperationalAlarms(props *MonitoringStackProps, alarm alarmFunc) {
	ns := props.namespace()
	five := awscdk.Duration_Minutes(jsii.Number(5))
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	atLeast := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	below := awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	notBreaching := awscloudwatch.TreatMissingData_NOT_BREACHING
	opts := func(statistic string, period awscdk.Duration) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Statistic: jsii.String(statistic), Period: period}
	}

	if d := props.Data; d != nil && d.Cluster != nil {
		alarm("DatabaseCapacityAtMax",
			"Aurora Serverless v2 has run at 90 % or more of its maximum ACUs for 15 minutes: queries queue up; raise maestro:dbMaxCapacity.",
			d.Cluster.Metric(jsii.String("ACUUtilization"), opts("Maximum", five)),
			DatabaseCapacityAlarmPercent, atLeast, 3, notBreaching)
		alarm("DatabaseCpu",
			"Aurora CPU at 80 % or more for 15 minutes (docs/scaling.md: what one writer carries).",
			d.Cluster.MetricCPUUtilization(opts("Average", five)),
			DatabaseCPUAlarmPercent, atLeast, 3, notBreaching)
		alarm("DatabaseConnections",
			"Aurora connections at 80 % or more of max_connections (estimated for the maximum ACUs) for 15 minutes: new connections will be refused.",
			d.Cluster.MetricDatabaseConnections(opts("Maximum", five)),
			math.Floor(EstimatedMaxConnections(props.DBMaxCapacity)*DatabaseConnectionsAlarmPercent/100), atLeast, 3, notBreaching)
	}
	if d := props.Data; d != nil && d.Proxy != nil {
		proxy := func(name, statistic string) awscloudwatch.Metric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/RDS"), MetricName: jsii.String(name),
				DimensionsMap: &map[string]*string{"ProxyName": d.Proxy.DbProxyName()},
				Statistic:     jsii.String(statistic), Period: five,
			})
		}
		capacity := EstimatedMaxConnections(props.DBMaxCapacity) * float64(props.ProxyMaxConnectionsPercent) / 100
		alarm("ProxyConnections",
			"RDS Proxy holds 90 % or more of its connection cap to the database for 15 minutes: function requests wait for a connection (BorrowTimeout 10 s).",
			proxy("DatabaseConnections", "Maximum"),
			math.Floor(capacity*ProxyConnectionsAlarmPercent/100), atLeast, 3, notBreaching)
		alarm("ProxyAuthFailures",
			"RDS Proxy refused 5 or more client connections at authentication in 5 minutes: check the proxy's access to the database secret and the last rotation.",
			proxy("ClientConnectionsSetupFailedAuth", "Sum"),
			ProxyAuthFailuresAlarm, atLeast, 1, notBreaching)
	}
	for _, name := range slices.Sorted(maps.Keys(props.SourceQueues)) {
		alarm("OldestMessage"+title(name),
			"The oldest message of the "+name+" queue has waited 5 minutes or more for 10 minutes: its consumer is failing, throttled or too slow.",
			props.SourceQueues[name].MetricApproximateAgeOfOldestMessage(opts("Maximum", five)),
			SourceQueueAgeAlarmSeconds, atLeast, 2, notBreaching)
	}
	for _, name := range slices.Sorted(maps.Keys(props.Functions)) {
		fn := props.Functions[name]
		alarm("Throttles"+title(name),
			"The "+name+" function was throttled 5 or more times in 5 minutes: its reserved concurrency is too low for its load (maestro:"+name+"ReservedConcurrency).",
			fn.Function.MetricThrottles(opts("Sum", five)),
			FunctionThrottlesAlarm, atLeast, 1, notBreaching)
		alarm("Duration"+title(name),
			"An invocation of the "+name+" function ran 80 % of its timeout or longer in two 5-minute periods in a row: it is close to timing out.",
			fn.Function.MetricDuration(opts("Maximum", five)),
			math.Floor(fn.TimeoutSeconds*1000*FunctionDurationAlarmPercent/100), atLeast, 2, notBreaching)
	}
	if fn := props.Functions[FunctionTimeTrigger]; fn != nil {
		alarm("TimeTriggerSilent",
			"The time-trigger function was not invoked for 5 minutes: the schedule is disabled, deleted or cannot invoke it; no cron trigger fires.",
			fn.Function.MetricInvocations(opts("Sum", awscdk.Duration_Minutes(jsii.Number(TimeTriggerSilenceMinutes)))),
			1, below, 1, awscloudwatch.TreatMissingData_BREACHING)
	}
	if props.RestAPI != nil {
		alarm("ApiLatencyP99",
			"The REST API's p99 latency has been 3 s or more for 15 minutes: read the API function's logs and the database alarms.",
			props.RestAPI.MetricLatency(opts("p99", five)),
			APILatencyP99AlarmMs, atLeast, 3, notBreaching)
	}
	alarm("EngineNotReady",
		"An engine task has reported itself not ready (database unreachable, lease rounds failing, or no flow group while some are free) for 5 minutes. ECS does not replace it for this (its liveness check asks only the process); see its log.",
		EngineMetric(ns, metrics.Ready, "Minimum", minute),
		1, below, EngineNotReadyMinutes, notBreaching)
	if props.EngineBacklogSeconds > 0 {
		alarm("EngineBacklog",
			"The outbox's oldest due message has been older than maestro:engineScaleQueueAgeSeconds for 5 minutes: the engines fall behind (docs/scaling.md).",
			EngineMetric(ns, metrics.QueueAge, "Maximum", minute),
			float64(props.EngineBacklogSeconds), atLeast, EngineBacklogMinutes, notBreaching)
	}
}
