package params

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// Batch evaluates the workflow params of many runs of one definition that
// differ only in their instance id and in a few literal run params (a
// foreach step's iterations: the loop params and loop_index). What the
// runs share is evaluated once, when the batch is made; each run then
// evaluates only the params that differ (the varying run params, the
// instance id) and those that read them, directly or through others.
//
// A param is shared only when nothing it reads varies: a literal whose
// strings interpolate no varying param, or one of Maestro's default
// expressions left as it is (they read RUN_TS, the time zones, the
// initiator's type and the owner, which the runs of a batch share). Any
// other expression, and any param with a validator, is evaluated for each
// run, so a run's values are those EvaluateWorkflow gives it with the
// batch's time as RUN_TS.
type Batch struct {
	in     WorkflowInput
	defs   workflow.Params
	vary   map[string]bool
	own    workflow.Params // the defs evaluated per run, varying run params aside
	shared Values
	base   map[string]any
	json   []byte // shared as a JSON object
	used   int    // shared's encoded size (MaxBytes)
}

// NewBatch evaluates the shared params of the runs in (its RunParams those
// of one of the runs, its InstanceID that run's) whose run params named in
// varying differ from run to run. in.Now, when zero, is the time of the
// call: every run of the batch has it as RUN_TS. A batch whose params read
// signals is refused (each run reads its own); the caller evaluates each
// run on its own.
func NewBatch(ctx context.Context, in WorkflowInput, varying []string) (*Batch, error) {
	if in.Signals != nil || ReadsSignals(in.Workflow.Params) || ReadsSignals(in.RunParams) {
		return nil, fmt.Errorf("params of runs that read signals are evaluated run by run")
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	b := &Batch{in: in, vary: map[string]bool{WorkflowInstanceID: true}}
	for _, name := range varying {
		b.vary[name] = true
	}
	// The defs without the varying run params, which each run overrides
	// with its own, and those of the run in.
	sharedIn := in
	sharedIn.RunParams = workflow.Params{}
	first := workflow.Params{}
	for name, p := range in.RunParams {
		if b.vary[name] {
			first[name] = p
		} else {
			sharedIn.RunParams[name] = p
		}
	}
	var err error
	if b.defs, err = WorkflowDefs(sharedIn); err != nil {
		return nil, err
	}
	if err := CheckOverrides(b.defs, first, in.Phase); err != nil {
		return nil, err
	}
	defs := maps.Clone(b.defs)
	override(defs, first)
	_, _, deps, err := planDeps(defs, *workflowSet())
	if err != nil {
		return nil, err
	}
	own := map[string]bool{}
	for name, def := range defs {
		if b.vary[name] || def.Validator != "" || (def.Expression != nil && precompiled(name, def) == nil) {
			own[name] = true
		}
	}
	// Whatever reads a param evaluated per run is evaluated per run.
	for changed := true; changed; {
		changed = false
		for name, ds := range deps {
			if own[name] {
				continue
			}
			for _, d := range ds {
				if own[d] {
					own[name], changed = true, true
					break
				}
			}
		}
	}
	all, err := evaluateWorkflowDefs(ctx, &in, defs)
	if err != nil {
		return nil, err
	}
	b.own = workflow.Params{}
	b.shared = Values{}
	b.base = map[string]any{}
	size := budget{limit: MaxBytes}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		switch {
		case own[name]:
			if def, ok := b.defs[name]; ok {
				b.own[name] = def
			}
		default:
			v := all[name]
			b.shared[name] = v
			b.base[name] = v.Value
			_ = size.add(name, v)
		}
	}
	b.used = size.used
	if b.json, err = json.Marshal(b.shared); err != nil {
		return nil, fmt.Errorf("encode shared params: %w", err)
	}
	return b, nil
}

// EvaluateSplit evaluates the params of the batch's run instanceID whose
// varying run params are runParams (the names given to NewBatch, no
// others). It returns the values, all of them, and their JSON in two
// objects that have no name in common: shared, the params the batch's
// runs share (the same slice for every run of the batch; nil when they
// share none), and own, the run's. The run's params are both objects'
// members, which the database joins when it stores them
// (run.Local.ParamsBase), so that a batch sends and parses what its runs
// share once.
func (b *Batch) EvaluateSplit(ctx context.Context, instanceID int64, runParams workflow.Params) (vals Values, shared, own []byte, err error) {
	for name := range runParams {
		if !b.vary[name] || name == WorkflowInstanceID {
			return nil, nil, nil, fmt.Errorf("param %s is not one the batch's runs vary", name)
		}
	}
	if err := CheckOverrides(b.defs, runParams, b.in.Phase); err != nil {
		return nil, nil, nil, err
	}
	defs := maps.Clone(b.own)
	override(defs, runParams)
	defs[WorkflowInstanceID] = workflow.Param{Type: workflow.ParamTypeLong, Value: instanceID, Mode: workflow.ParamModeConstant}
	in := b.in
	in.InstanceID = instanceID
	ctx = context.WithValue(ctx, instanceKey{}, &in)
	evaluated, err := EvaluateIn(ctx, defs, Scope{Base: b.base, used: b.used, set: workflowSet()})
	if err != nil {
		return nil, nil, nil, err
	}
	if own, err = json.Marshal(evaluated); err != nil {
		return nil, nil, nil, fmt.Errorf("encode params: %w", err)
	}
	if len(b.shared) > 0 {
		shared = b.json
	}
	vals = make(Values, len(b.shared)+len(evaluated))
	maps.Copy(vals, b.shared)
	maps.Copy(vals, evaluated)
	return vals, shared, own, nil
}

// evaluateWorkflowDefs evaluates a run's merged workflow defs, as
// EvaluateWorkflow does.
func evaluateWorkflowDefs(ctx context.Context, in *WorkflowInput, defs workflow.Params) (Values, error) {
	ctx = context.WithValue(ctx, instanceKey{}, in)
	return EvaluateIn(ctx, defs, Scope{set: workflowSet()})
}
