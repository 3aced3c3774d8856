package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Signal dependencies (docs/signals.md). An attempt WAITING_FOR_SIGNALS
// checks its dependencies against the stored signals; while they are not
// met it stays there, registered as a waiter both here (waits.go) and in
// the database (step_signal_wait), so that a signal announced later, or a
// bypass, wakes it through a step_update message. The recheck timer is
// the fallback for a missed wake.

// signalWait is what an attempt knows of its signals: matched are the
// signals that met its signal dependencies, source what its params read
// with the signal functions, built on first use.
type signalWait struct {
	matched []params.SignalRef
	source  *params.SignalSource
}

// signalRecheck is how often a waiting attempt looks again unwoken; a
// variable so tests can shorten it.
var signalRecheck = 30 * time.Second

// awaitSignals checks the attempt's signal dependencies. wait is true when
// the attempt must stay WAITING_FOR_SIGNALS (durably: the status is
// written before it waits) or has ended because its dependencies could not
// be evaluated.
func (a *stepActor) awaitSignals(ctx context.Context) (wait bool, err error) {
	defs := a.node.Common().SignalDependencies
	if len(defs) == 0 {
		return false, nil
	}
	// Maestro evaluates dependencies with the workflow's params: the step's
	// own are evaluated later, in EVALUATING_PARAMS.
	deps, err := a.evaluateDependencies(ctx, defs)
	if err != nil {
		return true, a.fail(ctx, stepruntime.Result{State: stepruntime.UserError, Message: err.Error()})
	}
	// Registered here before the check, so that a signal announced right
	// after it wakes the attempt.
	a.waitFor(signalRecheck, nil)
	key := signal.WaitKey{WorkflowID: a.f.ref.WorkflowID, InstanceID: a.f.ref.InstanceID, RunID: a.f.ref.RunID,
		StepID: a.id, AttemptID: a.attempt}
	var res signal.CheckResult
	err = a.f.eng.retryWrite(ctx, func(ctx context.Context) error {
		var err error
		res, err = signal.NewStore(a.f.eng.db).Check(ctx, key, a.f.grp.id, deps)
		return err
	})
	if err != nil {
		return false, err
	}
	switch {
	case res.BypassedBy != "":
		a.stopWaiting()
		a.sig.matched = make([]params.SignalRef, len(res.Matched))
		for i, s := range res.Matched {
			if s != nil {
				a.sig.matched[i] = params.SignalRef{Name: s.Name, Seq: s.Seq}
			}
		}
		a.w.pending = append(a.w.pending, instance.LogEvent("INFO", "signal dependencies bypassed by "+res.BypassedBy))
		return false, nil
	case res.Met:
		a.stopWaiting()
		a.sig.matched = make([]params.SignalRef, len(res.Matched))
		for i, s := range res.Matched {
			a.sig.matched[i] = params.SignalRef{Name: s.Name, Seq: s.Seq}
			a.w.pending = append(a.w.pending, instance.LogEvent("INFO",
				fmt.Sprintf("signal dependency %s met by signal instance %d", deps[i].Name, s.Seq)))
		}
		return false, nil
	}
	// The step's timeout runs while it waits, from when it began waiting
	// (stored, so a restart keeps the clock).
	if a.timeout.timer == nil && a.started.IsZero() {
		a.started = res.Since
		a.armTimeout()
		a.started = time.Time{}
	}
	if len(a.w.pending) == 0 {
		return true, nil // already durable: a recheck, or an attempt resumed after a restart
	}
	a.w.pending = append(a.w.pending, instance.LogEvent("INFO", "waiting for signals: "+describe(deps)))
	return true, a.persist(ctx, false, false)
}

