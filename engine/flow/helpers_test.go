package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// env is one test's database with the services over it; the engine and
// the waits are flowtest's.
type env struct {
	*flowtest.Env
	t    testing.TB
	pool *pgxpool.Pool
	defs *definition.Store
	runs *execution.Service
}

const testGroups = flowtest.GroupCount

func newEnv(t testing.TB) *env {
	t.Helper()
	ft := flowtest.New(t)
	return &env{Env: ft, t: t, pool: ft.Pool, defs: ft.Defs, runs: ft.Runs}
}

// engine starts an engine node with testRuntimes unless cfg names its
// runtimes; it stops when the test ends.
func (e *env) engine(cfg flow.Config) *flow.Engine {
	e.t.Helper()
	rts := cfg.Runtimes
	if rts == nil {
		rts = testRuntimes()
	}
	return e.Engine(rts, cfg)
}

func testLogger() *slog.Logger { return flowtest.Logger() }

// engineBefore is engine with a hook that runs before the engine starts.
func (e *env) engineBefore(cfg flow.Config, before func(*flow.Engine)) *flow.Engine {
	e.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	if cfg.GroupCount == 0 {
		cfg.GroupCount = testGroups
	}
	if cfg.Lease == 0 {
		cfg.Lease = 2 * time.Second
	}
	if cfg.Runtimes == nil {
		cfg.Runtimes = testRuntimes()
	}
	if cfg.Queue.SweepInterval == 0 {
		cfg.Queue.SweepInterval = 200 * time.Millisecond
	}
	eng, err := flow.New(e.pool, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if before != nil {
		before(eng)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(eng.Stop)
	return eng
}

// push stores a workflow definition given as JSON.
func (e *env) push(def string) {
	e.t.Helper()
	d, err := workflow.DecodeJSON([]byte(def))
	if err != nil {
		e.t.Fatalf("decode definition: %v", err)
	}
	v := workflow.Validator{
		StepTypes: append(workflow.DefaultStepTypes(), "Flaky", "Fail", "Panic", "Exclusive", "Gauge", "Effect"),
		StepConfig: map[string]map[string]workflow.ConfigCheck{
			"Sleep": workflow.DefaultStepConfig()["Sleep"],
			"Flaky": {"failures": nil, "fail_with": nil},
		},
	}
	if err := v.Validate(d); err != nil {
		e.t.Fatalf("validate definition: %v", err)
	}
	if _, err := e.defs.Create(context.Background(), d, "tester"); err != nil {
		e.t.Fatalf("create definition: %v", err)
	}
}

func (e *env) start(workflowID string, runParams workflow.Params) *execution.Instance {
	e.t.Helper()
	res, err := e.runs.Start(context.Background(), execution.StartRequest{WorkflowID: workflowID, Version: "latest", RunParams: runParams})
	if err != nil {
		e.t.Fatalf("start %s: %v", workflowID, err)
	}
	return res.Instance
}

// wait polls until the run is terminal and returns it.
func (e *env) wait(inst *execution.Instance, within time.Duration) *execution.Instance {
	e.t.Helper()
	return e.Wait(inst, within)
}

// stepStatuses maps step id to the status of its latest attempt.
func (e *env) stepStatuses(inst *execution.Instance) map[string]instance.StepStatus {
	e.t.Helper()
	steps, err := e.runs.Steps(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]instance.StepStatus{}
	for _, s := range steps {
		out[s.StepID] = s.Status
	}
	return out
}

func (e *env) attempts(inst *execution.Instance, stepID string) []instance.StepStatus {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT status FROM step_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 ORDER BY attempt_id`,
		inst.WorkflowID, inst.InstanceID, inst.RunID, stepID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []instance.StepStatus
	for rows.Next() {
		var s instance.StepStatus
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// testRuntimes are the built-ins plus runtimes that fail on purpose and
// that count how many actors execute one attempt at once.
func testRuntimes() stepruntime.Registry {
	r := stepruntime.Builtins()
	r["Flaky"] = &flaky{}
	r["Fail"] = failing{}
	r["Panic"] = panicking{}
	return r
}

// flaky fails with the error in its "fail_with" config the number of times
// in "failures", counting per step id, then succeeds.
type flaky struct {
	mu    sync.Mutex
	calls map[string]int
}

func (f *flaky) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (f *flaky) Execute(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	key := a.WorkflowID + "/" + a.StepID
	f.calls[key]++
	var failures int
	_ = json.Unmarshal(a.Config["failures"], &failures)
	if f.calls[key] <= failures {
		state := stepruntime.UserError
		if string(a.Config["fail_with"]) == `"platform"` {
			state = stepruntime.PlatformError
		}
		return stepruntime.Result{State: state, Message: "planned failure"}
	}
	return stepruntime.Result{State: stepruntime.Done, Outputs: map[string]any{"calls": f.calls[key]}}
}

func (f *flaky) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

type failing struct{}

func (failing) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}
func (failing) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.FatalError, Message: "always fails"}
}
func (failing) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

type panicking struct{}

func (panicking) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	panic("runtime bug")
}
func (panicking) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}
func (panicking) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// exclusive records the most actors that ever executed one attempt at once.
type exclusive struct {
	mu      sync.Mutex
	active  map[string]int
	maxSeen atomic.Int64
	hold    time.Duration
}

func (x *exclusive) enter(a *stepruntime.Attempt) func() {
	key := fmt.Sprintf("%s/%d/%d/%s/%d", a.WorkflowID, a.InstanceID, a.RunID, a.StepID, a.AttemptID)
	x.mu.Lock()
	if x.active == nil {
		x.active = map[string]int{}
	}
	x.active[key]++
	if n := int64(x.active[key]); n > x.maxSeen.Load() {
		x.maxSeen.Store(n)
	}
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		x.active[key]--
		x.mu.Unlock()
	}
}

func (x *exclusive) Start(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	defer x.enter(a)()
	time.Sleep(x.hold)
	return stepruntime.Result{State: stepruntime.Done}
}

func (x *exclusive) Execute(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	defer x.enter(a)()
	time.Sleep(x.hold)
	return stepruntime.Result{State: stepruntime.Done}
}

func (x *exclusive) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// waitRunning polls until the run's first step is RUNNING.
func (e *env) waitRunning(inst *execution.Instance) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, st := range e.stepStatuses(inst) {
			if st == instance.StepRunning {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("run %d never had a RUNNING step", inst.InstanceID)
}

// countRunning counts RUNNING step attempts in the database.
func (e *env) countRunning() int {
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM step_instance WHERE status = 'RUNNING'`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}
