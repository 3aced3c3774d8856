package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// An attempt's params: merged in Maestro's order, evaluated under the
// node's memory budget, and merged with the outputs its runtime (or an
// external job) sets.

// stepInputs is what the attempt's params are merged from.
type stepInputs struct {
	// upstream is the read-only view of the other steps' params (outputs
	// merged in) the attempt's params may read, taken from the flow when
	// the attempt was created; nil when its params read none, or for a
	// resumed attempt, which loads it from the database if it needs it.
	upstream map[string]params.Values
	// defs are the attempt's merged param defs, for the modes of outputs.
	defs workflow.Params
	// memoryWaits counts the times the attempt waited for expression
	// memory (maxMemoryWaits).
	memoryWaits int
}

// ParamInjector is implemented by a step runtime that injects params
// derived from its step schema; they are merged after the default general
// params and before the step definition's (see params.StepDefs).
type ParamInjector interface {
	// InjectParams returns the params to inject for the attempt (Params
	// is not set yet).
	InjectParams(a *stepruntime.Attempt) workflow.Params
}

// stepInput is what merging the attempt's params needs.
func (a *stepActor) stepInput() params.StepInput {
	in := params.StepInput{
		WorkflowID: a.f.ref.WorkflowID, InstanceID: a.f.ref.InstanceID, RunID: a.f.ref.RunID,
		StepID: a.id, StepType: string(a.node.Type()), AttemptID: a.attempt, UUID: a.uuid,
		Defs: a.node.Common().Params, WorkflowValues: a.f.params, Steps: a.lookupUpstream,
		Typed: params.StepDefaults(a.node),
	}
	if inj, ok := a.rt.(ParamInjector); ok {
		att := a.runtimeAttempt()
		att.Params = nil
		in.Injected = inj.InjectParams(att)
	}
	return in
}

// evaluateParams merges and evaluates the attempt's params in Maestro's
// order (see params.StepDefs).
func (a *stepActor) evaluateParams(ctx context.Context) error {
	if a.in.upstream == nil && params.ReadsUpstream(a.node.Common().Params) {
		if err := a.loadUpstream(ctx); err != nil {
			return err
		}
	}
	in := a.stepInput()
	var err error
	if in.Template, err = a.templateParams(ctx); err != nil {
		return err
	}
	defs, err := params.StepDefs(in)
	if err != nil {
		return err
	}
	evalCtx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	evalCtx, funcs, err := a.withSignals(evalCtx, defs, a.subworkflowFuncs())
	if err != nil {
		return err
	}
	vals, err := params.EvaluateIn(evalCtx, defs, params.Scope{Base: in.Workflow, Values: in.WorkflowValues, Steps: in.Steps, Funcs: funcs})
	if err != nil {
		return err
	}
	if err := a.f.mem.chargeStep(a.id, paramsFootprint*int64(params.Size(vals, params.MaxBytes+1))); err != nil {
		return err
	}
	a.in.defs, a.params = defs, vals
	a.w.paramsStored, a.w.paramsPatch = false, nil
	return nil
}

// lookupUpstream reads a param of another step from the attempt's view.
func (a *stepActor) lookupUpstream(step, name string) (any, bool) {
	v, ok := a.in.upstream[step][name]
	if !ok {
		return nil, false
	}
	return v.Value, true
}

// loadUpstream builds the upstream view from the database, for an attempt
// rebuilt after a takeover.
func (a *stepActor) loadUpstream(ctx context.Context) error {
	rows, err := a.f.eng.store.LoadLatestAttempts(ctx, a.f.ref)
	if err != nil {
		return err
	}
	// The view is held while the attempt lives (charged under a key of its
	// own, beside the step's params).
	var total int
	for _, r := range rows {
		total += len(r.Params)
	}
	if err := a.f.mem.chargeStep(a.id+"\x00upstream", int64(paramsFootprint*total)); err != nil {
		return err
	}
	a.in.upstream = make(map[string]params.Values, len(rows))
	for _, r := range rows {
		if r.StepID == a.id || len(r.Params) <= 2 {
			continue
		}
		var vals params.Values
		if err := json.Unmarshal(r.Params, &vals); err == nil {
			a.in.upstream[r.StepID] = vals
		}
	}
	return nil
}

// mergeOutputs merges the output params of the runtime's result and those
// an external job set through the API into the attempt's params, so that
// downstream steps read them. Only MUTABLE params may be changed.
func (a *stepActor) mergeOutputs(ctx context.Context, fromRuntime map[string]any) error {
	raw := make(map[string]any, len(fromRuntime))
	maps.Copy(raw, fromRuntime)
	// An external job can only set outputs while the attempt is RUNNING in
	// the database (PUT /output-data refuses otherwise), and RUNNING is
	// written only when the attempt waits for its job: an attempt that
	// never did has no external outputs, and the read is skipped.
	var stored []byte
	if a.w.runningDurable {
		var err error
		if stored, err = a.f.eng.store.ReadOutputData(ctx, a.uuid); err != nil {
			return err
		}
	}
	if len(stored) > 2 {
		var ext params.Values
		if err := json.Unmarshal(stored, &ext); err != nil {
			return fmt.Errorf("output data: %w", err)
		}
		for k, v := range ext {
			raw[k] = v
		}
	}
	if len(raw) == 0 {
		return nil
	}
	outs, err := params.Outputs(a.params, raw)
	if err != nil {
		return &outputError{err}
	}
	if a.in.defs == nil {
		if a.in.defs, err = params.StepDefs(a.stepInput()); err != nil {
			return &outputError{err}
		}
	}
	merged, err := params.MergeOutputs(a.params, a.in.defs, outs)
	if err != nil {
		return &outputError{err}
	}
	if err := a.f.mem.chargeStep(a.id, paramsFootprint*int64(params.Size(merged, params.MaxBytes+1))); err != nil {
		return err
	}
	a.params, a.outputs = merged, outs.Plain()
	if a.w.paramsStored {
		// What MergeOutputs set on the params, for the next update.
		if a.w.paramsPatch == nil {
			a.w.paramsPatch = make(params.Values, len(outs))
		}
		maps.Copy(a.w.paramsPatch, outs)
	}
	return nil
}

// outputError is output params the step may not set; it fails the step.
type outputError struct{ err error }

func (e *outputError) Error() string { return "invalid output params: " + e.err.Error() }

func (e *outputError) Unwrap() error { return e.err }

// An attempt whose params cannot get expression memory (sel.MemoryPool)
// looks again every memoryRecheck, up to maxMemoryWaits times, before it
// fails as a user error.
const (
	memoryRecheck  = time.Second
	maxMemoryWaits = 60
)