// evaluateDependencies interpolates the dependencies' names and evaluates
// their match params (LONG or STRING) with the workflow's params (and the
// signals that started the run, params.getFromSignal). Each match param
// is evaluated on its own, so that "${dt}" in the match param dt reads the
// workflow's dt.
func (a *stepActor) evaluateDependencies(ctx context.Context, defs []workflow.SignalDependency) ([]signal.Dependency, error) {
	ctx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	vals := a.f.plain()
	var funcs map[string]sel.Func
	for _, d := range defs {
		for _, m := range d.MatchParams {
			if params.ReadsSignals(workflow.Params{"": m.Param}) && funcs == nil {
				src, err := a.signalSource(ctx)
				if err != nil {
					return nil, err
				}
				ctx, funcs = params.WithSignals(ctx, src), params.SignalFuncs
			}
		}
	}
	out := make([]signal.Dependency, 0, len(defs))
	for i, d := range defs {
		name, err := params.Interpolate(d.Name, vals)
		if err != nil {
			return nil, fmt.Errorf("signal dependency %d: name %q: %w", i, d.Name, err)
		}
		dep := signal.Dependency{Name: name}
		for _, k := range slices.Sorted(maps.Keys(d.MatchParams)) {
			m := d.MatchParams[k]
			got, err := params.Evaluate(ctx, workflow.Params{k: m.Param}, vals, funcs)
			if err != nil {
				return nil, fmt.Errorf("signal dependency %s: match param %s: %w", name, k, err)
			}
			v := got[k].Value
			switch v.(type) {
			case int64, string:
			default:
				return nil, fmt.Errorf("signal dependency %s: match param %s is %T; it must be LONG or STRING", name, k, v)
			}
			dep.Matches = append(dep.Matches, signal.Match{Param: k, Operator: m.Operator, Value: v})
		}
		out = append(out, dep)
	}
	return out, nil
}

// sqlRunInitiator reads a run's initiator, for the signal functions.
const sqlRunInitiator = `SELECT initiator FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`

// signalSource is what the attempt's params read with the signal functions
// (params.getFromSignal, getFromSignalDependency): the run's SIGNAL
// initiator, read on first use, the signal instances it names, and the
// signals that met the attempt's dependencies.
func (a *stepActor) signalSource(ctx context.Context) (*params.SignalSource, error) {
	if a.sig.source != nil {
		return a.sig.source, nil
	}
	var initiator []byte
	if err := a.f.eng.store.DB().QueryRow(ctx, sqlRunInitiator, a.f.ref.WorkflowID, a.f.ref.InstanceID, a.f.ref.RunID).
		Scan(&initiator); err != nil {
		return nil, fmt.Errorf("read the initiator of %s: %w", a.f.ref, err)
	}
	src, err := params.RunSignals(initiator, a.f.eng.readSignal)
	if err != nil {
		return nil, err
	}
	src.Dependencies = a.signalDependencies
	a.sig.source = src
	return src, nil
}

// readSignal reads the params of a signal instance.
func (e *Engine) readSignal(ctx context.Context, ref params.SignalRef) (map[string]any, error) {
	s, err := signal.NewStore(e.store.DB()).Get(ctx, ref.Name, ref.Seq)
	if err != nil {
		return nil, err
	}
	return s.Params, nil
}

// signalDependencies returns the signals that met the attempt's
// dependencies: those its check found, or for an attempt rebuilt after a
// restart those its closed wait recorded.
func (a *stepActor) signalDependencies(ctx context.Context) ([]params.SignalRef, error) {
	if a.sig.matched != nil {
		return a.sig.matched, nil
	}
	refs, err := signal.NewStore(a.f.eng.store.DB()).Matched(ctx, signal.WaitKey{WorkflowID: a.f.ref.WorkflowID,
		InstanceID: a.f.ref.InstanceID, RunID: a.f.ref.RunID, StepID: a.id, AttemptID: a.attempt})
	if err != nil {
		return nil, err
	}
	out := make([]params.SignalRef, len(refs))
	for i, r := range refs {
		out[i] = params.SignalRef{Name: r.Name, Seq: r.Seq}
	}
	a.sig.matched = out
	return out, nil
}

