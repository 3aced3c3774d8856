package event_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
)

func record(wf string, n int) event.Record {
	return event.NewRecord(&event.WorkflowChangeEvent{Type: event.WorkflowPropertiesChange, WorkflowID: wf,
		Author: "tester", SnapshotID: ptr(int64(n)), EventTime: time.Now().UnixMilli()})
}

// A transaction that wrote its event before another but commits after it
// is not skipped: readers stay below the oldest transaction still running,
// where a row id cursor would have passed it.
func TestLateCommitIsNotSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.forward("test")
	slow, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx) //nolint:errcheck
	if err := event.Insert(ctx, slow, record("slow", 1)); err != nil {
		t.Fatal(err)
	}
	if err := event.Insert(ctx, e.Pool, record("fast", 2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // several forwarder polls
	if n := c.count(); n != 0 {
		t.Fatalf("%d events delivered while an earlier transaction was still open", n)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	flowtest.WaitFor(t, 10*time.Second, "both events", func() bool { return c.count() == 2 })
	evs, _ := c.snapshot()
	if evs[0].WorkflowID != "slow" || evs[1].WorkflowID != "fast" {
		t.Errorf("delivered %s then %s, want slow then fast (position order)", evs[0].WorkflowID, evs[1].WorkflowID)
	}
}

// Many concurrent writers, some rolling back, some holding their
// transaction open a while: the forwarder delivers every committed event
// exactly once, none that rolled back, in position order.
func TestConcurrentWritersNothingLostNothingExtra(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.forward("test")
	const writers, each = 8, 40
	var mu sync.Mutex
	committed := map[string]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				wf := fmt.Sprintf("w%d-%d", w, i)
				rollback := rand.IntN(4) == 0
				err := pgx.BeginFunc(ctx, e.Pool, func(tx pgx.Tx) error {
					if err := event.Insert(ctx, tx, record(wf, i)); err != nil {
						return err
					}
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					if rollback {
						return errRollback
					}
					return nil
				})
				if err != nil && err != errRollback {
					t.Error(err)
					return
				}
				if !rollback {
					mu.Lock()
					committed[wf] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	flowtest.WaitFor(t, 30*time.Second, "every committed event", func() bool { return c.count() >= len(committed) })
	time.Sleep(100 * time.Millisecond)
	evs, _ := c.snapshot()
	seen := map[string]bool{}
	for i, ev := range evs {
		if i > 0 && !evs[i-1].Position.Less(ev.Position) {
			t.Fatalf("out of order: %s after %s", ev.EventID(), evs[i-1].EventID())
		}
		if !committed[ev.WorkflowID] || seen[ev.WorkflowID] {
			t.Fatalf("event of %s delivered though it rolled back, or twice", ev.WorkflowID)
		}
		seen[ev.WorkflowID] = true
	}
	if len(seen) != len(committed) {
		t.Errorf("%d events delivered, %d committed", len(seen), len(committed))
	}
}

var errRollback = fmt.Errorf("roll back")

// Two forwarders of one name: one leads, the other takes over when it
// stops, from where it was; each event reaches the sinks once overall.
func TestForwarderTakeOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	start := func(c *collector) *event.Forwarder {
		f, err := event.NewForwarder(e.Pool, event.ForwarderConfig{Name: "shared", Sink: c, Logger: testLogger(),
			PollInterval: 20 * time.Millisecond, TakeOverInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Stop)
		return f
	}
	a, b := &collector{}, &collector{}
	fa := start(a)
	flowtest.WaitFor(t, 10*time.Second, "a to lead", func() bool {
		_ = event.Insert(ctx, e.Pool, record("probe", 0))
		return a.count() > 0
	})
	start(b)
	for i := range 20 {
		if err := event.Insert(ctx, e.Pool, record("first", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.drained(a)
	if b.count() != 0 {
		t.Fatalf("the follower delivered %d events while the leader ran", b.count())
	}
	fa.Stop()
	for i := range 20 {
		if err := event.Insert(ctx, e.Pool, record("second", i)); err != nil {
			t.Fatal(err)
		}
	}
	flowtest.WaitFor(t, 10*time.Second, "the follower to take over", func() bool { return a.count()+b.count() >= e.outboxSize() })
	evs, _ := b.snapshot()
	for _, ev := range evs {
		if ev.WorkflowID != "second" {
			t.Fatalf("the follower delivered %s again", ev.WorkflowID)
		}
	}
	if len(evs) != 20 {
		t.Errorf("the follower delivered %d events, want 20", len(evs))
	}
}

// The cleaner deletes events past the retention that every live reader has
// passed, and ignores readers gone for good.
func TestCleaner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for i := range 10 {
		if err := event.Insert(ctx, e.Pool, record("wf", i)); err != nil {
			t.Fatal(err)
		}
	}
	c := e.forward("reader")
	e.drained(c)
	// The reader writes its position once it is idle.
	flowtest.WaitFor(t, 10*time.Second, "the reader's cursor to pass every event", func() bool {
		var passed bool
		err := e.Pool.QueryRow(ctx, `SELECT (c.tx, c.event_id) >= (e.tx, e.event_id) FROM maestro_event_cursor c,
            (SELECT tx, event_id FROM maestro_event ORDER BY tx DESC, event_id DESC LIMIT 1) e WHERE c.name = 'reader'`).Scan(&passed)
		return err == nil && passed
	})
	if err := event.EnsureReader(ctx, e.Pool, "behind"); err != nil {
		t.Fatal(err)
	}
	clean := func(retention time.Duration) int64 {
		t.Helper()
		cl, err := event.NewCleaner(e.Pool, event.CleanerConfig{Retention: retention, StaleCursor: time.Hour, Batch: 3, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		n, err := cl.Clean(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := clean(time.Millisecond); n != 0 {
		t.Fatalf("deleted %d events a live reader has not read", n)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE maestro_event_cursor SET updated_at = now() - interval '2 hours' WHERE name = 'behind'`); err != nil {
		t.Fatal(err)
	}
	if n := clean(time.Hour); n != 0 {
		t.Fatalf("deleted %d events within the retention", n)
	}
	if n := clean(time.Millisecond); n != 10 {
		t.Fatalf("deleted %d events, want the 10 the live reader has passed", n)
	}
}

// Private forwarders (the live hub of each maestro dev) each deliver every
// event written after they started, side by side: a second process on the
// same database streams as the first does (issue 27 N4: it streamed none,
// waiting for the first's lock).
func TestPrivateForwardersEachDeliverEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := event.Insert(ctx, e.Pool, record("before", 0)); err != nil {
		t.Fatal(err)
	}
	start := func(c *collector) {
		f, err := event.NewForwarder(e.Pool, event.ForwarderConfig{Name: "local", Sink: c, Logger: testLogger(),
			PollInterval: 20 * time.Millisecond, Private: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Stop)
	}
	a, b := &collector{}, &collector{}
	start(a)
	start(b)
	// Each has found the outbox's end once it delivers a probe: one written
	// before a forwarder read the end is not delivered by it, so probes go
	// on until both have one.
	delivered := func(c *collector, wf string) (n int) {
		evs, _ := c.snapshot()
		for _, ev := range evs {
			if ev.WorkflowID == wf {
				n++
			}
		}
		return n
	}
	flowtest.WaitFor(t, 30*time.Second, "both to find the outbox's end", func() bool {
		if delivered(a, "probe") > 0 && delivered(b, "probe") > 0 {
			return true
		}
		if err := event.Insert(ctx, e.Pool, record("probe", 0)); err != nil {
			t.Fatal(err)
		}
		return false
	})
	for i := range 20 {
		if err := event.Insert(ctx, e.Pool, record("after", i)); err != nil {
			t.Fatal(err)
		}
	}
	flowtest.WaitFor(t, 30*time.Second, "both to deliver", func() bool {
		return delivered(a, "after") >= 20 && delivered(b, "after") >= 20
	})
	time.Sleep(100 * time.Millisecond)
	// Each delivers the 20 once. An event committed just before the start
	// may come too: the start stays below the oldest transaction still
	// running in the cluster, so as never to skip one.
	for name, c := range map[string]*collector{"a": a, "b": b} {
		evs, _ := c.snapshot()
		seen := map[int64]bool{}
		after := 0
		for _, ev := range evs {
			if seen[ev.ID] {
				t.Errorf("%s delivered event %s twice", name, ev.EventID())
			}
			seen[ev.ID] = true
			if ev.WorkflowID == "after" {
				after++
			}
		}
		if after != 20 {
			t.Errorf("%s delivered %d of the 20 events written after it started", name, after)
		}
	}
}
