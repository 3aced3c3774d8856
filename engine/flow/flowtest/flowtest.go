// Package flowtest runs workflows on a real engine over a test database
// (engine/dbtest), for the tests of step runtimes outside engine/flow.
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

// Groups is the flow group count of test runs.
const Groups = 4

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
	return &Env{T: t, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, Groups)}
}

// Logger is silent unless MAESTRO_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("MAESTRO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Engine starts an engine node with the built-in runtimes and runtimes
// added; it stops when the test ends.
func (e *Env) Engine(runtimes stepruntime.Registry, cfg flow.Config) *flow.Engine {
	e.T.Helper()
	if cfg.Logger == nil {
		cfg.Logger = Logger()
	}
	if cfg.GroupCount == 0 {
		cfg.GroupCount = Groups
	}
	if cfg.Lease == 0 {
		cfg.Lease = 2 * time.Second
	}
	cfg.Runtimes = stepruntime.Builtins()
	maps.Copy(cfg.Runtimes, runtimes)
	cfg.Queue.SweepInterval = 200 * time.Millisecond
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

// Push validates and stores a workflow definition given as JSON.
func (e *Env) Push(def string) {
	e.T.Helper()
	e.push(workflow.DecodeJSON, def)
}

// PushYAML validates and stores a workflow definition in the YAML DSL.
func (e *Env) PushYAML(def string) {
	e.T.Helper()
	e.push(workflow.DecodeYAML, def)
}

func (e *Env) push(decode func([]byte) (*workflow.Definition, error), def string) {
	e.T.Helper()
	d, err := decode([]byte(def))
	if err != nil {
		e.T.Fatalf("decode definition: %v", err)
	}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		e.T.Fatalf("validate definition: %v", err)
	}
	if _, err := e.Defs.Create(context.Background(), d, "tester"); err != nil {
		e.T.Fatalf("create definition: %v", err)
	}
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
