package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Our own copy of the shape of Maestro's sample-time-trigger-wf.json: a
// Quartz cron, a predefined schedule in another zone and a Unix cron with a
// fuzzy delay, on a small DAG.
const sampleTimeTriggerWorkflow = `{
  "properties": {"owner": "tester", "run_strategy": "sequential", "step_concurrency": 20},
  "workflow": {
    "time_triggers": [
      {"cron": "0 0 12 1/1 * ? *", "timezone": "US/Pacific", "type": "CRON"},
      {"expression": "@daily", "timezone": "Asia/Tokyo", "type": "PREDEFINED"},
      {"cron": "*/2 * * * *", "timezone": "US/Pacific", "fuzzy_max_delay": "30s", "type": "CRON"}
    ],
    "id": "triggered-dag",
    "name": "A workflow its time triggers start",
    "steps": [
      {"step": {"id": "extract", "type": "NoOp", "transition": {"successors": {"load": "true", "audit": "true"}}}},
      {"step": {"id": "audit", "type": "NoOp", "transition": {"successors": {"load": "true"}}}},
      {"step": {"id": "load", "type": "NoOp", "transition": {}}}
    ]
  }
}`

// Maestro's time trigger sample is accepted unchanged, its triggers are
// readable with their next fire times, and they follow the workflow's
// activation and properties.
func TestTimeTriggersOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "tester", sampleTimeTriggerWorkflow).expect(t, http.StatusOK)
	r := e.send(http.MethodGet, "/api/v3/workflows/triggered-dag/time-triggers", "", "").expect(t, http.StatusOK)
	ts := r.body["time_triggers"].([]any)
	if len(ts) != 3 {
		t.Fatalf("%d triggers: %s", len(ts), r.raw)
	}
	zones := []string{"US/Pacific", "Asia/Tokyo", "US/Pacific"}
	uuid := ts[0].(map[string]any)["trigger_uuid"]
	for i, x := range ts {
		tr := x.(map[string]any)
		if tr["state"] != "ACTIVE" || tr["next_fire_time"] == nil || tr["timezone"] != zones[i] || tr["trigger_uuid"] != uuid ||
			tr["workflow_version_id"] != float64(1) || tr["trigger_index"] != float64(i) {
			t.Errorf("trigger %d: %v", i, tr)
		}
	}
	if d := ts[2].(map[string]any)["fuzzy_delay_seconds"].(float64); d < 0 || d >= 30 {
		t.Errorf("fuzzy delay %v outside [0, 30)", d)
	}
	e.send(http.MethodGet, "/api/v3/workflows/nope/time-triggers", "", "").expect(t, http.StatusNotFound)

	e.send(http.MethodPost, "/api/v3/workflows/triggered-dag/properties", "tester", `{"time_trigger_disabled": true}`).expect(t, http.StatusOK)
	r = e.send(http.MethodGet, "/api/v3/workflows/triggered-dag/time-triggers", "", "").expect(t, http.StatusOK)
	if st := r.get(t, "time_triggers").([]any)[0].(map[string]any)["state"]; st != "DISABLED" {
		t.Errorf("after time_trigger_disabled: %s", r.raw)
	}
	e.send(http.MethodPut, "/api/v3/workflows/triggered-dag/actions/deactivate", "tester", "").expect(t, http.StatusOK)
	r = e.send(http.MethodGet, "/api/v3/workflows/triggered-dag/time-triggers", "", "").expect(t, http.StatusOK)
	if n := len(r.body["time_triggers"].([]any)); n != 0 {
		t.Errorf("an inactive workflow has %d triggers", n)
	}
}

