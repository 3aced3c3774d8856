package flow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// withStrategy gives a workflow definition (JSON with a "workflow" key
// only) the run strategy strategy (JSON).
func withStrategy(def, strategy string) string {
	return strings.Replace(def, `{"workflow":`, `{"properties":{"owner":"tester","run_strategy":`+strategy+`},"workflow":`, 1)
}

func sleepDef(id string, secs float64) string {
	return fmt.Sprintf(`{"workflow":{"id":%q,"params":{"fail":{"type":"BOOLEAN","value":false}},"steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":%g,"transition":{"successors":{"boom":"fail == true"}}}},
		{"step":{"id":"boom","type":"Fail"}}]}}`, id, secs)
}

// startAll fires n starts at once and returns the runs.
func (e *env) startAll(workflowID string, n int) []*execution.Instance {
	e.t.Helper()
	insts := make([]*execution.Instance, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.runs.Start(context.Background(), execution.StartRequest{WorkflowID: workflowID, Version: "latest"})
			if err != nil {
				errs[i] = err
				return
			}
			insts[i] = res.Instance
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	slices.SortFunc(insts, func(a, b *execution.Instance) int { return int(a.InstanceID - b.InstanceID) })
	return insts
}

// runSpan is a run's stored status and times.
type runSpan struct {
	iid, run   int64
	status     instance.WorkflowStatus
	start, end *time.Time
	queued     bool
	timeline   string
}

func (e *env) spans(workflowID string) []runSpan {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT instance_id, run_id, status, start_time, end_time, queued, timeline::text
        FROM workflow_instance WHERE workflow_id = $1 ORDER BY instance_id, run_id`, workflowID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []runSpan
	for rows.Next() {
		var s runSpan
		if err := rows.Scan(&s.iid, &s.run, &s.status, &s.start, &s.end, &s.queued, &s.timeline); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// maxOverlap is the most runs that were in progress at once.
func maxOverlap(spans []runSpan) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if s.start == nil || s.end == nil {
			continue
		}
		edges = append(edges, edge{*s.start, 1}, edge{*s.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	cur, best := 0, 0
	for _, ed := range edges {
		cur += ed.delta
		best = max(best, cur)
	}
	return best
}

func (e *env) waitAll(insts []*execution.Instance, within time.Duration) {
	e.t.Helper()
	for _, inst := range insts {
		e.wait(inst, within)
	}
}

// checkSequential asserts that the runs ran one at a time in instance id
// order, each starting after the previous one ended.
func checkSequential(t *testing.T, spans []runSpan) {
	t.Helper()
	var prev *runSpan
	for i := range spans {
		s := &spans[i]
		if s.status != instance.WorkflowSucceeded {
			t.Errorf("run %d/%d ended %s: %s", s.iid, s.run, s.status, s.timeline)
			continue
		}
		if prev != nil && !s.start.After(*prev.end) {
			t.Errorf("run %d started at %s, before run %d ended at %s", s.iid, s.start.Format(time.StampMicro),
				prev.iid, prev.end.Format(time.StampMicro))
		}
		prev = s
	}
}

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		props string
		want  run.Strategy
	}{
		{``, run.Strategy{Rule: workflow.RunStrategySequential, Concurrency: 1}},
		{`{}`, run.Strategy{Rule: workflow.RunStrategySequential, Concurrency: 1}},
		{`{"run_strategy":"strict_sequential"}`, run.Strategy{Rule: workflow.RunStrategyStrictSequential, Concurrency: 1}},
		{`{"run_strategy":"FIRST_ONLY"}`, run.Strategy{Rule: workflow.RunStrategyFirstOnly, Concurrency: 1}},
		{`{"run_strategy":{"rule":"LAST_ONLY","workflow_concurrency":5}}`, run.Strategy{Rule: workflow.RunStrategyLastOnly, Concurrency: 1}},
		{`{"run_strategy":"parallel"}`, run.Strategy{Rule: workflow.RunStrategyParallel, Concurrency: 20}},
		{`{"run_strategy":7}`, run.Strategy{Rule: workflow.RunStrategyParallel, Concurrency: 7}},
		{`{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":0}}`, run.Strategy{Rule: workflow.RunStrategyParallel, Concurrency: 0}},
		{`{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":5000}}`, run.Strategy{Rule: workflow.RunStrategyParallel, Concurrency: 1000}},
		{`{"run_strategy":"bogus"}`, run.Strategy{Rule: workflow.RunStrategySequential, Concurrency: 1}},
	} {
		if got := run.ParseStrategy([]byte(tc.props)); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.props, got, tc.want)
		}
	}
}

