package alert_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/alert"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

type env struct{ *flowtest.Env }

func newEnv(t *testing.T) *env { return &env{flowtest.New(t)} }

func (e *env) alerts(timers time.Duration) *alert.Service {
	e.T.Helper()
	s, err := alert.New(e.Pool, alert.Config{Logger: flowtest.Logger(), LinkBase: "http://maestro.test", PollInterval: 20 * time.Millisecond,
		TimerInterval: timers})
	if err != nil {
		e.T.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(s.Stop)
	return s
}

// alertsOf returns the alerts written for a workflow.
func (e *env) alertsOf(wf string) []event.AlertEvent {
	e.T.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT payload FROM maestro_event WHERE kind = 9 AND workflow_id = $1
        ORDER BY tx, event_id`, wf)
	if err != nil {
		e.T.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (event.AlertEvent, error) {
		var a event.AlertEvent
		var b []byte
		if err := r.Scan(&b); err != nil {
			return a, err
		}
		return a, json.Unmarshal(b, &a)
	})
	if err != nil {
		e.T.Fatal(err)
	}
	return out
}

// caughtUp waits until the alerting service has read every event.
func (e *env) caughtUp() {
	e.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var behind bool
		// Behind until the service has made its cursor (it does so in its
		// own goroutine) and moved it past every event but its own alerts.
		err := e.Pool.QueryRow(context.Background(), `SELECT NOT EXISTS (SELECT 1 FROM maestro_event_cursor WHERE name = $1)
            OR EXISTS (SELECT 1 FROM maestro_event e, maestro_event_cursor c
            WHERE c.name = $1 AND (e.tx, e.event_id) > (c.tx, c.event_id) AND e.kind <> 9)`, alert.Reader).Scan(&behind)
		if err != nil {
			e.T.Fatal(err)
		}
		if !behind {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatal("the alerting service did not catch up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func types(as []event.AlertEvent) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.AlertType)
	}
	return out
}

// A run whose steps fail (two of them, one after a retry) gets exactly one
// STEP_FAILURE alert, with the recipients, the run's link and the reason;
// another failing run gets its own; a workflow with alerting_disabled, or
// without an alerting block, gets none.
func TestFailingStepRaisesOneAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Engine(nil, flow.Config{})
	e.alerts(50 * time.Millisecond)
	const steps = `"steps":[
		{"step":{"id":"a","type":"Fail","retry_policy":{"error_retry_limit":1,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":0}}}},
		{"step":{"id":"b","type":"Fail","retry_policy":{"error_retry_limit":0}}}]`
	e.PushAs(`{"properties":{"owner":"tester","run_strategy":"PARALLEL","alerting":{"emails":["oncall@example.com"],
		"slack":{"channels":["#data"]},"type_configs":{"STEP_FAILURE":{"pagerduties":["data-pager"],"actions":["email","page"]}}}},
		"workflow":{"id":"alerted",`+steps+`}}`, "tester")

	e.PushAs(`{"properties":{"owner":"tester","alerting":{"emails":["x@example.com"]},"alerting_disabled":true},
		"workflow":{"id":"muted",`+steps+`}}`, "tester")

	e.PushAs(`{"workflow":{"id":"plain",`+steps+`}}`, "tester")
	runs := []*execution.Instance{e.Start("alerted"), e.Start("alerted"), e.Start("muted"), e.Start("plain")}
	for _, r := range runs {
		if got := e.Wait(r, time.Minute); got.Status != instance.WorkflowFailed {
			t.Fatalf("run ended %s", got.Status)
		}
	}
	e.caughtUp()
	as := e.alertsOf("alerted")
	if len(as) != 2 || as[0].WorkflowInstanceID == as[1].WorkflowInstanceID {
		t.Fatalf("alerts %+v, want one STEP_FAILURE per run", as)
	}
	a := as[0]
	if a.AlertType != "STEP_FAILURE" || a.Status != "FATALLY_FAILED" || a.WorkflowUUID == "" || a.StepID == "" ||
		!strings.Contains(a.Reason, flowtest.FailMessage) ||
		a.Link != fmt.Sprintf("http://maestro.test/api/v3/workflows/alerted/instances/%d/runs/1", a.WorkflowInstanceID) ||
		!slices.Equal(a.Recipients.Emails, []string{"oncall@example.com"}) || !slices.Equal(a.Recipients.Pagerduties, []string{"data-pager"}) ||
		a.Recipients.Slack == nil || a.Recipients.Slack.Channels[0] != "#data" || !slices.Equal(a.Actions, []string{"email", "page"}) {
		t.Errorf("alert %+v", a)
	}
	if n := len(e.alertsOf("muted")) + len(e.alertsOf("plain")); n != 0 {
		t.Errorf("%d alerts for workflows with alerting disabled or not configured", n)
	}
}

// A run still running past its TCT gets exactly one TCT_VIOLATION alert,
// and with the cancel action it is stopped; a run that completes in time
// gets none; a run that ended after its TCT before the timer fired gets
// one from its end event.
func TestTctViolationRaisesOneAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Engine(nil, flow.Config{})
	due := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	e.PushAs(fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":"PARALLEL","alerting":{"emails":["oncall@example.com"],
		"tct":{"completed_by_ts":%d},"type_configs":{"TCT_VIOLATION":{"actions":["email","cancel"]}}}},
		"workflow":{"id":"late","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`, due), "tester")

	e.PushAs(fmt.Sprintf(`{"properties":{"owner":"tester","alerting":{"tct":{"completed_by_ts":%d}}},
		"workflow":{"id":"quick","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, due), "tester")

	e.alerts(50 * time.Millisecond)
	late, quick := e.Start("late"), e.Start("quick")
	e.Wait(quick, time.Minute)
	got := e.Wait(late, time.Minute) // stopped by the cancel action
	if got.Status != instance.WorkflowStopped || time.Now().UnixMilli() < due {
		t.Fatalf("late run ended %s before its TCT passed", got.Status)
	}
	e.caughtUp()
	time.Sleep(200 * time.Millisecond) // timers fire every 50 ms: none may fire twice
	as := e.alertsOf("late")
	if len(as) != 1 || as[0].AlertType != "TCT_VIOLATION" || as[0].Status != "IN_PROGRESS" ||
		!strings.Contains(as[0].Reason, "target completion time") {
		t.Fatalf("alerts of the late run: %+v", as)
	}
	if as := e.alertsOf("quick"); len(as) != 0 {
		t.Errorf("alerts of the quick run: %+v", as)
	}
}

// A run that ends after its TCT while no timer fired (the timers were not
// looked at) is alerted from its end event.
func TestTctViolationAtTheEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Engine(nil, flow.Config{})
	e.PushAs(fmt.Sprintf(`{"properties":{"owner":"tester","alerting":{"tct":{"completed_by_ts":%d}}},
		"workflow":{"id":"slowish","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":1}}]}}`,
		time.Now().Add(300*time.Millisecond).UnixMilli()), "tester")

	e.alerts(time.Hour) // the first look at the timers is before any exists
	e.Wait(e.Start("slowish"), time.Minute)
	e.caughtUp()
	as := e.alertsOf("slowish")
	if len(as) != 1 || as[0].AlertType != "TCT_VIOLATION" || as[0].Status != "SUCCEEDED" {
		t.Fatalf("alerts %+v, want one TCT_VIOLATION raised at the end", as)
	}
}

// The other alert types: BREAKPOINT_HIT, RUN_SUCCESS, DEFINITION_CHANGE,
// LONG_RUNNING (its timer moved due), DEPENDENCY_LATE and SUCCESS_WITHIN
// are raised when configured, each once per run (or per change).
func TestConfiguredAlertTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.PushAs(`{"properties":{"owner":"tester","run_strategy":"PARALLEL","alerting":{"emails":["o@example.com"],"type_configs":{
		"BREAKPOINT_HIT":{},"RUN_SUCCESS":{},"DEFINITION_CHANGE":{},"LONG_RUNNING":{"duration_minutes":5},
		"SUCCESS_WITHIN":{"duration_minutes":60}}}},
		"workflow":{"id":"many","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, "tester")

	if _, err := e.Pool.Exec(ctx, `INSERT INTO step_breakpoint (workflow_id, step_id, instance_id) VALUES ('many', 's', 2)`); err != nil {
		t.Fatal(err)
	}
	e.Engine(nil, flow.Config{})
	e.alerts(50 * time.Millisecond)
	ok := e.Start("many")
	paused := e.Start("many")
	e.Wait(ok, time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(types(e.alertsOf("many")), "BREAKPOINT_HIT") {
		if time.Now().After(deadline) {
			t.Fatalf("no BREAKPOINT_HIT: %v", types(e.alertsOf("many")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The paused run's LONG_RUNNING timer is armed five minutes out; make
	// it due now.
	if _, err := e.Pool.Exec(ctx, `UPDATE maestro_alert_timer SET due_at = now() WHERE alert_type = 'LONG_RUNNING' AND instance_id = $1`,
		paused.InstanceID); err != nil {
		t.Fatal(err)
	}
	for !slices.Contains(types(e.alertsOf("many")), "LONG_RUNNING") {
		if time.Now().After(deadline) {
			t.Fatalf("no LONG_RUNNING: %v", types(e.alertsOf("many")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// SUCCESS_WITHIN was re-armed by the success, an hour out; make it due
	// now, with the success older than the hour.
	e.caughtUp()
	if _, err := e.Pool.Exec(ctx, `UPDATE workflow_instance SET end_time = now() - interval '2 hours' WHERE workflow_id = 'many'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE maestro_alert_timer SET due_at = now() WHERE alert_type = 'SUCCESS_WITHIN'`); err != nil {
		t.Fatal(err)
	}
	for !slices.Contains(types(e.alertsOf("many")), "SUCCESS_WITHIN") {
		if time.Now().After(deadline) {
			t.Fatalf("no SUCCESS_WITHIN: %v", types(e.alertsOf("many")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.caughtUp()
	time.Sleep(150 * time.Millisecond)
	got := types(e.alertsOf("many"))
	slices.Sort(got)
	want := []string{"BREAKPOINT_HIT", "DEFINITION_CHANGE", "LONG_RUNNING", "RUN_SUCCESS", "SUCCESS_WITHIN"}
	if !slices.Equal(got, want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
}

// The TCT's deadline: completed_by_hour counts from the run's date in the
// TCT's time zone (TARGET_RUN_DATE when the run has one), duration_minutes
// from RUN_TS, completed_by_ts is absolute.
func TestDeadline(t *testing.T) {
	runTS := time.Date(2024, 3, 10, 23, 30, 0, 0, time.UTC) // already March 11 in Tokyo
	vals := func(extra map[string]any) map[string]any {
		m := map[string]any{"RUN_TS": map[string]any{"type": "LONG", "value": runTS.UnixMilli()}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		tct  workflow.Tct
		vals map[string]any
		want time.Time
	}{
		{"hour in UTC", workflow.Tct{CompletedByHour: i(6)}, vals(nil), time.Date(2024, 3, 10, 5, 59, 59, 0, time.UTC)},
		{"hour in the TCT's zone", workflow.Tct{CompletedByHour: i(6), Tz: "Asia/Tokyo"}, vals(nil),
			time.Date(2024, 3, 11, 5, 59, 59, 0, mustLoc(t, "Asia/Tokyo"))},
		// Hours are elapsed time, as Joda's plusHours: the night of March 10
		// is an hour short in New York.
		{"hour in the first trigger's zone", workflow.Tct{CompletedByHour: i(30)},
			vals(map[string]any{"FIRST_TIME_TRIGGER_TIMEZONE": map[string]any{"type": "STRING", "value": "America/New_York"}}),
			time.Date(2024, 3, 11, 6, 59, 59, 0, mustLoc(t, "America/New_York"))},
		{"hour of the target run date", workflow.Tct{CompletedByHour: i(2)},
			vals(map[string]any{"TARGET_RUN_DATE": map[string]any{"type": "STRING", "value": "20240301"}}),
			time.Date(2024, 3, 1, 1, 59, 59, 0, time.UTC)},
		{"duration", workflow.Tct{DurationMinutes: i(90)}, vals(nil), runTS.Add(90 * time.Minute)},
		{"timestamp", workflow.Tct{CompletedByTs: i(1700000000000)}, vals(nil), time.UnixMilli(1700000000000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.vals)
			var v params.Values
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			got, err := alert.Deadline(&tt.tct, v, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("deadline %s, want %s", got, tt.want)
			}
		})
	}
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
