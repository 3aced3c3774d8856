package e2e_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// triggerLagThreshold is the TriggerLag alarm's threshold in seconds
// (infra.TriggerLagThresholdSeconds).
const triggerLagThreshold = 60

// scenarioTimeTrigger: a workflow with a cron trigger is pushed through the
// API; at the next whole minute the stack's EventBridge Scheduler schedule
// (one invocation at each minute's start; the emulator looks every 10 s)
// invokes the time-trigger Lambda, which starts the run from the database;
// the engine runs it. The function wrote its TriggerLag, under the name and
// dimension the deployed TriggerLag alarm reads, below the alarm's
// threshold.
func scenarioTimeTrigger(t *testing.T, d *Deployment) {
	id := uniqueID("cron")
	d.push(t, twoSteps(id, map[string]any{"time_triggers": []any{map[string]any{"cron": "* * * * *"}}}))
	pushed := time.Now()

	// Due within a minute; the schedule's first tick after that fires it.
	run := d.waitForRun(t, id, "SUCCEEDED", 4*time.Minute)
	if run.InitiatorType != "TIME" {
		t.Errorf("initiator %q, want TIME (started by the trigger)", run.InitiatorType)
	}
	d.checkStepsSucceeded(t, id, 2)
	t.Logf("the trigger's run succeeded %s after the push", time.Since(pushed).Round(time.Second))

	lags := d.emitted(t, stackTriggers, "TimeTrigger", metrics.TriggerLag, time.Minute)
	for _, m := range lags {
		if m.Unit != metrics.UnitSeconds || len(m.Values) != 1 || m.Values[0] < 0 || m.Values[0] >= triggerLagThreshold {
			t.Errorf("TriggerLag %+v: want seconds, under the alarm's %d", m, triggerLagThreshold)
		}
	}
	t.Logf("TriggerLag written: %+v", lags)
	alarm := d.alarmedAs(t, lags[0])
	if aws.ToFloat64(alarm.Threshold) != triggerLagThreshold || alarm.ComparisonOperator != "GreaterThanThreshold" {
		t.Errorf("the TriggerLag alarm: threshold %v %s", aws.ToFloat64(alarm.Threshold), alarm.ComparisonOperator)
	}
}
