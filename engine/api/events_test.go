package api_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
)

// GET /api/v3/events pages through the events as JSON with filters; a
// stream is refused (406) where no live hub is (the API Lambda); bad
// parameters are 400s with the usual error body.
func TestEventsEndpoint(t *testing.T) {
	t.Parallel()
	e := eventsEnv(t)
	for _, id := range []string{"alpha", "beta"} {
		e.send("POST", "/api/v3/workflows", "alice", `{"workflow":{"id":"`+id+`","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, 200)
	}
	e.send("PUT", "/api/v3/workflows/alpha/actions/deactivate", "alice", "").expect(t, 200)
	var page response
	deadline := time.Now().Add(10 * time.Second)
	for {
		page = e.send("GET", "/api/v3/events?workflow_id=alpha&limit=10", "", "").expect(t, 200)
		if len(page.body["events"].([]any)) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // readable once older transactions in the cluster end
	}
	evs := page.body["events"].([]any)
	if len(evs) != 2 {
		t.Fatalf("events of alpha: %s", page.raw)
	}
	first, second := evs[0].(map[string]any), evs[1].(map[string]any)
	if first["type"] != "WORKFLOW_DEFINITION_CHANGE_EVENT" || second["type"] != "WORKFLOW_DEACTIVATION_CHANGE_EVENT" ||
		first["cluster_name"] != "test" || first["workflow_id"] != "alpha" {
		t.Errorf("events %s", page.raw)
	}
	next := page.body["next_event_id"].(string)
	if next != second["event_id"] {
		t.Errorf("next_event_id %s, want the last event's id %s", next, second["event_id"])
	}
	rest := e.send("GET", "/api/v3/events?workflow_id=alpha&after="+next, "", "").expect(t, 200)
	if n := len(rest.body["events"].([]any)); n != 0 {
		t.Errorf("%d events after the last one", n)
	}
	typed := e.send("GET", "/api/v3/events?type=workflow_deactivation_change_event,WORKFLOW_DELETION_CHANGE_EVENT", "", "").expect(t, 200)
	if n := len(typed.body["events"].([]any)); n != 1 {
		t.Errorf("%d deactivation or deletion events, want 1: %s", n, typed.raw)
	}
	for _, bad := range []string{"type=NOPE", "after=12", "limit=0", "limit=1001", "workflow_instance_id=-1"} {
		r := e.send("GET", "/api/v3/events?"+bad, "", "").expect(t, 400)
		if !strings.Contains(r.body["message"].(string), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("%s: %s", bad, r.raw)
		}
	}
	req := httptest.NewRequest("GET", "/api/v3/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	e.serve(req).expect(t, http.StatusNotAcceptable)
}

// A live stream lasts as long as its client: neither the request timeout
// that bounds every other request nor the server's write timeout cuts it.
func TestLiveStreamOutlivesTimeouts(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := event.NewHub("test")
	fwd, err := event.NewForwarder(pool, event.ForwarderConfig{Name: "local", Sink: hub, Logger: logger, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := fwd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Stop)
	h, err := api.New(api.Config{DB: pool, Logger: logger, Definitions: defs, Runs: execution.New(pool, defs, 0),
		TrustUserHeader: true, Events: event.NewFeed(pool, hub, "test"), RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config = api.NewHTTPServer(h, api.HTTPTimeouts{Write: 1500 * time.Millisecond})
	srv.Start()
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v3/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(2500 * time.Millisecond) // past both timeouts (long enough that a busy machine does not turn the stream's opening into a 503)
	e := &testEnv{t: t, pool: pool, defs: defs, h: h}
	e.send("POST", "/api/v3/workflows", "alice", `{"workflow":{"id":"late","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, 200)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before the event arrived")
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"late"`) {
				return
			}
		case <-deadline:
			t.Fatal("no event on the stream")
		}
	}
}

// The events of a workflow id are those of the workflow now under it: a
// workflow deleted and pushed again does not replay its predecessor's
// events (issue 27); while none exists, the retained events stay readable.
func TestEventsOfARecreatedWorkflow(t *testing.T) {
	t.Parallel()
	e := eventsEnv(t)
	push := `{"workflow":{"id":"again","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`
	types := func(want int) []string {
		t.Helper()
		var out []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			page := e.send("GET", "/api/v3/events?workflow_id=again&after=0-0", "", "").expect(t, 200)
			out = out[:0]
			for _, ev := range page.body["events"].([]any) {
				out = append(out, ev.(map[string]any)["type"].(string))
			}
			if len(out) >= want || time.Now().After(deadline) {
				return out
			}
			time.Sleep(20 * time.Millisecond) // readable once older transactions in the cluster end
		}
	}
	e.send("POST", "/api/v3/workflows", "alice", push).expect(t, 200)
	e.send("PUT", "/api/v3/workflows/again/actions/deactivate", "alice", "").expect(t, 200)
	e.send("DELETE", "/api/v3/workflows/again", "alice", "").expect(t, 200)
	if got := types(3); len(got) != 3 || got[2] != "WORKFLOW_DELETION_CHANGE_EVENT" {
		t.Fatalf("events of the deleted workflow: %v", got)
	}
	time.Sleep(5 * time.Millisecond) // a later transaction start
	e.send("POST", "/api/v3/workflows", "bob", push).expect(t, 200)
	if got := types(1); len(got) != 1 || got[0] != "WORKFLOW_DEFINITION_CHANGE_EVENT" {
		t.Fatalf("events of the new workflow again: %v, want its definition event only", got)
	}
}

// eventsEnv is an API over a fresh database with an event feed and no live
// hub, as the API Lambda has it.
func eventsEnv(t *testing.T) *testEnv {
	t.Helper()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	srv, err := api.New(api.Config{DB: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Definitions: defs,
		Runs: execution.New(pool, defs, 0), TrustUserHeader: true, Events: event.NewFeed(pool, nil, "test")})
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, pool: pool, defs: defs, h: srv}
}