// A trigger the scheduler cannot honour is refused at push with a 400
// naming the trigger and the cron field.
func TestUnhonourableTriggerIsRefused(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send(http.MethodPost, "/api/v3/workflows", "tester", `{"workflow":{"id":"bad","time_triggers":[
		{"cron":"0 0 12 * * ?"},{"cron":"0 0 12 ? * 6#6","timezone":"UTC"}],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).
		expect(t, http.StatusBadRequest)
	want := `workflow.time_triggers[1].cron: invalid cron expression "0 0 12 ? * 6#6": day-of-week field "6#6": the occurrence after '#' must be 1 to 5`
	if r.errorsText() != want {
		t.Errorf("errors %q, want %q", r.errorsText(), want)
	}
	if n := e.count(`SELECT count(*) FROM workflow`); n != 0 {
		t.Errorf("a refused push left %d workflows", n)
	}
}

func TestPreviewFireTimes(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send(http.MethodPost, "/api/v3/time-triggers/preview", "", `{"time_trigger":{"cron":"0 0 12 1/1 * ? *",
		"timezone":"US/Pacific","type":"CRON"},"after":"2024-03-09T00:00:00Z","count":3}`).expect(t, http.StatusOK)
	got := fmt.Sprint(r.body["fire_times"])
	if got != "[2024-03-09T12:00:00-08:00 2024-03-10T12:00:00-07:00 2024-03-11T12:00:00-07:00]" {
		t.Errorf("fire times %s", got)
	}
	if r.body["timezone"] != "US/Pacific" || r.body["trigger_key"] != "CronTimeTrigger(cron=0 0 12 1/1 * ? *, timezone=US/Pacific)" {
		t.Errorf("preview %s", r.raw)
	}
	// The default count, a predefined schedule, a fuzzy delay salted with
	// the workflow id: every time is the schedule plus the same delay.
	r = e.send(http.MethodPost, "/api/v3/time-triggers/preview", "", `{"time_trigger":{"type":"PREDEFINED","expression":"@hourly",
		"fuzzy_max_delay":"10 min"},"after":"2024-01-01T00:00:00Z","workflow_id":"wf"}`).expect(t, http.StatusOK)
	times := r.body["fire_times"].([]any)
	d := int(r.num(t, "fuzzy_delay_seconds"))
	if len(times) != 10 || times[1] != fmt.Sprintf("2024-01-01T01:%02d:%02dZ", d/60, d%60) {
		t.Errorf("hourly with delay %d s: %v", d, times)
	}

	for name, c := range map[string]struct{ body, errs string }{
		"no trigger":        {`{"count":2}`, ""},
		"bad quartz":        {`{"time_trigger":{"cron":"0 0 12 ? * 6#6"}}`, `time_trigger.cron: invalid cron expression "0 0 12 ? * 6#6": day-of-week field "6#6"`},
		"unknown field":     {`{"time_trigger":{"cron":"* * * * *","tz":"UTC"}}`, "time_trigger.tz: unknown field"},
		"bad zone":          {`{"time_trigger":{"cron":"* * * * *","timezone":"Mars/Base"}}`, `time_trigger.timezone: unknown time zone "Mars/Base"`},
		"too often":         {`{"time_trigger":{"cron":"*/10 * * * * ?"}}`, "time_trigger.cron: fires more often than once a minute"},
		"count 0":           {`{"time_trigger":{"cron":"* * * * *"},"count":0}`, ""},
		"count 101":         {`{"time_trigger":{"cron":"* * * * *"},"count":101}`, ""},
		"bad after":         {`{"time_trigger":{"cron":"* * * * *"},"after":"yesterday"}`, ""},
		"array trigger":     {`{"time_trigger":[{"cron":"* * * * *"}]}`, ""},
		"unknown in body":   {`{"time_trigger":{"cron":"* * * * *"},"n":1}`, ""},
		"not an object":     {`[]`, ""},
		"interval, no zone": {`{"time_trigger":{"type":"INTERVAL","interval":"2h","timezone":"UTC"}}`, "time_trigger.timezone: not allowed for INTERVAL triggers"},
	} {
		r := e.send(http.MethodPost, "/api/v3/time-triggers/preview", "", c.body)
		if r.code != http.StatusBadRequest || !strings.Contains(r.errorsText(), c.errs) {
			t.Errorf("%s: %d %s, want 400 with %q", name, r.code, r.raw, c.errs)
		}
	}
}
