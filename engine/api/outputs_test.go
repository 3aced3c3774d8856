package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
)

// waitAttempt polls a step's latest attempt until its status is one of want.
func (e *testEnv) waitAttempt(path string, want ...string) response {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.send(http.MethodGet, path, "", "")
		if r.code == http.StatusOK {
			for _, w := range want {
				if stepStatus(r) == w {
					return r
				}
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: status %v, want one of %v", path, stepStatus(r), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stepStatus is the status of a step instance answer (its runtime_state's).
func stepStatus(r response) string {
	rs, _ := r.body["runtime_state"].(map[string]any)
	st, _ := rs["status"].(string)
	return st
}

func paramValue(t *testing.T, attempt response, name string) any {
	t.Helper()
	ps, ok := attempt.body["params"].(map[string]any)
	if !ok {
		t.Fatalf("attempt has no params: %s", attempt.raw)
	}
	p, ok := ps[name].(map[string]any)
	if !ok {
		t.Fatalf("attempt has no param %s: %s", name, attempt.raw)
	}
	return p["evaluated_result"]
}

func TestPutOutputData(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"workflow":{"id":"job","steps":[
	    {"step":{"id":"nap","type":"Sleep","sleep_seconds":2,"transition":{"successors":{"use":"true"}},
	      "params":{"result":{"type":"LONG","value":0}}}},
	    {"step":{"id":"use","type":"NoOp","params":{
	      "plus":{"type":"LONG","expression":"nap__result + 1"},
	      "where":{"type":"STRING","value":"at ${path@nap}"}}}}]}}`).expect(t, http.StatusOK)
	start := e.send(http.MethodPost, "/api/v3/workflows/job/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	iid := start.num(t, "workflow_instance_id")
	attemptPath := fmt.Sprintf("/api/v3/workflows/job/instances/%d/runs/1/steps/nap/attempts/latest", iid)
	running := e.waitAttempt(attemptPath, "RUNNING")
	uuid := paramValue(t, running, "step_instance_uuid").(string)

	token := e.stepToken(uuid)
	withToken := func(uuid, token, params string) string {
		return fmt.Sprintf(`{"workflow_id":"job","workflow_instance_id":%d,"workflow_run_id":1,"step_id":"nap","step_attempt_id":1,
		    "step_instance_uuid":%q,"step_token":%q,"params":%s}`, iid, uuid, token, params)
	}
	body := func(uuid, params string) string { return withToken(uuid, token, params) }
	// Refused: another attempt's credential, reserved or malformed params, an unknown attempt.
	e.send(http.MethodPut, "/api/v3/output-data", "", body("00000000-0000-0000-0000-000000000000", `{"result":{"type":"LONG","value":7}}`)).expect(t, http.StatusForbidden)
	// The uuid every reader sees is not enough (issue 27 N2): without the
	// attempt's step token, or with another attempt's, the call is refused
	// and writes nothing.
	for _, bad := range []string{"", e.stepToken("00000000-0000-0000-0000-000000000000"), token[:len(token)-1]} {
		refused := e.send(http.MethodPut, "/api/v3/output-data", "mallory", withToken(uuid, bad, `{"result":{"type":"LONG","value":1000000}}`)).expect(t, http.StatusForbidden)
		if !strings.Contains(string(refused.raw), "step token") {
			t.Errorf("refusal %s", refused.raw)
		}
	}
	bad := e.send(http.MethodPut, "/api/v3/output-data", "", body(uuid, `{"step_id":{"type":"STRING","value":"x"},"n":{"type":"LONG","value":"many"},"a__b":{"type":"STRING","value":"x"}}`)).expect(t, http.StatusBadRequest)
	if txt := bad.errorsText(); !strings.Contains(txt, "reserved") || !strings.Contains(txt, "params.n") || !strings.Contains(txt, "params.a__b") {
		t.Errorf("errors: %s", txt)
	}
	e.send(http.MethodPut, "/api/v3/output-data", "", body(uuid, `{"x":{"type":"STRING","expression":"1"}}`)).expect(t, http.StatusBadRequest)
	e.send(http.MethodPut, "/api/v3/output-data", "", strings.Replace(body(uuid, `{"x":{"type":"STRING","value":"a"}}`), `"step_attempt_id":1`, `"step_attempt_id":9`, 1)).expect(t, http.StatusNotFound)

	// Two calls merge; the token may come in the header instead.
	req := httptest.NewRequest(http.MethodPut, "/api/v3/output-data", strings.NewReader(withToken(uuid, "", `{"result":{"type":"LONG","value":7}}`)))
	req.Header.Set(completion.TokenHeader, token)
	e.serve(req).expect(t, http.StatusOK)
	got := e.send(http.MethodPut, "/api/v3/output-data", "", body(uuid, `{"path":{"type":"STRING","value":"s3://b/k"}}`)).expect(t, http.StatusOK)
	if ps := got.body["params"].(map[string]any); len(ps) != 2 {
		t.Errorf("merged output data %s", got.raw)
	}

	done := e.waitTerminal(fmt.Sprintf("/api/v3/workflows/job/instances/%d", iid))
	if done.body["status"] != "SUCCEEDED" {
		t.Fatalf("run ended %s", done.raw)
	}
	nap := e.send(http.MethodGet, attemptPath, "", "").expect(t, http.StatusOK)
	if paramValue(t, nap, "result").(float64) != 7 || paramValue(t, nap, "path") != "s3://b/k" {
		t.Errorf("nap params %s", nap.raw)
	}
	use := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/job/instances/%d/runs/1/steps/use/attempts/latest", iid), "", "").expect(t, http.StatusOK)
	if paramValue(t, use, "plus").(float64) != 8 || paramValue(t, use, "where") != "at s3://b/k" {
		t.Errorf("use params %s", use.raw)
	}
	// Too late once the attempt ended.
	e.send(http.MethodPut, "/api/v3/output-data", "", body(uuid, `{"result":{"type":"LONG","value":9}}`)).expect(t, http.StatusConflict)
}

// Params that depend on each other in a cycle, through expressions or
// interpolation, are refused when the workflow is pushed, as are reserved
// names.
func TestPushRefusesParamCyclesAndReservedNames(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"workflow":{"id":"cyc","params":{
	    "a":{"type":"STRING","value":"x$b"},"b":{"type":"STRING","expression":"a + 1"}},
	  "steps":[{"step":{"id":"s","type":"NoOp","params":{
	    "c":{"type":"LONG","expression":"d"},"d":{"type":"LONG","expression":"c"}}}}]}}`).expect(t, http.StatusBadRequest)
	if txt := r.errorsText(); strings.Count(txt, "cycle") != 2 {
		t.Errorf("errors: %s", txt)
	}
	r = e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"workflow":{"id":"res","steps":[{"step":{"id":"s","type":"NoOp","params":{
	    "step_instance_uuid":{"type":"STRING","value":"x"}}}}]}}`).expect(t, http.StatusBadRequest)
	if txt := r.errorsText(); !strings.Contains(txt, "reserved") {
		t.Errorf("errors: %s", txt)
	}
	r = e.send(http.MethodPut, "/api/v3/workflows/actions/validate", "alice", `{"workflow":{"id":"ok","params":{
	    "a":{"type":"STRING","value":"$$b ${b}"},"b":{"type":"STRING","value":"x"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	if r.code != http.StatusOK {
		t.Errorf("valid definition refused: %s", r.raw)
	}
}

// stepToken is the step token the engine hands the job of the attempt
// with stepUUID.
func (e *testEnv) stepToken(stepUUID string) string {
	e.t.Helper()
	token, err := completion.NewTokens(e.pool).Token(context.Background(), stepUUID)
	if err != nil {
		e.t.Fatal(err)
	}
	return token
}