// withSignals adds the signal functions to funcs, and the attempt's
// signal source to ctx, when defs call them.
func (a *stepActor) withSignals(ctx context.Context, defs workflow.Params, funcs map[string]sel.Func) (context.Context, map[string]sel.Func, error) {
	if !params.ReadsSignals(defs) {
		return ctx, funcs, nil
	}
	src, err := a.signalSource(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := maps.Clone(funcs)
	if out == nil {
		out = map[string]sel.Func{}
	}
	maps.Copy(out, params.SignalFuncs)
	return params.WithSignals(ctx, src), out, nil
}

// outputSignals evaluates the step's signal_outputs for a successful
// attempt (names interpolated, params and payload evaluated with the
// attempt's params, the workflow's and the upstream steps') and returns
// them as signal.OutputsSQL reads them, with their names for the timeline.
// An output that cannot be evaluated, or is not a valid signal, fails the
// attempt (as a user error) instead of succeeding without it.
func (a *stepActor) outputSignals(ctx context.Context) ([]byte, []string, error) {
	outs := a.node.Common().SignalOutputs
	if len(outs) == 0 {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	vals := maps.Clone(a.f.plain())
	if vals == nil {
		vals = map[string]any{}
	}
	maps.Copy(vals, a.params.Plain())
	source := map[string]any{"workflow_id": a.f.ref.WorkflowID, "workflow_instance_id": a.f.ref.InstanceID,
		"workflow_run_id": a.f.ref.RunID, "step_id": a.id, "step_attempt_id": a.attempt, "step_instance_uuid": a.uuid}
	rows := make([]signal.Output, 0, len(outs))
	names := make([]string, 0, len(outs))
	for i, o := range outs {
		name, err := params.Interpolate(o.Name, vals)
		if err != nil {
			return nil, nil, fmt.Errorf("signal output %d: name %q: %w", i, o.Name, err)
		}
		evaluate := func(defs workflow.Params) (map[string]any, error) {
			if len(defs) == 0 {
				return map[string]any{}, nil
			}
			ectx, funcs, err := a.withSignals(ctx, defs, nil)
			if err != nil {
				return nil, err
			}
			got, err := params.EvaluateIn(ectx, defs, params.Scope{Base: vals, Steps: a.lookupUpstream, Funcs: funcs})
			if err != nil {
				return nil, err
			}
			return got.Plain(), nil
		}
		ps, err := evaluate(o.Params)
		if err != nil {
			return nil, nil, fmt.Errorf("signal output %s: params: %w", name, err)
		}
		payload, err := evaluate(o.Payload)
		if err != nil {
			return nil, nil, fmt.Errorf("signal output %s: payload: %w", name, err)
		}
		payload["signal_source"] = source
		id := signal.OutputInstanceID(a.f.ref.WorkflowID, a.f.ref.InstanceID, a.f.ref.RunID, a.id, a.attempt, i)
		req := signal.Request{Name: name, Params: ps, Payload: payload, RequestID: id}
		if err := req.Check(); err != nil {
			return nil, nil, fmt.Errorf("signal output %s: %w", name, err)
		}
		rows = append(rows, signal.Output{Name: name, InstanceID: id, Params: req.Params, Payload: payload,
			WorkflowID: a.f.ref.WorkflowID, InstanceNo: a.f.ref.InstanceID, RunID: a.f.ref.RunID, StepID: a.id,
			AttemptID: a.attempt, Position: i})
		names = append(names, name)
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("encode signal outputs: %w", err)
	}
	return b, names, nil
}

// describe renders dependencies for the timeline: name(param op value, ...).
func describe(deps []signal.Dependency) string {
	parts := make([]string, len(deps))
	for i, d := range deps {
		ms := make([]string, len(d.Matches))
		for j, m := range d.Matches {
			ms[j] = fmt.Sprintf("%s %s %v", m.Param, m.Operator, m.Value)
		}
		parts[i] = d.Name
		if len(ms) > 0 {
			parts[i] += "(" + strings.Join(ms, ", ") + ")"
		}
	}
	return strings.Join(parts, "; ")
}
