package params

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/sel"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// TestKeptProgramsCallTheirEvaluationsFunctions: a workflow's expressions
// compiled for its dry run at push (params.getFromSignal answering the
// dry run's value) are kept, and the run that a signal starts later
// reads the signal: a kept program calls the functions it was kept for,
// never another evaluation's.
func TestKeptProgramsCallTheirEvaluationsFunctions(t *testing.T) {
	ctx := context.Background()
	wf := &workflow.Workflow{ID: "wf", Params: workflow.Params{
		"day":   workflow.ExpressionParam(workflow.ParamTypeLong, `params.getFromSignal("day")`),
		"label": workflow.ExpressionParam(workflow.ParamTypeString, `"run-" + day`),
	}, SignalTriggers: []workflow.SignalTrigger{{Params: workflow.Params{"day": workflow.LiteralParam(workflow.ParamTypeLong, int64(1))}}}}
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	dry, err := EvaluateWorkflow(ctx, WorkflowInput{Workflow: wf, DryRun: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := dry["day"].Value; got != DryRunSignalValue {
		t.Fatalf("dry run: day = %v, want %v", got, DryRunSignalValue)
	}
	names := workflowSet().key
	compiled.mu.RLock()
	prog := compiled.m[compiledKey{`params.getFromSignal("day")`, names}]
	kept := prog != nil && compiled.m[compiledKey{`"run-" + day`, names}] != nil
	compiled.mu.RUnlock()
	if !kept {
		t.Fatal("the workflow params' programs were not kept")
	}
	signalled, err := EvaluateWorkflow(ctx, WorkflowInput{Workflow: wf, Now: now,
		Signals: &SignalSource{Trigger: true, TriggerParams: map[string]any{"day": int64(20260301)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := signalled["day"].Value; got != int64(20260301) {
		t.Fatalf("a run started by a signal: day = %v, want the signal's 20260301", got)
	}
	if got := signalled["label"].Value; got != "run-20260301" {
		t.Fatalf("label = %v", got)
	}
	compiled.mu.RLock()
	keptSignalled := compiled.m[compiledKey{`params.getFromSignal("day")`, signalledSet().key}]
	compiled.mu.RUnlock()
	if keptSignalled == nil || keptSignalled == prog {
		t.Error("the signalled run's program was not kept apart from the dry run's")
	}
}

// TestStepProgramsAreKeptAndReadTheirOwnUpstream: a step's expression that
// reads an upstream step is compiled once, and every attempt that runs it
// reads its own upstream.
func TestStepProgramsAreKeptAndReadTheirOwnUpstream(t *testing.T) {
	ctx := context.Background()
	const src = `params.getFromStep("up", "n") * 2 + step_probe_7f3a`
	defs := workflow.Params{
		"step_probe_7f3a": workflow.LiteralParam(workflow.ParamTypeLong, int64(1)),
		"doubled":         workflow.ExpressionParam(workflow.ParamTypeLong, src),
	}
	var progs []*sel.Program
	for _, n := range []int64{5, 11, 5} {
		steps := func(step, name string) (any, bool) {
			if step == "up" && name == "n" {
				return n, true
			}
			return nil, false
		}
		got, err := EvaluateIn(ctx, defs, Scope{Steps: steps})
		if err != nil {
			t.Fatal(err)
		}
		if want := 2*n + 1; got["doubled"].Value != want {
			t.Fatalf("upstream n = %d: doubled = %v, want %d", n, got["doubled"].Value, want)
		}
		compiled.mu.RLock()
		for k, p := range compiled.m {
			if k.expr == src {
				progs = append(progs, p)
			}
		}
		compiled.mu.RUnlock()
	}
	if len(progs) != 3 || progs[0] != progs[1] || progs[1] != progs[2] {
		t.Fatalf("the step's expression was compiled %d times over 3 attempts, want once", len(slices.Compact(progs)))
	}
}

// A program kept for an evaluation's functions, run where no functions
// are given, reports the function missing rather than calling another's.
func TestBoundFunctionWithoutItsEvaluation(t *testing.T) {
	prog, err := compileExpression(`params.getFromStep("up", "n")`, newFuncSet(map[string]sel.Func{"params.getFromStep": nil}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prog.Eval(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "params.getFromStep is not available here") {
		t.Fatalf("got %v, want the function reported missing", err)
	}
}

// Compile keeps a program that calls no evaluation's functions by its
// text: a while step's condition is compiled once, not per iteration.
func TestCompileKeepsProgramsByText(t *testing.T) {
	const cond = `loop_index < 3 && compile_probe_91c2`
	first, err := Compile(cond)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Compile(cond)
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Fatal("the condition was compiled again")
	}
	if _, err := Compile(`loop_index <`); err == nil {
		t.Fatal("a malformed expression compiled")
	}
}

// TestKeptValidatorsAreBounded: validators of ever new texts (pushes over
// an engine's life) do not grow the kept map past keptLimit, and a
// validator compiled after it started again is kept and checks values.
func TestKeptValidatorsAreBounded(t *testing.T) {
	for i := range keptLimit + 10 {
		if _, err := compileValidator(fmt.Sprintf("param > %d", i), funcSet{}); err != nil {
			t.Fatal(err)
		}
		if n := validatorCache.len(); n > keptLimit {
			t.Fatalf("%d validators kept after %d compiled, want at most %d", n, i+1, keptLimit)
		}
	}
	last := fmt.Sprintf("param > %d", keptLimit+9)
	c, ok := validatorCache.get(validatorKey{src: last})
	if !ok {
		t.Fatal("the last validator compiled was not kept")
	}
	if err := c.check(context.Background(), int64(keptLimit), nil); err == nil {
		t.Errorf("%s passed %d", last, keptLimit)
	}
	if err := c.check(context.Background(), int64(keptLimit+10), nil); err != nil {
		t.Errorf("%s refused %d: %v", last, keptLimit+10, err)
	}
}