// 100 starts fired at once on a SEQUENTIAL workflow: one run at a time, in
// trigger (instance id) order. The admission sweep is off (an hour), so
// every hand-off must come from the end of the previous run or from a
// start: a start racing an end never strands a queued run.
func TestSequentialConcurrentStartsAreFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{AdmitInterval: time.Hour})
	e.push(chainJSON("seq", 2)) // no run_strategy: SEQUENTIAL is the default
	insts := e.startAll("seq", 100)
	e.waitAll(insts, 30*time.Second)
	spans := e.spans("seq")
	if len(spans) != 100 {
		t.Fatalf("%d runs, want 100", len(spans))
	}
	checkSequential(t, spans)
}

// A failed run blocks a STRICT_SEQUENTIAL workflow until it is unblocked.
func TestStrictSequentialBlocksUntilUnblocked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(sleepDef("strict", 0.01), `"STRICT_SEQUENTIAL"`))
	failing := e.start("strict", workflow.Params{"fail": workflow.LiteralParam(workflow.ParamTypeBoolean, true)})
	later := e.startAll("strict", 5)
	if got := e.wait(failing, 10*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("first run ended %s", got.Status)
	}
	time.Sleep(300 * time.Millisecond)
	for _, s := range e.spans("strict")[1:] {
		if s.status != instance.WorkflowCreated || !s.queued {
			t.Fatalf("run %d is %s (queued %v) while a failed run blocks", s.iid, s.status, s.queued)
		}
	}
	// Unblocking an instance that is not FAILED is refused.
	if _, err := e.runs.Unblock(context.Background(), "strict", later[0].InstanceID); err == nil {
		t.Error("unblock of a queued run was accepted")
	}
	n, err := e.runs.Unblock(context.Background(), "strict", failing.InstanceID)
	if err != nil || n != 1 {
		t.Fatalf("unblock: %d, %v", n, err)
	}
	e.waitAll(later, 20*time.Second)
	checkSequential(t, e.spans("strict")[1:])
}

// A STRICT_SEQUENTIAL workflow blocked by a failed run resumes when that
// run is restarted; the restart runs first.
func TestStrictSequentialResumesAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(sleepDef("strict_restart", 0.01), `"STRICT_SEQUENTIAL"`))
	failing := e.start("strict_restart", workflow.Params{"fail": workflow.LiteralParam(workflow.ParamTypeBoolean, true)})
	later := e.startAll("strict_restart", 3)
	e.wait(failing, 10*time.Second)
	restarted, err := e.runs.Restart(context.Background(), execution.RestartRequest{
		WorkflowID: "strict_restart", InstanceID: failing.InstanceID, Policy: execution.RestartFromBeginning,
		RunParams: workflow.Params{"fail": workflow.LiteralParam(workflow.ParamTypeBoolean, false)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(restarted, 10*time.Second); got.Status != instance.WorkflowSucceeded || got.RunID != 2 {
		t.Fatalf("restart run %d ended %s", got.RunID, got.Status)
	}
	e.waitAll(later, 20*time.Second)
	spans := e.spans("strict_restart")
	checkSequential(t, spans[1:]) // instance 1 run 2, then instances 2..4
}

// FIRST_ONLY: starts while a run is in progress are recorded STOPPED at
// once and never run.
func TestFirstOnlyDropsStartsWhileRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(sleepDef("first", 60), `"FIRST_ONLY"`))
	insts := e.startAll("first", 10)
	var kept []runSpan
	for _, s := range e.spans("first") {
		switch {
		case s.status == instance.WorkflowStopped && strings.Contains(s.timeline, "FIRST_ONLY"):
		case s.status == instance.WorkflowStopped:
			t.Errorf("run %d stopped without the FIRST_ONLY reason: %s", s.iid, s.timeline)
		default:
			kept = append(kept, s)
		}
	}
	if len(kept) != 1 || kept[0].iid != insts[0].InstanceID {
		t.Fatalf("kept runs %+v, want only instance %d", kept, insts[0].InstanceID)
	}
	e.waitStep(insts[0], "nap", instance.StepRunning)
	// Once the run is over, a new start runs.
	if _, err := e.runs.Act(context.Background(), "first", insts[0].InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.wait(insts[0], 10*time.Second)
	next := e.start("first", nil)
	if next.Status == instance.WorkflowStopped {
		t.Fatalf("start after the run ended was dropped: %s", next.Timeline)
	}
	e.waitStep(next, "nap", instance.StepRunning)
}

// LAST_ONLY: a new start stops the running run and the newest one runs.
func TestLastOnlyKeepsNewest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(sleepDef("last", 60), `"LAST_ONLY"`))
	first := e.start("last", nil)
	e.waitStep(first, "nap", instance.StepRunning)
	insts := e.startAll("last", 10)
	newest := insts[len(insts)-1]
	e.waitStep(newest, "nap", instance.StepRunning)
	for _, inst := range append([]*execution.Instance{first}, insts[:len(insts)-1]...) {
		got := e.wait(inst, 10*time.Second)
		if got.Status != instance.WorkflowStopped || !strings.Contains(string(got.Timeline), "LAST_ONLY") {
			t.Errorf("run %d is %s: %s", inst.InstanceID, got.Status, got.Timeline)
		}
	}
	if _, err := e.runs.Act(context.Background(), "last", newest.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.wait(newest, 10*time.Second)
}

