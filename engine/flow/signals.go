package flow

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/signal"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Signal dependencies (docs/signals.md). An attempt WAITING_FOR_SIGNALS
// checks its dependencies against the stored signals; while they are not
// met it stays there, registered as a waiter both here (waits.go) and in
// the database (step_signal_wait), so that a signal announced later, or a
// bypass, wakes it through a step_update message. The recheck timer is
// the fallback for a missed wake.

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
	deps, err := evaluateDependencies(ctx, defs, a.f.plainParams)
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
		a.pending = append(a.pending, instance.LogEvent("INFO", "signal dependencies bypassed by "+res.BypassedBy))
		return false, nil
	case res.Met:
		a.stopWaiting()
		for i, s := range res.Matched {
			a.pending = append(a.pending, instance.LogEvent("INFO",
				fmt.Sprintf("signal dependency %s met by signal instance %d", deps[i].Name, s.Seq)))
		}
		return false, nil
	}
	// The step's timeout runs while it waits, from when it began waiting
	// (stored, so a restart keeps the clock).
	if a.timeout == nil && a.started.IsZero() {
		a.started = res.Since
		a.armTimeout()
		a.started = time.Time{}
	}
	if len(a.pending) == 0 {
		return true, nil // already durable: a recheck, or an attempt resumed after a restart
	}
	a.pending = append(a.pending, instance.LogEvent("INFO", "waiting for signals: "+describe(deps)))
	return true, a.persist(ctx, false, false)
}

// evaluateDependencies interpolates the dependencies' names and evaluates
// their match params (LONG or STRING) with the workflow's params. Each match
// param is evaluated on its own, so that "${dt}" in the match param dt reads
// the workflow's dt.
func evaluateDependencies(ctx context.Context, defs []workflow.SignalDependency, vals map[string]any) ([]signal.Dependency, error) {
	ctx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	out := make([]signal.Dependency, 0, len(defs))
	for i, d := range defs {
		name, err := params.Interpolate(d.Name, vals)
		if err != nil {
			return nil, fmt.Errorf("signal dependency %d: name %q: %w", i, d.Name, err)
		}
		dep := signal.Dependency{Name: name}
		for _, k := range slices.Sorted(maps.Keys(d.MatchParams)) {
			m := d.MatchParams[k]
			got, err := params.Evaluate(ctx, workflow.Params{k: m.Param}, vals, nil)
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
