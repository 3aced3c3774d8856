package queue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/queue"
)

func TestParseNotificationsReadsANoteOfOneMessage(t *testing.T) {
	t.Parallel()
	one, err := queue.ParseNotifications(`{"q":1,"g":2,"ids":[7],"run":{"x":1}}`)
	if err != nil || len(one) != 1 || string(one[0].Note) != `{"x":1}` {
		t.Errorf("one noted message: %+v, %v", one, err)
	}
	for _, payload := range []string{`{"q":1,"g":2,"ids":[7],"run":null}`, `{"q":1,"g":2,"ids":[7]}`, `{"q":1,"g":2,"ids":[7,8],"run":{"x":1}}`} {
		ms, err := queue.ParseNotifications(payload)
		if err != nil || len(ms) == 0 {
			t.Fatalf("%s: %+v, %v", payload, ms, err)
		}
		for _, m := range ms {
			if m.Note != nil {
				t.Errorf("%s: message %d has note %s, want none", payload, m.ID, m.Note)
			}
		}
	}
}

// enqueueNoted enqueues a message for group 1 whose notification carries
// note (NotifyNotedSQL), and returns its id.
func enqueueNoted(t *testing.T, pool *pgxpool.Pool, note string) int64 {
	t.Helper()
	var id int64
	err := pool.QueryRow(context.Background(), `
WITH msg AS (INSERT INTO maestro_queue (queue_id, group_id, payload) VALUES (1, 1, '{}') RETURNING message_id, group_id),
note AS (SELECT message_id, group_id, $1::json AS run FROM msg),
n AS (`+fmt.Sprintf(queue.NotifyNotedSQL, "1::smallint")+`)
SELECT message_id FROM msg, n`, note).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A message whose notification carries a note its queue's Noted accepts
// reaches its handler unclaimed, with what Noted made of it; handed off,
// it stays pending on this node (no sweep offers it again) until
// Settled. A note Noted refuses is claimed as usual.
func TestNotedMessageReachesItsHandlerUnclaimed(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	type seen struct {
		id    int64
		read  any
		owner *string
	}
	got := make(chan seen, 8)
	var calls atomic.Int64
	listening := make(chan struct{})
	var once sync.Once
	w := workerWith(t, pool, "n", []int32{1}, map[queue.ID]queue.Handler{queue.StartWorkflow: func(ctx context.Context, m queue.Message) error {
		calls.Add(1)
		s := seen{id: m.ID, read: m.Read}
		if err := pool.QueryRow(ctx, `SELECT owned_by FROM maestro_queue WHERE message_id = $1`, m.ID).Scan(&s.owner); err != nil {
			t.Error(err)
		}
		got <- s
		if m.Read == "from the note" {
			return queue.ErrHandedOff
		}
		return nil
	}}, func(c *queue.WorkerConfig) {
		// A sweep every 50 ms whose grace (one interval) an unclaimed
		// message soon outlives.
		c.SweepInterval = 50 * time.Millisecond
		c.OnListen = func(on bool) {
			if on {
				once.Do(func() { close(listening) })
			}
		}
		c.Noted = map[queue.ID]func(queue.Message) (queue.Message, bool){queue.StartWorkflow: func(m queue.Message) (queue.Message, bool) {
			if string(m.Note) != `{"ok": true}` {
				return m, false
			}
			m.Read = "from the note"
			return m, true
		}}
	})
	next := func() seen {
		t.Helper()
		select {
		case s := <-got:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no message reached its handler")
		}
		return seen{}
	}

	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never listened")
	}
	// A first message, handled once the listener's first sweep is done
	// (which would claim a message enqueued before it).
	first := enqueue(t, pool, queue.StartWorkflow, 1, map[string]int{})
	if s := next(); s.id != first.ID {
		t.Fatalf("got message %d, want %d", s.id, first.ID)
	}
	waitEmpty(t, pool)
	calls.Store(0)
	id := enqueueNoted(t, pool, `{"ok": true}`)
	s := next()
	if s.id != id || s.read != "from the note" || s.owner != nil {
		t.Fatalf("noted message: id %d (want %d), read %v, owner %v; want it from its note, unclaimed", s.id, id, s.read, s.owner)
	}
	time.Sleep(500 * time.Millisecond) // ten sweeps
	if calls.Load() != 1 {
		t.Fatalf("a handed-off noted message was handled %d times before it settled, want once", calls.Load())
	}
	// Its write failed: offered again (claimed by a sweep this time,
	// with no note) after the retry delay.
	w.Settled(context.Background(), queue.Message{Queue: queue.StartWorkflow, ID: id, Group: 1}, fmt.Errorf("its write failed"))
	if s = next(); s.id != id || s.read != nil || s.owner == nil || *s.owner != "n" {
		t.Fatalf("failed noted message: id %d (want %d), read %v, owner %v; want it claimed by n", s.id, id, s.read, s.owner)
	}
	waitEmpty(t, pool)

	id = enqueueNoted(t, pool, `{"ok": false}`)
	if s = next(); s.id != id || s.read != nil || s.owner == nil || *s.owner != "n" {
		t.Fatalf("refused note: id %d (want %d), read %v, owner %v; want it claimed by n", s.id, id, s.read, s.owner)
	}
	waitEmpty(t, pool)
}