// PARALLEL with workflow_concurrency 3: never more than 3 runs at once,
// admitted in trigger order.
func TestParallelRespectsConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(sleepDef("par", 0.15), `{"rule":"PARALLEL","workflow_concurrency":3}`))
	insts := e.startAll("par", 12)
	e.waitAll(insts, 30*time.Second)
	spans := e.spans("par")
	for _, s := range spans {
		if s.status != instance.WorkflowSucceeded {
			t.Errorf("run %d ended %s", s.iid, s.status)
		}
	}
	if n := maxOverlap(spans); n > 3 || n < 2 {
		t.Errorf("%d runs overlapped, want up to 3 (and more than 1)", n)
	}
	// Admission is FIFO: run n+3 starts after run n ended... at the latest
	// after some run ended; run n never starts after run n+3.
	for i := 0; i+3 < len(spans); i++ {
		if spans[i+3].start.Before(*spans[i].start) {
			t.Errorf("run %d started before run %d", spans[i+3].iid, spans[i].iid)
		}
	}
}

// workflow_concurrency 0 pauses the workflow: runs queue. Raising it in the
// properties admits the queued runs.
func TestZeroConcurrencyPausesUntilPropertiesChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{AdmitInterval: 100 * time.Millisecond})
	def := sleepDef("paused", 0.01)
	e.push(withStrategy(def, `{"rule":"PARALLEL","workflow_concurrency":0}`))
	insts := e.startAll("paused", 4)
	time.Sleep(400 * time.Millisecond)
	for _, s := range e.spans("paused") {
		if s.status != instance.WorkflowCreated || !s.queued {
			t.Fatalf("run %d is %s in a paused workflow", s.iid, s.status)
		}
	}
	e.push(withStrategy(def, `"SEQUENTIAL"`))
	e.waitAll(insts, 20*time.Second)
	checkSequential(t, e.spans("paused"))
}

// Queued runs survive an engine crash: a new node admits them in order,
// one at a time.
func TestSequentialAcrossEngineRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.engine(flow.Config{NodeID: "node-a", Lease: time.Second})
	e.push(sleepDef("seq_restart", 0.2))
	insts := e.startAll("seq_restart", 6)
	e.waitStep(insts[1], "nap", instance.StepRunning)
	a.Crash()
	e.engine(flow.Config{NodeID: "node-b", Lease: time.Second})
	e.waitAll(insts, 30*time.Second)
	checkSequential(t, e.spans("seq_restart"))
}

// A PARALLEL limit holds across an engine crash: the runs in flight are
// taken over and the queued ones admitted as they end, never more than
// the limit at once.
func TestParallelLimitAcrossEngineRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.engine(flow.Config{NodeID: "node-a", Lease: time.Second})
	e.push(withStrategy(sleepDef("par_restart", 0.3), `{"rule":"PARALLEL","workflow_concurrency":2}`))
	insts := e.startAll("par_restart", 8)
	e.waitStep(insts[0], "nap", instance.StepRunning)
	a.Crash()
	e.engine(flow.Config{NodeID: "node-b", Lease: time.Second})
	e.waitAll(insts, 30*time.Second)
	spans := e.spans("par_restart")
	for _, s := range spans {
		if s.status != instance.WorkflowSucceeded {
			t.Errorf("run %d ended %s", s.iid, s.status)
		}
	}
	if n := maxOverlap(spans); n > 2 {
		t.Errorf("%d runs overlapped, limit 2", n)
	}
}

// Starts trickling in while runs end, with the admission sweep off: a start
// that queues behind a run ending at that very moment is admitted anyway
// (by the end's admission or by the start's own second admission).
func TestStartsRacingEndsNeverStrandARun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{AdmitInterval: time.Hour})
	e.push(chainJSON("trickle", 1))
	var insts []*execution.Instance
	for i := range 120 {
		insts = append(insts, e.start("trickle", nil))
		time.Sleep(time.Duration(i%4) * time.Millisecond)
	}
	e.waitAll(insts, 30*time.Second)
	checkSequential(t, e.spans("trickle"))
}
