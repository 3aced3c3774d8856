package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Announcing and reading signals: Maestro's SignalInstance for a new
// instance and for a repeated request id (the stored one, "duplicated"),
// the newest instance by name, one by seq id, and a JSON 400 for every
// malformed announcement.
func TestSignalsOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	first := e.send(http.MethodPost, "/api/v3/signals", "alice",
		`{"name":"table_updated","params":{"db":"sales","watermark":9007199254740993},"payload":{"rows":3},"request_id":"r-1",
		  "request_time":1234567,"extra":{"source":{"id":"test-id"}}}`).
		expect(t, http.StatusOK)
	if first.body["duplicated"] != nil || first.num(t, "request_time") != 1234567 || first.body["instance_id"] == nil ||
		first.get(t, "payload.extra.source.id") != "test-id" || first.get(t, "payload.rows") != float64(3) {
		t.Fatalf("announce answered %s", first.raw)
	}
	// The LONG keeps every digit.
	if !strings.Contains(string(first.raw), `"watermark":9007199254740993`) {
		t.Errorf("watermark lost precision: %s", first.raw)
	}
	seq := first.num(t, "seq_id")
	dup := e.send(http.MethodPost, "/api/v3/signals", "alice", `{"name":"table_updated","params":{"db":"ads"},"request_id":"r-1"}`).
		expect(t, http.StatusOK)
	if dup.body["duplicated"] != true || dup.num(t, "seq_id") != seq || dup.get(t, "params.db") != "sales" ||
		dup.body["instance_id"] != first.body["instance_id"] {
		t.Fatalf("repeat answered %s", dup.raw)
	}
	second := e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"table_updated"}`).expect(t, http.StatusOK)
	latest := e.send(http.MethodGet, "/api/v3/signals/table_updated/instances/latest", "", "").expect(t, http.StatusOK)
	if latest.num(t, "seq_id") != second.num(t, "seq_id") {
		t.Errorf("latest %s, want %s", latest.raw, second.raw)
	}
	got := e.send(http.MethodGet, "/api/v3/signals/table_updated/instances/"+strconv.FormatInt(seq, 10), "", "").expect(t, http.StatusOK)
	if got.body["request_id"] != "r-1" || got.get(t, "payload.rows") != float64(3) {
		t.Errorf("instance %s", got.raw)
	}
	e.send(http.MethodGet, "/api/v3/signals/other/instances/latest", "", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/signals/other/instances/"+strconv.FormatInt(seq, 10), "", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/signals/table_updated/instances/0", "", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodGet, "/api/v3/signals/table_updated/instances/x", "", "").expect(t, http.StatusBadRequest)

	// As in Maestro: fields other than the request's join the payload, and
	// the same name and params without a request id are one signal.
	extra := e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"s","params":{"a":1},"extra":{"source":"x"},"request_time":1700000000000}`).
		expect(t, http.StatusOK)
	if extra.get(t, "payload.extra.source") != "x" || extra.num(t, "request_time") != 1700000000000 {
		t.Errorf("extra fields: %s", extra.raw)
	}
	again := e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"s","params":{"a":1}}`).expect(t, http.StatusOK)
	if again.body["duplicated"] != true || again.num(t, "seq_id") != extra.num(t, "seq_id") {
		t.Errorf("same name and params: %s", again.raw)
	}

	for name, body := range map[string]string{
		"empty body":        ``,
		"malformed":         `{"name":`,
		"not an object":     `[]`,
		"no name":           `{"params":{"a":1}}`,
		"blank name":        `{"name":"  "}`,
		"nul in name":       `{"name":"a\u0000b"}`,
		"fraction param":    `{"name":"s","params":{"a":1.5}}`,
		"bool param":        `{"name":"s","params":{"a":true}}`,
		"object param":      `{"name":"s","params":{"a":{}}}`,
		"null param":        `{"name":"s","params":{"a":null}}`,
		"huge param":        `{"name":"s","params":{"a":1e400}}`,
		"params not object": `{"name":"s","params":[1]}`,
		"payload array":     `{"name":"s","payload":[1]}`,
		"payload string":    `{"name":"s","payload":"x"}`,
		"nul in payload":    `{"name":"s","payload":{"a":"\u0000"}}`,
		"nul in param":      `{"name":"s","params":{"a":"\u0000"}}`,
		"long request id":   `{"name":"s","request_id":"` + strings.Repeat("r", 300) + `"}`,
	} {
		if r := e.send(http.MethodPost, "/api/v3/signals", "", body); r.code != http.StatusBadRequest {
			t.Errorf("%s: got %d %s, want 400", name, r.code, r.raw)
		}
	}
}

// A step waiting for a signal over REST: bypass is a 400 (Maestro's
// invalid status) before the step waits and after it ran, accepted while
// it waits; the signal endpoint wakes another run's step.
func TestSignalDependencyOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice","run_strategy":"PARALLEL"},
		"workflow":{"id":"gated","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":60,"transition":{"successors":{"gate":"true"}}}},
		{"step":{"id":"gate","type":"NoOp","signal_dependencies":[{"name":"go","match_params":{
			"n":{"param":{"type":"LONG","value":1},"operator":"="}}}]}}]}}`).expect(t, http.StatusOK)
	start := "/api/v3/workflows/gated/versions/latest/actions/start"
	e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusOK)
	e.waitStepStatus("/api/v3/workflows/gated/instances/1/runs/1/steps", "nap", "RUNNING")
	// Maestro's bypass (PUT, the latest run) and this API's run-scoped one.
	bypass := "/api/v3/workflows/gated/instances/1/steps/%s/actions/bypass"
	runBypass := "/api/v3/workflows/gated/instances/1/runs/latest/steps/%s/actions/bypass-dependencies"
	c := e.send(http.MethodPut, strings.Replace(bypass, "%s", "nap", 1), "alice", "").expect(t, http.StatusBadRequest)
	if c.body["status"] != "BAD_REQUEST" || !strings.Contains(c.body["message"].(string), "RUNNING") {
		t.Errorf("bypass of a RUNNING step: %s", c.raw)
	}
	e.send(http.MethodPut, strings.Replace(bypass, "%s", "gate", 1), "alice", "").expect(t, http.StatusNotFound) // no attempt yet
	e.send(http.MethodPut, "/api/v3/workflows/gated/instances/1/steps/nap/actions/skip", "alice", "").expect(t, http.StatusOK)
	e.waitStepStatus("/api/v3/workflows/gated/instances/1/runs/1/steps", "gate", "WAITING_FOR_SIGNALS")
	e.send(http.MethodPut, strings.Replace(bypass, "%s", "gate", 1), "carol", "").expect(t, http.StatusForbidden)
	r := e.send(http.MethodPost, strings.Replace(runBypass, "%s", "gate", 1), admin, "").expect(t, http.StatusOK)
	if r.get(t, "timeline_event.message") != "User ["+admin+"] take action [BYPASS_STEP_DEPENDENCIES] on the step" ||
		r.num(t, "step_attempt_id") != 1 {
		t.Errorf("bypass answered %s", r.raw)
	}
	if got := e.waitTerminal("/api/v3/workflows/gated/instances/1"); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run %s", got.raw)
	}
	a := e.send(http.MethodGet, "/api/v3/workflows/gated/instances/1/runs/1/steps/gate/attempts/latest", "", "").expect(t, http.StatusOK)
	if !strings.Contains(string(a.raw), "signal dependencies bypassed by "+admin) {
		t.Errorf("timeline lacks the bypass: %s", a.raw)
	}
	e.send(http.MethodPut, strings.Replace(bypass, "%s", "gate", 1), admin, "").expect(t, http.StatusBadRequest)

	// Run 2 waits for the signal.
	e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusOK)
	e.waitStepStatus("/api/v3/workflows/gated/instances/2/runs/1/steps", "nap", "RUNNING")
	e.send(http.MethodPost, "/api/v3/workflows/gated/instances/2/runs/1/steps/nap/actions/skip", "alice", "").expect(t, http.StatusOK)
	e.waitStepStatus("/api/v3/workflows/gated/instances/2/runs/1/steps", "gate", "WAITING_FOR_SIGNALS")
	e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"go","params":{"n":2}}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"go","params":{"n":1}}`).expect(t, http.StatusOK)
	if got := e.waitTerminal("/api/v3/workflows/gated/instances/2"); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run %s", got.raw)
	}
}

// An Iceberg commit announced over REST as a table_change message: one
// table-change signal per (table, snapshot), a repeat is the stored one,
// and a message missing what a change needs is a JSON 400.
func TestTableChangeOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	body := `{"table_change": {"catalog": "arn:aws:s3tables:us-east-1:111122223333:bucket/wh", "namespace": "sales",
	  "table": "orders", "snapshot_id": 8744736658442914487, "parent_snapshot_id": 3051729675574597004,
	  "commit_time": "2026-05-01T03:10:00Z", "operation": "append"}}`
	first := e.send(http.MethodPost, "/api/v3/signals/messages", "alice", body).expect(t, http.StatusOK)
	for _, want := range []string{`"name":"arn:aws:s3tables:us-east-1:111122223333:bucket/wh/sales.orders"`,
		`"snapshot_id":8744736658442914487`, `"parent_snapshot_id":3051729675574597004`, `"commit_time":1777605000000`,
		`"operation":"append"`, `"table":"arn:aws:s3tables:us-east-1:111122223333:bucket/wh/sales.orders"`} {
		if !strings.Contains(string(first.raw), want) {
			t.Errorf("announce answered %s, want %s in it", first.raw, want)
		}
	}
	again := e.send(http.MethodPost, "/api/v3/signals/messages", "alice", body).expect(t, http.StatusOK)
	if !strings.Contains(string(again.raw), `"duplicated":true`) {
		t.Errorf("the same commit again: %s", again.raw)
	}
	for _, bad := range []string{
		`{"table_change": {"namespace": "sales", "table": "orders", "commit_time": 1, "operation": "append"}}`,
		`{"table_change": {"namespace": "sales", "table": "orders", "snapshot_id": 1, "commit_time": 1, "operation": "merge"}}`,
		`{"table_change": {"table": "orders", "snapshot_id": 1, "commit_time": 1, "operation": "append"}}`,
	} {
		if r := e.send(http.MethodPost, "/api/v3/signals/messages", "alice", bad); r.code != http.StatusBadRequest || !strings.Contains(string(r.raw), "table change") {
			t.Errorf("%s: got %d %s, want a 400 naming the table change", bad, r.code, r.raw)
		}
	}
}
