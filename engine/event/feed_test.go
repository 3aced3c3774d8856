package event_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
)

// sse reads a stream of Server-Sent Events.
type sse struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	ids    []string
	data   []map[string]any
	done   chan struct{}
}

func openStream(t *testing.T, url, lastID string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("stream: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &sse{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m)
				s.mu.Lock()
				s.ids = append(s.ids, id)
				s.data = append(s.data, m)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *sse) received() ([]string, []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...), append([]map[string]any(nil), s.data...)
}

// The live stream: a client without Last-Event-ID gets the new events; one
// that reconnects with an event id gets what followed it (replayed from the
// outbox), then the live events, each once, with the filters applied; the
// SSE id is the event_id.
func TestStreamResumesFromLastEventID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hub := event.NewHub("test")
	f, err := event.NewForwarder(e.Pool, event.ForwarderConfig{Name: "local", Sink: hub, Logger: testLogger(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	feed := event.NewFeed(e.Pool, hub, "test")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var filter event.Filter
		if wf := r.URL.Query().Get("workflow_id"); wf != "" {
			filter.WorkflowID = wf
		}
		if ty := r.URL.Query().Get("type"); ty != "" {
			filter.Types = []event.Type{event.Type(ty)}
		}
		var pos event.Position
		resume := false
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			pos, _ = event.ParsePosition(id)
			resume = true
		}
		_ = feed.Stream(r.Context(), w, filter, pos, resume)
	}))
	t.Cleanup(srv.Close)

	for i := range 3 {
		if err := event.Insert(ctx, e.Pool, record("before", i)); err != nil {
			t.Fatal(err)
		}
	}
	all := e.forward("all")
	e.drained(all)
	old, _ := all.snapshot()

	live := openStream(t, srv.URL, "")
	onlyWF := openStream(t, srv.URL+"?workflow_id=wf", "")
	time.Sleep(100 * time.Millisecond) // subscribed
	if err := event.Insert(ctx, e.Pool, record("wf", 3), record("wf:1:loop", 4), record("other", 5)); err != nil {
		t.Fatal(err)
	}
	flowtest.WaitFor(t, 10*time.Second, "the live events", func() bool { ids, _ := live.received(); return len(ids) == 3 })
	flowtest.WaitFor(t, 10*time.Second, "the filtered events", func() bool { ids, _ := onlyWF.received(); return len(ids) == 2 })
	_, data := onlyWF.received()
	if data[0]["workflow_id"] != "wf" || data[1]["workflow_id"] != "wf:1:loop" {
		t.Errorf("filtered stream got %v", data)
	}

	resumed := openStream(t, srv.URL, old[1].EventID())
	flowtest.WaitFor(t, 10*time.Second, "the replay", func() bool { ids, _ := resumed.received(); return len(ids) == 4 })
	if err := event.Insert(ctx, e.Pool, record("after", 6)); err != nil {
		t.Fatal(err)
	}
	flowtest.WaitFor(t, 10*time.Second, "the live event after the replay", func() bool { ids, _ := resumed.received(); return len(ids) == 5 })
	time.Sleep(100 * time.Millisecond)
	ids, data := resumed.received()
	wantWF := []string{"before", "wf", "wf:1:loop", "other", "after"}
	if len(ids) != len(wantWF) {
		t.Fatalf("resumed stream got %v", ids)
	}
	for i, d := range data {
		if d["workflow_id"] != wantWF[i] || d["event_id"] != ids[i] || d["cluster_name"] != "test" {
			t.Errorf("resumed event %d: id %s, %v; want workflow %s", i, ids[i], d, wantWF[i])
		}
	}
	if ids[0] != old[2].EventID() {
		t.Errorf("the replay starts at %s, want %s (the event after the Last-Event-ID)", ids[0], old[2].EventID())
	}
}

// A subscriber that falls behind is dropped (its stream ends and the
// client resumes from the outbox), never slowing the hub.
func TestHubDropsSlowSubscribers(t *testing.T) {
	hub := event.NewHub("")
	slow := hub.Subscribe(1)
	fast := hub.Subscribe(10)
	evs := []event.Event{}
	for i := range 3 {
		r := record("wf", i)
		evs = append(evs, event.Event{Position: event.Position{TX: 1, ID: int64(i + 1)}, Kind: r.Kind, WorkflowID: "wf", Payload: r.Payload})
	}
	if err := hub.Publish(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range slow.C {
		n++
	}
	if n != 1 {
		t.Errorf("the slow subscriber got %d events before it was dropped, want 1", n)
	}
	if len(fast.C) != 3 {
		t.Errorf("the fast subscriber holds %d events, want 3", len(fast.C))
	}
	fast.Close()
	fast.Close() // idempotent
}

// A page reads a bounded window, filters it, and says where the next page
// starts.
func TestFeedPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for i := range 5 {
		wf := "a"
		if i%2 == 1 {
			wf = "b"
		}
		if err := event.Insert(ctx, e.Pool, record(wf, i)); err != nil {
			t.Fatal(err)
		}
	}
	feed := event.NewFeed(e.Pool, nil, "")
	if feed.Live() {
		t.Fatal("a feed without a hub claims to stream")
	}
	// Events are readable once no older transaction is open in the cluster
	// (other tests' included).
	flowtest.WaitFor(t, 10*time.Second, "the events to be readable", func() bool {
		page, err := feed.Page(ctx, event.Filter{}, event.Position{}, 10)
		return err == nil && len(page.Events) == 5
	})
	var got []string
	var pos event.Position
	for range 10 {
		page, err := feed.Page(ctx, event.Filter{WorkflowID: "a"}, pos, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Events {
			got = append(got, decode[map[string]any](t, b)["workflow_id"].(string))
		}
		next, err := event.ParsePosition(page.NextEventID)
		if err != nil {
			t.Fatal(err)
		}
		if next == pos {
			break
		}
		pos = next
	}
	if strings.Join(got, ",") != "a,a,a" {
		t.Errorf("pages of workflow a: %v", got)
	}
	page, err := feed.Page(ctx, event.Filter{Types: []event.Type{event.StepInstanceStatusChange}}, event.Position{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 0 || page.NextEventID == "0-0" {
		t.Errorf("a type filter matching nothing: %d events, next %s (want the end of the scan)", len(page.Events), page.NextEventID)
	}
	if err := feed.Stream(ctx, httptest.NewRecorder(), event.Filter{}, event.Position{}, false); err != event.ErrNoStream {
		t.Errorf("stream without a hub: %v", err)
	}
}

// The webhook POSTs each event with its id and type in headers, and sends
// again what the receiver refused, not what it took.
func TestWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var ids []string
	refuse := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || m["event_id"] != r.Header.Get("X-Maestro-Event-Id") ||
			r.Header.Get("X-Maestro-Event-Type") != string(event.WorkflowPropertiesChange) {
			t.Errorf("webhook body %s, headers %v", body, r.Header)
		}
		if len(ids) == 2 && refuse > 0 {
			refuse--
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		ids = append(ids, r.Header.Get("X-Maestro-Event-Id"))
	}))
	t.Cleanup(srv.Close)
	for i := range 4 {
		if err := event.Insert(ctx, e.Pool, record("wf", i)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := event.NewForwarder(e.Pool, event.ForwarderConfig{Name: "webhook", Sink: event.NewWebhook(srv.URL, "c", nil),
		Logger: testLogger(), PollInterval: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	flowtest.WaitFor(t, 10*time.Second, "4 deliveries", func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) == 4 })
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("event %s delivered twice though the receiver took it", id)
		}
		seen[id] = true
	}
}
