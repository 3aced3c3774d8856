// Package flowtest runs workflows for the tests of the packages around the
// engine (events, alerting, the publisher): a migrated database of the
// test's own, the definition store and run service over it, an engine
// node, and a step type that fails.
package flowtest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// FailType is the step type whose every attempt fails with a user error
// (message FailMessage).
const (
	FailType    = "Fail"
	FailMessage = "the job failed"
)

// Env is one test's database with the services over it.
type Env struct {
	T    testing.TB
	Pool *pgxpool.Pool
	Defs *definition.Store
	Runs *execution.Service
}

// GroupCount is the flow group count of the engines and runs of an Env.
const GroupCount = 4

// New gives the test its own database.
func New(t testing.TB) *Env {
	t.Helper()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	return &Env{T: t, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, GroupCount)}
}

// Logger discards, unless MAESTRO_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("MAESTRO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type failing struct{}

func (failing) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (failing) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.UserError, Message: FailMessage}
}

func (failing) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// Engine starts an engine node with test defaults (short lease and sweep,
// the built-in runtimes and FailType) where cfg leaves them unset; it stops
// when the test ends.
func (e *Env) Engine(cfg flow.Config) *flow.Engine {
	e.T.Helper()
	if cfg.Logger == nil {
		cfg.Logger = Logger()
	}
	if cfg.GroupCount == 0 {
		cfg.GroupCount = GroupCount
	}
	if cfg.Lease == 0 {
		cfg.Lease = 2 * time.Second
	}
	if cfg.Runtimes == nil {
		cfg.Runtimes = stepruntime.Builtins()
		cfg.Runtimes[FailType] = failing{}
	}
	if cfg.Queue.SweepInterval == 0 {
		cfg.Queue.SweepInterval = 200 * time.Millisecond
	}
	eng, err := flow.New(e.Pool, cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(eng.Stop)
	return eng
}

// Push validates and stores a definition given as JSON, as the caller.
func (e *Env) Push(def, caller string) *definition.Created {
	e.T.Helper()
	d, err := workflow.DecodeJSON([]byte(def))
	if err != nil {
		e.T.Fatalf("decode definition: %v", err)
	}
	if err := (workflow.Validator{StepTypes: append(workflow.DefaultStepTypes(), FailType)}).Validate(d); err != nil {
		e.T.Fatalf("validate definition: %v", err)
	}
	c, err := e.Defs.Create(context.Background(), d, caller)
	if err != nil {
		e.T.Fatalf("create definition: %v", err)
	}
	return c
}

// Start starts a run of the workflow's latest version.
func (e *Env) Start(workflowID string) *execution.Instance {
	e.T.Helper()
	res, err := e.Runs.Start(context.Background(), execution.StartRequest{WorkflowID: workflowID, Version: "latest"})
	if err != nil {
		e.T.Fatalf("start %s: %v", workflowID, err)
	}
	return res.Instance
}

// Wait polls until the run has ended and returns it.
func (e *Env) Wait(inst *execution.Instance, within time.Duration) *execution.Instance {
	e.T.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := e.Runs.Instance(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
		if err != nil {
			e.T.Fatal(err)
		}
		if got.Status.IsTerminal() {
			return got
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("run %s/%d still %s after %s", inst.WorkflowID, inst.InstanceID, got.Status, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
