package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// While steps (docs/while.md).
//
// A while step runs its steps as an inline child run, one iteration after
// another, for as long as its condition holds. Each iteration is created
// with the child-run machinery of subworkflow steps (createChild): in one
// transaction with the record of it on the attempt, fenced by the parent's
// generation, exactly once through a parent_key that includes the
// iteration. The step waits for each iteration without holding a worker
// and is woken by the iteration's end through the outbox.

// MaxWhileIterations is the default iteration limit of a while step; the
// step's max_iterations param changes it. Reaching it fails the step.
const MaxWhileIterations = 1000

// ParamMaxIterations is the while step param that sets its iteration limit.
const ParamMaxIterations = "max_iterations"

// whileType is the runtime key of while steps (their node type).
const whileType = string(workflow.StepKindWhile)

// Config keys the step actor passes to the while runtime.
const (
	whileConditionKey = "condition"
	whileStepsKey     = "steps"
)

// Runtime data and output names of a while step.
const (
	// whileIndexKey is the loop_index of the iteration recorded in the
	// attempt's runtime data.
	whileIndexKey = "while_loop_index"
	// whileIterationsKey is the output: how many iterations ran.
	whileIterationsKey = "while_iterations"
)

// whileRuntime runs while steps for one engine.
type whileRuntime struct{ h *host }

// whileConfig is what the step actor tells the runtime of a while step:
// its condition, its steps and whether a stop is a kill.
func whileConfig(w *workflow.While, kill bool) map[string]json.RawMessage {
	cond, _ := json.Marshal(w.Condition)
	steps, _ := json.Marshal(w.Steps)
	return map[string]json.RawMessage{
		whileConditionKey:  cond,
		whileStepsKey:      steps,
		subworkflowKillKey: json.RawMessage(strconv.FormatBool(kill)),
	}
}

// Start has nothing to create: Execute decides about each iteration.
func (r *whileRuntime) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (r *whileRuntime) retryLater(a *stepruntime.Attempt, what string, err error) stepruntime.Result {
	r.h.Logger.Warn("while step: "+what, "workflow_id", a.WorkflowID, "instance_id", a.InstanceID,
		"run_id", a.RunID, "step_id", a.StepID, "error", err.Error())
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: subworkflowPoll}
}

// Execute waits for the running iteration, then evaluates the condition
// and creates the next iteration or ends the step.
func (r *whileRuntime) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	var steps []workflow.StepNode
	if err := json.Unmarshal(a.Config[whileStepsKey], &steps); err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: "decode while steps: " + err.Error()}
	}
	next := int64(0)
	var carried []byte // the loop params the previous iteration hands on
	if child := childRef(a.Data); child.WorkflowID != "" {
		idx := dataInt(a.Data, whileIndexKey)
		status, err := r.h.childStatus(ctx, child)
		if err != nil {
			return r.retryLater(a, "read iteration status", err)
		}
		if !status.IsTerminal() {
			return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: subworkflowPoll}
		}
		if status != instance.WorkflowSucceeded {
			return stepruntime.Result{State: stepruntime.FatalError, Outputs: whileOutputs(idx, idx+1),
				Message: fmt.Sprintf("while iteration %d (run %s) ended %s", idx, child, status)}
		}
		dag, err := workflow.BuildDAG(steps)
		if err != nil {
			return stepruntime.Result{State: stepruntime.FatalError, Message: "while steps: " + err.Error()}
		}
		if carried, err = r.carriedParams(ctx, a, child, dag.TopoOrder()); err != nil {
			return r.retryLater(a, "read iteration params", err)
		}
		next = idx + 1
	}
	parentRef := run.Ref{WorkflowID: a.WorkflowID, InstanceID: a.InstanceID, RunID: a.RunID}
	wfParams, err := r.h.instanceParams(ctx, parentRef)
	if err != nil {
		return r.retryLater(a, "read workflow params", err)
	}
	if childRef(a.Data).WorkflowID == "" {
		// The attempt's first look: a restart carries on where an earlier
		// attempt of the step stopped.
		n, c, ok, err := r.resumePoint(ctx, a, steps, wfParams)
		if err != nil {
			return r.retryLater(a, "find where an earlier attempt stopped", err)
		}
		if ok {
			next, carried = n, c
		}
	}
	holds, err := r.condition(ctx, a, wfParams, carried, next)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Outputs: whileOutputs(next, next), Message: err.Error()}
	}
	if !holds {
		return stepruntime.Result{State: stepruntime.Done, Outputs: finalLoopOutputs(a, carried, next),
			Message: fmt.Sprintf("while condition false after %d iterations", next)}
	}
	limit := int64(MaxWhileIterations)
	if _, ok := a.Params[ParamMaxIterations]; ok {
		limit = dataInt(a.Params, ParamMaxIterations)
	}
	if next >= limit {
		return stepruntime.Result{State: stepruntime.FatalError, Outputs: whileOutputs(next, next),
			Message: fmt.Sprintf("while step reached its iteration limit of %d with the condition still true", limit)}
	}
	inline := workflow.Workflow{ID: a.WorkflowID + ":" + a.StepID, Steps: steps}
	raw, err := json.Marshal(inline)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: "encode while iteration definition: " + err.Error()}
	}
	parent := run.Parent{Ref: parentRef, StepID: a.StepID, AttemptID: a.AttemptID, Iteration: next + 1}
	data, err := r.h.createChild(ctx, r.h.NodeID, parent, childSpec{
		def:    &definition.Version{WorkflowID: inline.ID, Workflow: inline, Raw: raw},
		inline: true,
		data:   map[string]any{whileIndexKey: next},
		runParams: func(wfParams, stepParams []byte) ([]byte, error) {
			return iterationParams(&inline, wfParams, stepParams, carried, next)
		},
	})
	var fatal *childError
	switch {
	case errors.As(err, &fatal):
		return stepruntime.Result{State: stepruntime.FatalError, Outputs: whileOutputs(next, next), Message: fatal.msg}
	case err != nil:
		return r.retryLater(a, "create iteration run", err)
	}
	return stepruntime.Result{State: stepruntime.Continue, Data: data, NextPollDelay: subworkflowPoll,
		Message: fmt.Sprintf("started while iteration %d as run %s", next, childRef(data))}
}

