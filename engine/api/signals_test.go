package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Announcing and reading signals: 201 for a new instance, 200 for a repeated
// request id, the newest instance by name, one by seq id, and a JSON 400 for
// every malformed announcement.
func TestSignalsOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	first := e.send(http.MethodPost, "/api/v3/signals", "alice",
		`{"name":"table_updated","params":{"db":"sales","watermark":9007199254740993},"payload":{"rows":3},"request_id":"r-1"}`).
		expect(t, http.StatusCreated)
	if first.body["status"] != "CREATED" {
		t.Fatalf("announce answered %s", first.raw)
	}
	// The LONG keeps every digit.
	if !strings.Contains(string(first.raw), `"watermark":9007199254740993`) {
		t.Errorf("watermark lost precision: %s", first.raw)
	}
	seq := first.num(t, "signal_instance.seq_id")
	dup := e.send(http.MethodPost, "/api/v3/signals", "alice", `{"name":"table_updated","params":{"db":"ads"},"request_id":"r-1"}`).
		expect(t, http.StatusOK)
	if dup.body["status"] != "DUPLICATED" || dup.num(t, "signal_instance.seq_id") != seq || dup.get(t, "signal_instance.params.db") != "sales" {
		t.Fatalf("repeat answered %s", dup.raw)
	}
	second := e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"table_updated"}`).expect(t, http.StatusCreated)
	latest := e.send(http.MethodGet, "/api/v3/signals/table_updated/instances/latest", "", "").expect(t, http.StatusOK)
	if latest.num(t, "seq_id") != second.num(t, "signal_instance.seq_id") {
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
		expect(t, http.StatusCreated)
	if extra.get(t, "signal_instance.payload.extra.source") != "x" || extra.get(t, "signal_instance.request_time") != "2023-11-14T22:13:20Z" {
		t.Errorf("extra fields: %s", extra.raw)
	}
	again := e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"s","params":{"a":1}}`).expect(t, http.StatusOK)
	if again.body["status"] != "DUPLICATED" || again.num(t, "signal_instance.seq_id") != extra.num(t, "signal_instance.seq_id") {
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

// A step waiting for a signal over REST: bypass-dependencies is a 409
// before the step waits and after it ran, a 202 while it waits; the
// signal endpoint wakes another run's step.
func TestSignalDependencyOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice","run_strategy":"PARALLEL"},
		"workflow":{"id":"gated","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":60,"transition":{"successors":{"gate":"true"}}}},
		{"step":{"id":"gate","type":"NoOp","signal_dependencies":[{"name":"go","match_params":{
			"n":{"param":{"type":"LONG","value":1},"operator":"="}}}]}}]}}`).expect(t, http.StatusCreated)
	start := "/api/v3/workflows/gated/versions/latest/actions/start"
	e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusCreated)
	e.waitStepStatus("/api/v3/workflows/gated/instances/1/runs/1/steps", "nap", "RUNNING")
	bypass := "/api/v3/workflows/gated/instances/1/runs/latest/steps/%s/actions/bypass-dependencies"
	c := e.send(http.MethodPost, strings.Replace(bypass, "%s", "nap", 1), "alice", "").expect(t, http.StatusConflict)
	if c.body["status"] != "CONFLICT" || !strings.Contains(c.body["message"].(string), "RUNNING") {
		t.Errorf("bypass of a RUNNING step: %s", c.raw)
	}
	e.send(http.MethodPost, strings.Replace(bypass, "%s", "gate", 1), "alice", "").expect(t, http.StatusNotFound) // no attempt yet
	e.send(http.MethodPost, "/api/v3/workflows/gated/instances/1/runs/1/steps/nap/actions/skip", "alice", "").expect(t, http.StatusAccepted)
	e.waitStepStatus("/api/v3/workflows/gated/instances/1/runs/1/steps", "gate", "WAITING_FOR_SIGNALS")
	e.send(http.MethodPost, strings.Replace(bypass, "%s", "gate", 1), "carol", "").expect(t, http.StatusForbidden)
	r := e.send(http.MethodPost, strings.Replace(bypass, "%s", "gate", 1), admin, "").expect(t, http.StatusAccepted)
	if r.body["status"] != "ACCEPTED" || r.body["action"] != "bypass-dependencies" {
		t.Errorf("bypass answered %s", r.raw)
	}
	if got := e.waitTerminal("/api/v3/workflows/gated/instances/1"); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run %s", got.raw)
	}
	a := e.send(http.MethodGet, "/api/v3/workflows/gated/instances/1/runs/1/steps/gate/attempts/latest", "", "").expect(t, http.StatusOK)
	if !strings.Contains(string(a.raw), "signal dependencies bypassed by "+admin) {
		t.Errorf("timeline lacks the bypass: %s", a.raw)
	}
	e.send(http.MethodPost, strings.Replace(bypass, "%s", "gate", 1), admin, "").expect(t, http.StatusConflict)

	// Run 2 waits for the signal.
	e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusCreated)
	e.waitStepStatus("/api/v3/workflows/gated/instances/2/runs/1/steps", "nap", "RUNNING")
	e.send(http.MethodPost, "/api/v3/workflows/gated/instances/2/runs/1/steps/nap/actions/skip", "alice", "").expect(t, http.StatusAccepted)
	e.waitStepStatus("/api/v3/workflows/gated/instances/2/runs/1/steps", "gate", "WAITING_FOR_SIGNALS")
	e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"go","params":{"n":2}}`).expect(t, http.StatusCreated)
	e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"go","params":{"n":1}}`).expect(t, http.StatusCreated)
	if got := e.waitTerminal("/api/v3/workflows/gated/instances/2"); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run %s", got.raw)
	}
}
