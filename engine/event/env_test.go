package event_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/event/eventtest"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
)

// env is one test's database with the services over it.
type env struct{ *flowtest.Env }

func newEnv(t testing.TB) *env { return &env{flowtest.New(t)} }

func testLogger() *slog.Logger { return flowtest.Logger() }

// collector is a sink that keeps what it is given, rendered, in order.
type collector struct {
	mu     sync.Mutex
	got    eventtest.Collected
	events []event.Event
	types  []event.Type
	fail   int // fail the next n batches
}

func (c *collector) Publish(_ context.Context, evs []event.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return io.ErrUnexpectedEOF
	}
	for _, ev := range evs {
		b, m, err := event.Render(event.Wire(ev), "", "test", time.Now())
		if err != nil {
			return err
		}
		c.got.Add(b)
		c.events = append(c.events, ev)
		c.types = append(c.types, m.Type)
	}
	return nil
}

func (c *collector) snapshot() ([]event.Event, []event.Type) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event.Event(nil), c.events...), append([]event.Type(nil), c.types...)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// forward runs a forwarder of name into a new collector until the test
// ends.
func (e *env) forward(name string) *collector {
	e.T.Helper()
	c := &collector{}
	f, err := event.NewForwarder(e.Pool, event.ForwarderConfig{Name: name, Sink: c, Logger: testLogger(),
		PollInterval: 20 * time.Millisecond, TakeOverInterval: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		e.T.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(f.Stop)
	return c
}

// outboxSize counts the events written so far.
func (e *env) outboxSize() int {
	e.T.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM maestro_event`).Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// drained waits until c has every event written so far.
func (e *env) drained(c *collector) {
	e.T.Helper()
	flowtest.WaitFor(e.T, 30*time.Second, "the forwarder to deliver every event", func() bool { return c.count() >= e.outboxSize() })
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}
