package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/event/eventtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// webhookReceiver collects the events a webhook delivers; it refuses every
// seventh delivery, so some events come twice.
type webhookReceiver struct {
	mu    sync.Mutex
	got   eventtest.Collected
	order []json.RawMessage
	n     int
}

func (w *webhookReceiver) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.n%7 == 0 {
		rw.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.got.Add(b)
	w.order = append(w.order, b)
}

func (w *webhookReceiver) unique() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, b := range w.order {
		var h struct {
			ID string `json:"event_id"`
		}
		_ = json.Unmarshal(b, &h)
		seen[h.ID] = true
	}
	return len(seen)
}

// Events survive kill -9: an engine process delivering events to a
// webhook is killed twice mid-run (writes and deliveries in flight) and
// restarted. In the end every status change of every run and step attempt
// the database holds was delivered, in exactly one event once deduplicated
// by event_id, and none for a change that did not commit; each run's and
// each attempt's events arrived in the order of their seq.
func TestEventsSurviveKilledEngines(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	ctx := context.Background()
	recv := &webhookReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	defs := definition.NewStore(pool)
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"busy","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true","c":"true"}}}},
		{"step":{"id":"b","type":"Sleep","sleep_seconds":0.3,"transition":{"successors":{"d":"true"}}}},
		{"step":{"id":"c","type":"NoOp","transition":{"successors":{"d":"true"}}}},
		{"step":{"id":"d","type":"Sleep","sleep_seconds":0.3,"transition":{"successors":{"e":"true"}}}},
		{"step":{"id":"e","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(ctx, d, "tester"); err != nil {
		t.Fatal(err)
	}
	runs := execution.New(pool, defs, killGroups)
	var insts []*execution.Instance
	for range 24 {
		res, err := runs.Start(ctx, execution.StartRequest{WorkflowID: "busy", Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, res.Instance)
	}
	hook := "MAESTRO_EVENT_WEBHOOK_URL=" + srv.URL
	succeeded := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM step_instance WHERE status = 'SUCCEEDED'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p := engineProcess(t, dsn, "node-1", "4", hook)
	for i, progress := range []int{20, 60} {
		waitUntil("progress before the kill", func() bool { return succeeded() >= progress && recv.unique() > 0 })
		if err := p.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
		p = engineProcess(t, dsn, fmt.Sprintf("node-restarted-%d", i+1), "4", hook)
	}
	for _, inst := range insts {
		waitUntil("every run to end", func() bool {
			got, err := runs.Instance(ctx, inst.WorkflowID, inst.InstanceID, inst.RunID)
			return err == nil && got.Status.IsTerminal()
		})
		got, _ := runs.Instance(ctx, inst.WorkflowID, inst.InstanceID, inst.RunID)
		if got.Status != instance.WorkflowSucceeded {
			t.Errorf("run %d ended %s", inst.InstanceID, got.Status)
		}
	}
	var outbox int
	waitUntil("every event to be delivered", func() bool {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM maestro_event WHERE kind IN (1, 2)`).Scan(&outbox); err != nil {
			t.Fatal(err)
		}
		return recv.unique() >= outbox+1 // and the definition event
	})
	recv.mu.Lock()
	defer recv.mu.Unlock()
	rep, err := recv.got.Verify(ctx, pool, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if rep.InstanceChanges != 2*len(insts) || rep.StepChanges < 9*5*len(insts) {
		t.Errorf("checked %+v, want every change of %d runs", rep, len(insts))
	}
	// Delivery order per run and per attempt: by position, which follows
	// each one's writes, so seq only grows.
	last := map[string]int64{}
	seen := map[string]bool{}
	for _, b := range recv.order {
		var e struct {
			ID      string     `json:"event_id"`
			Type    event.Type `json:"type"`
			WF      string     `json:"workflow_id"`
			IID     int64      `json:"workflow_instance_id"`
			Step    string     `json:"step_id"`
			Attempt int64      `json:"step_attempt_id"`
			Seq     int64      `json:"seq"`
		}
		_ = json.Unmarshal(b, &e)
		if seen[e.ID] || !e.Type.IsStatusChange() {
			continue
		}
		seen[e.ID] = true
		key := fmt.Sprintf("%s|%s|%d|%s|%d", e.Type, e.WF, e.IID, e.Step, e.Attempt)
		if e.Seq <= last[key] {
			t.Fatalf("event %s (seq %d) delivered after seq %d of the same run or attempt", e.ID, e.Seq, last[key])
		}
		last[key] = e.Seq
	}
	t.Logf("%+v; %d deliveries", rep, len(recv.order))
}
