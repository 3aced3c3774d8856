package event_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/event/eventtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// env is one test's database with an engine and the services over it.
type env struct {
	t    testing.TB
	pool *pgxpool.Pool
	defs *definition.Store
	runs *execution.Service
}

func newEnv(t testing.TB) *env {
	t.Helper()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	return &env{t: t, pool: pool, defs: defs, runs: execution.New(pool, defs, 4)}
}

func testLogger() *slog.Logger {
	if os.Getenv("MAESTRO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// failing fails every attempt with a user error.
type failing struct{}

func (failing) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (failing) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.UserError, Message: "the job failed"}
}

func (failing) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

func (e *env) engine() *flow.Engine {
	e.t.Helper()
	rt := stepruntime.Builtins()
	rt["Fail"] = failing{}
	cfg := flow.Config{Logger: testLogger(), GroupCount: 4, Lease: 2 * time.Second, Runtimes: rt}
	cfg.Queue.SweepInterval = 200 * time.Millisecond
	eng, err := flow.New(e.pool, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(eng.Stop)
	return eng
}

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
	e.t.Helper()
	c := &collector{}
	f, err := event.NewForwarder(e.pool, event.ForwarderConfig{Name: name, Sink: c, Logger: testLogger(),
		PollInterval: 20 * time.Millisecond, TakeOverInterval: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(f.Stop)
	return c
}

// push stores a workflow definition given as JSON.
func (e *env) push(def string) *definition.Created {
	e.t.Helper()
	d, err := workflow.DecodeJSON([]byte(def))
	if err != nil {
		e.t.Fatalf("decode definition: %v", err)
	}
	v := workflow.Validator{StepTypes: append(workflow.DefaultStepTypes(), "Fail")}
	if err := v.Validate(d); err != nil {
		e.t.Fatalf("validate definition: %v", err)
	}
	c, err := e.defs.Create(context.Background(), d, "tester")
	if err != nil {
		e.t.Fatalf("create definition: %v", err)
	}
	return c
}

func (e *env) start(workflowID string) *execution.Instance {
	e.t.Helper()
	res, err := e.runs.Start(context.Background(), execution.StartRequest{WorkflowID: workflowID, Version: "latest"})
	if err != nil {
		e.t.Fatalf("start %s: %v", workflowID, err)
	}
	return res.Instance
}

// wait polls until the run is terminal and returns it.
func (e *env) wait(inst *execution.Instance, within time.Duration) *execution.Instance {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := e.runs.Instance(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
		if err != nil {
			e.t.Fatal(err)
		}
		if got.Status.IsTerminal() {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s/%d still %s after %s", inst.WorkflowID, inst.InstanceID, got.Status, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outboxSize counts the events written so far.
func (e *env) outboxSize() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM maestro_event`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// drained waits until c has every event written so far.
func (e *env) drained(c *collector) {
	e.t.Helper()
	waitFor(e.t, 30*time.Second, "the forwarder to deliver every event", func() bool { return c.count() >= e.outboxSize() })
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}
