// Package flowtest runs workflows on a real engine over a test database
// (engine/dbtest), for the tests of the packages around the engine (step
// runtimes, events, alerting, the publisher): a migrated database of the
// test's own, the definition store and run service over it, an engine node,
// and a step type that fails.
package flowtest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// GroupCount is the flow group count of the engines and runs of an Env.
const GroupCount = 4

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

// New gives the test its own migrated database.
func New(t testing.TB) *Env {
	t.Helper()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	return &Env{T: t, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, GroupCount)}
}

// Logger is silent unless MAESTRO_TEST_LOG is set.
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

// Engine starts an engine node with test defaults where cfg leaves them
// unset (short lease and sweep; the built-in runtimes and FailType, unless
// cfg names its runtimes) and runtimes added; it stops when the test ends.
func (e *Env) Engine(runtimes stepruntime.Registry, cfg flow.Config) *flow.Engine {
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
	maps.Copy(cfg.Runtimes, runtimes)
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

// Push validates and stores a workflow definition given as JSON, as the
// user tester.
func (e *Env) Push(def string) {
	e.T.Helper()
	e.push(workflow.DecodeJSON, def, "tester")
}

// PushAs validates and stores a definition given as JSON, as the caller.
func (e *Env) PushAs(def, caller string) *definition.Created {
	e.T.Helper()
	return e.push(workflow.DecodeJSON, def, caller)
}

// PushYAML validates and stores a workflow definition in the YAML DSL.
func (e *Env) PushYAML(def string) {
	e.T.Helper()
	e.push(workflow.DecodeYAML, def, "tester")
}

func (e *Env) push(decode func([]byte) (*workflow.Definition, error), def, caller string) *definition.Created {
	e.T.Helper()
	d, err := decode([]byte(def))
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

// Start starts a run of the latest version.
func (e *Env) Start(workflowID string) *execution.Instance {
	e.T.Helper()
	res, err := e.Runs.Start(context.Background(), execution.StartRequest{WorkflowID: workflowID, Version: "latest"})
	if err != nil {
		e.T.Fatalf("start %s: %v", workflowID, err)
	}
	return res.Instance
}

// Wait polls until the run is terminal and returns it.
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
			e.logSteps(inst)
			e.T.Fatalf("run %s/%d still %s after %s", inst.WorkflowID, inst.InstanceID, got.Status, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitStep polls until the latest attempt of a step has status.
func (e *Env) WaitStep(inst *execution.Instance, stepID string, status instance.StepStatus, within time.Duration) *execution.StepAttempt {
	e.T.Helper()
	deadline := time.Now().Add(within)
	for {
		a, err := e.Runs.Attempt(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID, stepID, 0)
		if err == nil && a.Status == status {
			return a
		}
		if time.Now().After(deadline) {
			e.logSteps(inst)
			e.T.Fatalf("step %s never reached %s within %s", stepID, status, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Attempts returns every attempt of a step, oldest first.
func (e *Env) Attempts(inst *execution.Instance, stepID string) []*execution.StepAttempt {
	e.T.Helper()
	var out []*execution.StepAttempt
	for n := int64(1); ; n++ {
		a, err := e.Runs.Attempt(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID, stepID, n)
		if err != nil {
			return out
		}
		out = append(out, a)
	}
}

func (e *Env) logSteps(inst *execution.Instance) {
	steps, _ := e.Runs.Steps(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	for _, s := range steps {
		e.T.Logf("step %s attempt %d: %s %s %s", s.StepID, s.AttemptID, s.Status, s.RuntimeState, s.Timeline)
	}
}

// WaitData polls until the latest attempt of a step has key in its
// runtime data, and returns the data.
func (e *Env) WaitData(inst *execution.Instance, stepID, key string, within time.Duration) map[string]any {
	e.T.Helper()
	deadline := time.Now().Add(within)
	for {
		a, err := e.Runs.Attempt(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID, stepID, 0)
		if err == nil {
			var rs struct {
				Data map[string]any `json:"data"`
			}
			if json.Unmarshal(a.RuntimeState, &rs) == nil && rs.Data[key] != nil {
				return rs.Data
			}
		}
		if time.Now().After(deadline) {
			e.logSteps(inst)
			e.T.Fatalf("step %s never had %s in its runtime data within %s", stepID, key, within)
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
