package flow_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
)

// hugeArray is a SEL expression inside every SEL limit whose result is a
// 98 MB string array encoded as JSON (25,000 references to one 3.9 KB
// string): issue 15, defect 1.
const hugeArray = `String s = \"x\".repeat(3900); String[] a = new String[25000]; for (int i = 0; i < 25000; i++) { a[i] = s; } return a;`

// A run whose param is a 98 MB string array fails alone, at once, with the
// limit named on its timeline; a run started beside it succeeds.
func TestHugeParamRunFailsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"huge","params":{"big":{"type":"STRING_ARRAY","expression":"` + hugeArray + `"}},
		"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	e.push(`{"workflow":{"id":"steps_huge","steps":[{"step":{"id":"s","type":"NoOp","retry_policy":{"error_retry_limit":0},
		"params":{"big":{"type":"STRING_ARRAY","expression":"` + hugeArray + `"}}}}]}}`)
	e.push(`{"workflow":{"id":"plain","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	huge := e.start("huge", nil)
	stepHuge := e.start("steps_huge", nil)
	plain := e.start("plain", nil)

	got := e.wait(huge, 30*time.Second)
	if got.Status != instance.WorkflowFailed || !strings.Contains(string(got.Timeline), "750000") {
		t.Fatalf("huge run %s: %s", got.Status, got.Timeline)
	}
	if got := e.wait(stepHuge, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run with a huge step param %s", got.Status)
	}
	a, err := e.runs.Attempt(context.Background(), "steps_huge", stepHuge.InstanceID, 1, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Status.IsTerminal() || !strings.Contains(string(a.Timeline), "params are larger than the limit") {
		t.Fatalf("step %s: %s", a.Status, a.Timeline)
	}
	if got := e.wait(plain, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("plain run %s", got.Status)
	}
	// Nothing of the failed runs is left held.
	waitIdle(t, eng)
}

// waitIdle waits until the engine's flows hold nothing of its budget but
// idle cached definitions.
func waitIdle(t *testing.T, eng *flow.Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		used, _ := eng.MemoryInUse()
		if used <= 64<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the budget still held", used)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Runs that together need more than the budget wait their turn instead of
// growing the process: every one succeeds, and the budget is never
// exceeded. A run that could never fit fails alone.
func TestMemoryBudgetMakesRunsWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Each run holds 2 × 600 KB of params: at most 4 fit in 6 MB.
	const budget = 6 << 20
	eng := e.engine(flow.Config{MemoryBudget: budget})
	e.push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"fat",
		"params":{"blob":{"type":"STRING","expression":"\"y\".repeat(600000)"}},
		"steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":0.3}}]}}`)
	var runs []*execution.Instance
	for range 12 {
		runs = append(runs, e.start("fat", nil))
	}
	for _, r := range runs {
		if got := e.wait(r, 60*time.Second); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run %d %s: %s", r.InstanceID, got.Status, got.Timeline)
		}
	}
	if _, peak := eng.MemoryInUse(); peak > budget {
		t.Fatalf("peak %d bytes, budget %d", peak, budget)
	}
	waitIdle(t, eng)
}

// A run that needs more than the whole budget fails at once, with the
// reason, and never takes the budget from others.
func TestRunOverTheWholeBudgetFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The expression's 700 KB fit (in one 1 MiB chunk of the budget); the
	// 1.4 MB the run would hold do not.
	eng := e.engine(flow.Config{MemoryBudget: 1200 << 10})
	e.push(`{"workflow":{"id":"fat","params":{"blob":{"type":"STRING","expression":"\"y\".repeat(700000)"}},
		"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	e.push(`{"workflow":{"id":"thin","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	fat, thin := e.start("fat", nil), e.start("thin", nil)
	if got := e.wait(fat, 30*time.Second); got.Status != instance.WorkflowFailed ||
		!strings.Contains(string(got.Timeline), "memory budget") {
		t.Fatalf("fat run %s: %s", got.Status, got.Timeline)
	}
	if got := e.wait(thin, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("thin run %s: %s", got.Status, got.Timeline)
	}
	waitIdle(t, eng)
}

// Expressions share the budget: many evaluations that each allocate tens
// of megabytes run a few at a time, and none fails for it.
func TestExpressionsShareTheBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const budget = 64 << 20
	eng := e.engine(flow.Config{MemoryBudget: budget})
	// 24 strings of 1 MB: about 25 MB allocated by each evaluation.
	expr := `String[] a = new String[24]; for (int i = 0; i < 24; i++) { a[i] = \"z\".repeat(1000000) + i; } return a.length;`
	e.push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"busy","steps":[
		{"step":{"id":"a","type":"NoOp","params":{"n":{"type":"LONG","expression":"` + expr + `"}}}}]}}`)
	var wg sync.WaitGroup
	runs := make([]*execution.Instance, 10)
	for i := range runs {
		wg.Go(func() { runs[i] = e.start("busy", nil) })
	}
	wg.Wait()
	for _, r := range runs {
		got := e.wait(r, 90*time.Second)
		if got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run %d %s: %s", r.InstanceID, got.Status, got.Timeline)
		}
	}
	if _, peak := eng.MemoryInUse(); peak > budget {
		t.Fatalf("peak %d, budget %d", peak, budget)
	}
	waitIdle(t, eng)
}