// Terminate stops (or kills) the running iteration.
func (r *whileRuntime) Terminate(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	return r.h.terminateChild(ctx, a, "while iteration")
}

func whileOutputs(loopIndex, iterations int64) map[string]any {
	return map[string]any{workflow.ParamLoopIndex: loopIndex, whileIterationsKey: iterations}
}

// condition evaluates the step's condition over the workflow params, the
// step's params and loop params, the params the previous iteration carried
// (see carriedParams) and loop_index, later ones hiding earlier ones.
func (r *whileRuntime) condition(ctx context.Context, a *stepruntime.Attempt, wfParams, carried []byte, next int64) (bool, error) {
	var cond string
	if err := json.Unmarshal(a.Config[whileConditionKey], &cond); err != nil {
		return false, fmt.Errorf("decode while condition: %w", err)
	}
	env := sel.MapEnv{}
	if len(wfParams) > 2 {
		var vals params.Values
		if err := json.Unmarshal(wfParams, &vals); err != nil {
			return false, fmt.Errorf("decode workflow params: %w", err)
		}
		maps.Copy(env, vals.Plain())
	}
	if lp, ok := a.Params[workflow.ParamLoopParams].(map[string]any); ok {
		maps.Copy(env, lp)
	}
	maps.Copy(env, a.Params)
	if len(carried) > 2 {
		var vals params.Values
		if err := json.Unmarshal(carried, &vals); err != nil {
			return false, fmt.Errorf("decode carried params: %w", err)
		}
		maps.Copy(env, vals.Plain())
	}
	env[workflow.ParamLoopIndex] = next
	prog, err := params.Compile(cond)
	if err != nil {
		return false, fmt.Errorf("while condition: %w", err)
	}
	v, err := prog.Eval(ctx, env)
	if err != nil {
		return false, fmt.Errorf("while condition at loop_index %d: %w", next, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("while condition returned %T, want boolean", v)
	}
	return b, nil
}

// iterationParams are the run params of iteration next: for the first, the
// parent run's params with the step's params and its loop params on top;
// for a later one, the params the previous iteration carried (see
// carriedParams); loop_index always.
func iterationParams(inline *workflow.Workflow, wfParams, stepParams, carried []byte, next int64) ([]byte, error) {
	var out workflow.Params
	var err error
	if next == 0 {
		out, err = inheritedParams(inline, wfParams, stepParams, false)
		if err != nil {
			return nil, err
		}
		var stepVals params.Values
		if len(stepParams) > 2 {
			if err := json.Unmarshal(stepParams, &stepVals); err != nil {
				return nil, fmt.Errorf("decode step params: %w", err)
			}
		}
		if lp, ok := stepVals[workflow.ParamLoopParams].Value.(map[string]any); ok {
			for name, v := range lp {
				t, err := params.Infer(v)
				if err != nil {
					return nil, fmt.Errorf("loop param %s: %w", name, err)
				}
				if s, ok := v.(string); ok {
					v = strings.ReplaceAll(s, "$", "$$")
				}
				out[name] = workflow.LiteralParam(t, v)
			}
		}
	} else if out, err = inheritedParams(inline, carried, nil, false); err != nil {
		return nil, err
	}
	delete(out, ParamMaxIterations)
	out[workflow.ParamLoopIndex] = workflow.LiteralParam(workflow.ParamTypeLong, next)
	return json.Marshal(out)
}

// carriedParams are the loop params a succeeded iteration hands on to the
// condition and the next iteration: its evaluated workflow params, with
// every loop param name (a loop_params entry, or a name of those params
// that is not engine-set) replaced by the value a step of the iteration
// produced under it. Steps are applied in order (the iteration's
// topological order, definition order among steps ready together), so the
// last one that has the name wins, however their runs interleaved.
func (r *whileRuntime) carriedParams(ctx context.Context, a *stepruntime.Attempt, child run.Ref, order []string) ([]byte, error) {
	raw, err := r.h.instanceParams(ctx, child)
	if err != nil {
		return nil, err
	}
	vals := params.Values{}
	if len(raw) > 2 {
		if err := json.Unmarshal(raw, &vals); err != nil {
			return nil, fmt.Errorf("decode params of %s: %w", child, err)
		}
	}
	names := map[string]bool{}
	for name := range vals {
		names[name] = true
	}
	if lp, ok := a.Params[workflow.ParamLoopParams].(map[string]any); ok {
		for name := range lp {
			names[name] = true
		}
	}
	produced, err := r.h.succeededStepParams(ctx, child)
	if err != nil {
		return nil, err
	}
	for _, id := range order {
		for name, v := range produced[id] {
			if names[name] && !engineSet(name) {
				vals[name] = v
			}
		}
	}
	return json.Marshal(vals)
}

// engineSet reports a param name the engine sets, which no step may carry
// into the next iteration.
func engineSet(name string) bool {
	switch name {
	case params.RunTS, params.FirstTimeTriggerTimezone, params.StepType,
		workflow.ParamLoopIndex, workflow.ParamLoopParams, ParamMaxIterations:
		return true
	}
	return params.Reserved(name)
}

// succeededStepParamsSQL reads the params of every step of a run whose
// latest attempt succeeded. The params column holds the evaluated params
// with the output params merged in (mergeOutputs), as downstream steps
// read them; an older attempt never counts.
const succeededStepParamsSQL = `
SELECT step_id, params FROM (
    SELECT DISTINCT ON (step_id) step_id, status, params FROM step_instance
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
    ORDER BY step_id, attempt_id DESC) latest
WHERE status = 'SUCCEEDED'`

// succeededStepParams maps step id to the params of its latest attempt,
// for the steps of a run whose latest attempt succeeded.
func (h *host) succeededStepParams(ctx context.Context, ref run.Ref) (map[string]params.Values, error) {
	rows, err := h.DB.Query(ctx, succeededStepParamsSQL, ref.WorkflowID, ref.InstanceID, ref.RunID)
	if err != nil {
		return nil, fmt.Errorf("read step params of %s: %w", ref, err)
	}
	out := map[string]params.Values{}
	var id string
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		if len(raw) <= 2 {
			return nil
		}
		var vals params.Values
		if err := json.Unmarshal(raw, &vals); err != nil {
			return fmt.Errorf("decode params of step %s: %w", id, err)
		}
		out[id] = vals
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read step params of %s: %w", ref, err)
	}
	return out, nil
}

