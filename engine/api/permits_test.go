package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestTagPermitsCRUD(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	// Maestro's TagPermitRequest: extra fields (source) are kept.
	p := e.send(http.MethodPost, "/api/v3/tag-permits", "alice", `{"tag":"gpu","max_allowed":2,"source":"test"}`).expect(t, http.StatusOK)
	if p.body["tag"] != "gpu" || p.body["max_allowed"].(float64) != 2 || p.body["held"].(float64) != 0 || p.body["created_by"] != "alice" ||
		p.body["source"] != "test" || p.get(t, "timeline").([]any)[0].(map[string]any)["message"] != "User [alice] created the tag permit with limit [2]" {
		t.Fatalf("created %s", p.raw)
	}
	// Only its creator (or an administrator) may change a tag permit.
	e.send(http.MethodPost, "/api/v3/tag-permits", "bob", `{"tag":"gpu","max_allowed":1}`).expect(t, http.StatusForbidden)
	e.send(http.MethodDelete, "/api/v3/tag-permits/gpu", "bob", "").expect(t, http.StatusForbidden)
	e.send(http.MethodPost, "/api/v3/tag-permits", "alice", `{"tag":"gpu","max_allowed":1}`).expect(t, http.StatusOK)
	got := e.send(http.MethodGet, "/api/v3/tag-permits/gpu", "", "").expect(t, http.StatusOK)
	if tl := got.body["timeline"].([]any); got.body["max_allowed"].(float64) != 1 || len(tl) != 2 ||
		tl[1].(map[string]any)["message"] != "User [alice] updated the tag permit to the new limit [1]" {
		t.Fatalf("updated %s", got.raw)
	}
	e.send(http.MethodPost, "/api/v3/tag-permits", "", `{"tag":"cpu","max_allowed":0}`).expect(t, http.StatusOK)
	list := e.send(http.MethodGet, "/api/v3/tag-permits", "", "").expect(t, http.StatusOK)
	if n := len(list.body["tag_permits"].([]any)); n != 2 {
		t.Fatalf("listed %s", list.raw)
	}
	for _, bad := range []string{`{"tag":"x"}`, `{"max_allowed":1}`, `{"tag":"x","max_allowed":-1}`, `{"tag":"x","max_allowed":1,"timeline":[]}`, ``} {
		e.send(http.MethodPost, "/api/v3/tag-permits", "", bad).expect(t, http.StatusBadRequest)
	}
	e.send(http.MethodDelete, "/api/v3/tag-permits/cpu", "", "").expect(t, http.StatusOK)
	e.send(http.MethodDelete, "/api/v3/tag-permits/cpu", "", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/tag-permits/cpu", "", "").expect(t, http.StatusNotFound)
}

// Two workflows whose steps carry a tag with max_allowed = 1 run those
// steps one after the other.
func TestTagPermitSerialisesTwoWorkflows(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/tag-permits", "alice", `{"tag":"db","max_allowed":1}`).expect(t, http.StatusOK)
	for _, id := range []string{"one", "two"} {
		e.send(http.MethodPost, "/api/v3/workflows", "alice", fmt.Sprintf(`{"workflow":{"id":%q,"steps":[
		    {"step":{"id":"load","type":"Sleep","sleep_seconds":1,"tags":["db"]}}]}}`, id)).expect(t, http.StatusOK)
	}
	for _, id := range []string{"one", "two"} {
		e.send(http.MethodPost, "/api/v3/workflows/"+id+"/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	}
	// While one runs, the permit shows as held and the other step waits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := e.send(http.MethodGet, "/api/v3/tag-permits/db", "", "").expect(t, http.StatusOK)
		a := e.send(http.MethodGet, "/api/v3/workflows/one/instances/1/runs/1/steps/load/attempts/latest", "", "")
		b := e.send(http.MethodGet, "/api/v3/workflows/two/instances/1/runs/1/steps/load/attempts/latest", "", "")
		if p.body["held"].(float64) == 1 && (stepStatus(a) == "WAITING_FOR_PERMITS" || stepStatus(b) == "WAITING_FOR_PERMITS") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw one step holding the permit and the other waiting: %s / %s", a.raw, b.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ends, starts []time.Time
	for _, id := range []string{"one", "two"} {
		if done := e.waitTerminal("/api/v3/workflows/" + id + "/instances/1"); done.body["status"] != "SUCCEEDED" {
			t.Fatalf("%s ended %s", id, done.raw)
		}
		a := e.send(http.MethodGet, "/api/v3/workflows/"+id+"/instances/1/runs/1/steps/load/attempts/latest", "", "").expect(t, http.StatusOK)
		s := time.UnixMilli(a.num(t, "runtime_state.start_time"))
		f := time.UnixMilli(a.num(t, "runtime_state.end_time"))
		starts, ends = append(starts, s), append(ends, f)
	}
	if starts[0].Before(ends[1]) && starts[1].Before(ends[0]) {
		t.Fatalf("the steps overlapped: %v-%v and %v-%v", starts[0], ends[0], starts[1], ends[1])
	}
}