// instanceParams reads a run's evaluated workflow params (JSON
// params.Values); a deleted run has none.
func (h *host) instanceParams(ctx context.Context, ref run.Ref) ([]byte, error) {
	var raw []byte
	err := h.DB.QueryRow(ctx, `SELECT params FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
		ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read params of %s: %w", ref, err)
	}
	return raw, nil
}

// earlierAttemptSQL finds the latest earlier attempt of a while step in
// the instance (an earlier attempt of this run, or of an earlier run) that
// ran iterations and did not succeed.
const earlierAttemptSQL = `
SELECT s.run_id, s.runtime_state->'data'->>'` + childWorkflowKey + `',
    (s.runtime_state->'data'->>'` + childInstanceKey + `')::bigint,
    (s.runtime_state->'data'->>'` + childRunKey + `')::bigint, (s.runtime_state->'data'->>'` + whileIndexKey + `')::bigint
FROM step_instance s
WHERE s.workflow_id = $1 AND s.instance_id = $2 AND s.step_id = $3
  AND (s.run_id < $4 OR (s.run_id = $4 AND s.attempt_id < $5))
  AND s.status <> 'SUCCEEDED' AND s.runtime_state->'data' ? '` + whileIndexKey + `'
ORDER BY s.run_id DESC, s.attempt_id DESC LIMIT 1`

// resumePoint is where a new attempt of a while step starts when an
// earlier attempt of the step in the instance ran iterations and did not
// succeed (a restart from incomplete or of the step): after that attempt's
// last iteration if it succeeded, else with that iteration again, with
// the loop params it had then. The other params come from the current
// run, so a restart's changed run params apply. A restart from the
// beginning starts over (its first attempt), and so does an attempt after
// one that succeeded (a rerun from an upstream step).
func (r *whileRuntime) resumePoint(ctx context.Context, a *stepruntime.Attempt, steps []workflow.StepNode,
	wfParams []byte) (next int64, carried []byte, ok bool, err error) {
	if a.RunID == 1 && a.AttemptID == 1 {
		return 0, nil, false, nil
	}
	var policy string
	if err := r.h.DB.QueryRow(ctx, `SELECT coalesce(run_config->>'policy', '') FROM workflow_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`, a.WorkflowID, a.InstanceID, a.RunID).Scan(&policy); err != nil {
		return 0, nil, false, fmt.Errorf("read run policy: %w", err)
	}
	if policy == "RESTART_FROM_BEGINNING" && a.AttemptID == 1 {
		return 0, nil, false, nil
	}
	var (
		earlierRun int64
		wf         *string
		iid, crun  *int64
		idx        *int64
	)
	err = r.h.DB.QueryRow(ctx, earlierAttemptSQL, a.WorkflowID, a.InstanceID, a.StepID, a.RunID, a.AttemptID).
		Scan(&earlierRun, &wf, &iid, &crun, &idx)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (wf == nil || iid == nil || crun == nil || idx == nil)) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("read earlier attempt: %w", err)
	}
	last := run.Ref{WorkflowID: *wf, InstanceID: *iid, RunID: *crun}
	status, err := r.h.childStatus(ctx, last)
	if err != nil {
		return 0, nil, false, err
	}
	if status == instance.WorkflowSucceeded {
		dag, err := workflow.BuildDAG(steps)
		if err != nil {
			return 0, nil, false, nil
		}
		if carried, err = r.carriedParams(ctx, a, last, dag.TopoOrder()); err != nil {
			return 0, nil, false, err
		}
		next = *idx + 1
	} else {
		if *idx == 0 {
			return 0, nil, false, nil // the first iteration again: a fresh start
		}
		// The failed iteration's own params are what it was given: the
		// loop params carried into it.
		if carried, err = r.h.instanceParams(ctx, last); err != nil || len(carried) <= 2 {
			return 0, nil, false, err
		}
		next = *idx
	}
	carried, err = refreshParams(a, carried, wfParams)
	return next, carried, err == nil, err
}

// refreshParams keeps the loop params of carried (the names in the
// step's loop_params) and takes every other param from the current run's
// workflow params.
func refreshParams(a *stepruntime.Attempt, carried, wfParams []byte) ([]byte, error) {
	var vals, current params.Values
	if err := json.Unmarshal(carried, &vals); err != nil {
		return nil, fmt.Errorf("decode carried params: %w", err)
	}
	if len(wfParams) > 2 {
		if err := json.Unmarshal(wfParams, &current); err != nil {
			return nil, fmt.Errorf("decode workflow params: %w", err)
		}
	}
	loop, _ := a.Params[workflow.ParamLoopParams].(map[string]any)
	for name, v := range current {
		if _, isLoop := loop[name]; !isLoop {
			vals[name] = v
		}
	}
	return json.Marshal(vals)
}

// finalLoopOutputs are the outputs of a while step that ended: loop_index
// and while_iterations, and the final value of each loop param (what the
// last iteration carried, or the initial value if none ran), so steps
// after the loop read them (loop__counter). A loop param named like one
// of the step's own params is left out: it must not change that param.
func finalLoopOutputs(a *stepruntime.Attempt, carried []byte, iterations int64) map[string]any {
	out := whileOutputs(iterations, iterations)
	loop, _ := a.Params[workflow.ParamLoopParams].(map[string]any)
	var vals params.Values
	if len(carried) > 2 {
		_ = json.Unmarshal(carried, &vals)
	}
	for name, initial := range loop {
		if _, own := a.Params[name]; own || engineSet(name) {
			continue
		}
		out[name] = initial
		if v, ok := vals[name]; ok {
			out[name] = v.Value
		}
	}
	return out
}
