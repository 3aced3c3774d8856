package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Subworkflow steps (docs/subworkflow.md).
//
// A subworkflow step runs another workflow as a child run. The step's Start
// creates the child in one transaction with the record of it on the parent
// attempt (runtime_state.data), fenced by the parent's generation; the
// child's parent_key (the parent attempt's identity) is unique, so a Start
// repeated after a crash finds the child instead of creating a second one.
// A synchronous step then waits without holding a worker: Execute reads the
// child's status and returns Continue. The child's final write enqueues a
// step_update for the parent's group in the same transaction, which wakes
// the waiting attempt at once; the poll is the fallback.

// MaxSubworkflowDepth is how many subworkflow steps may be nested: a run at
// a deeper level is never created and the step that asked for it fails.
const MaxSubworkflowDepth = 10

// subworkflowType is the runtime key of subworkflow steps (their node type).
const subworkflowType = string(workflow.StepKindSubworkflow)

// subworkflowPoll is how often a waiting subworkflow step rechecks its
// child when no notification arrived; a variable so tests can change it.
var subworkflowPoll = 2 * time.Second

// Config keys the step actor passes to the subworkflow runtime.
const (
	subworkflowSyncKey     = "sync"
	subworkflowExplicitKey = "explicit_params"
	subworkflowKillKey     = "kill"
)

// Runtime data and output names of a subworkflow step.
const (
	childWorkflowKey = "subworkflow_id"
	childVersionKey  = "subworkflow_version"
	childInstanceKey = "subworkflow_instance_id"
	childRunKey      = "subworkflow_run_id"
	childGroupKey    = "subworkflow_group_id"
	childStatusKey   = "subworkflow_status"
)

// subworkflowRuntime runs subworkflow steps for one engine.
type subworkflowRuntime struct {
	h    *host
	defs *definition.Store
}

// subworkflowConfig is what the step actor tells the runtime of the step.
// kill is set once the attempt is being killed: Terminate then kills the
// child instead of stopping it.
func subworkflowConfig(sw *workflow.Subworkflow, kill bool) map[string]json.RawMessage {
	sync, explicit := true, false
	if sw.Sync != nil {
		sync = *sw.Sync
	}
	if sw.ExplicitParams != nil {
		explicit = *sw.ExplicitParams
	}
	return map[string]json.RawMessage{
		subworkflowSyncKey:     json.RawMessage(strconv.FormatBool(sync)),
		subworkflowExplicitKey: json.RawMessage(strconv.FormatBool(explicit)),
		subworkflowKillKey:     json.RawMessage(strconv.FormatBool(kill)),
	}
}

func configBool(a *stepruntime.Attempt, key string, def bool) bool {
	raw, ok := a.Config[key]
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return def
	}
	return b
}

// retryLater asks the actor to call again after a transient failure.
func (r *subworkflowRuntime) retryLater(a *stepruntime.Attempt, what string, err error) stepruntime.Result {
	r.h.Logger.Warn("subworkflow step: "+what, "workflow_id", a.WorkflowID, "instance_id", a.InstanceID,
		"run_id", a.RunID, "step_id", a.StepID, "error", err.Error())
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Second}
}

// Start creates the child run, or finds the one an earlier call created.
func (r *subworkflowRuntime) Start(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	parent := run.Parent{Ref: run.Ref{WorkflowID: a.WorkflowID, InstanceID: a.InstanceID, RunID: a.RunID}, StepID: a.StepID, AttemptID: a.AttemptID}
	if data, ok, err := r.h.childOf(ctx, r.h.DB, parent); err != nil {
		return r.retryLater(a, "look up child", err)
	} else if ok {
		return stepruntime.Result{State: stepruntime.Done, Data: data, Message: "subworkflow run " + childRef(data).String() + " exists"}
	}
	id, _ := a.Params[workflow.ParamSubworkflowID].(string)
	if id == "" {
		return stepruntime.Result{State: stepruntime.FatalError, Message: "the subworkflow_id param is empty"}
	}
	version, _ := a.Params[workflow.ParamSubworkflowVersion].(string)
	if version == "" {
		version = "default"
	}
	v, err := r.defs.Get(ctx, id, version)
	if errors.Is(err, definition.ErrNotFound) || errors.Is(err, definition.ErrInvalidSelector) {
		return stepruntime.Result{State: stepruntime.FatalError, Message: fmt.Sprintf("subworkflow %s version %s: %v", id, version, err)}
	}
	if err != nil {
		return r.retryLater(a, "read subworkflow definition", err)
	}
	explicit := configBool(a, subworkflowExplicitKey, false)
	data, err := r.h.createChild(ctx, r.h.NodeID, parent, childSpec{
		def: v,
		runParams: func(wfParams, stepParams []byte) ([]byte, error) {
			return childRunParams(&v.Workflow, wfParams, stepParams, explicit)
		},
	})
	var fatal *childError
	switch {
	case errors.As(err, &fatal):
		return stepruntime.Result{State: stepruntime.FatalError, Message: fatal.msg}
	case err != nil:
		return r.retryLater(a, "create child run", err)
	}
	return stepruntime.Result{State: stepruntime.Done, Data: data, Message: "started subworkflow run " + childRef(data).String()}
}

// Execute ends the step once the child run has ended (sync), or at once.
func (r *subworkflowRuntime) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	child := childRef(a.Data)
	// subworkflow_id is a param of the step already.
	outputs := map[string]any{childInstanceKey: child.InstanceID, childRunKey: child.RunID}
	if !configBool(a, subworkflowSyncKey, true) {
		return stepruntime.Result{State: stepruntime.Done, Outputs: outputs, Message: "subworkflow run " + child.String() + " started (async)"}
	}
	status, err := r.h.childStatus(ctx, child)
	if err != nil {
		return r.retryLater(a, "read child status", err)
	}
	if !status.IsTerminal() {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: subworkflowPoll}
	}
	outputs[childStatusKey] = string(status)
	msg := fmt.Sprintf("subworkflow run %s ended %s", child, status)
	if status != instance.WorkflowSucceeded {
		return stepruntime.Result{State: stepruntime.FatalError, Message: msg, Outputs: outputs}
	}
	return stepruntime.Result{State: stepruntime.Done, Message: msg, Outputs: outputs}
}

// Terminate asks the engine owning the child to stop it. A step stopped
// before its child existed has nothing to stop.
func (r *subworkflowRuntime) Terminate(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	return r.h.terminateChild(ctx, a, "subworkflow")
}

// terminateChild asks the engine owning the child run recorded in an
// attempt's runtime data to stop (or, for a kill, kill) it; what names the
// kind of run in messages.
func (h *host) terminateChild(ctx context.Context, a *stepruntime.Attempt, what string) stepruntime.Result {
	child := childRef(a.Data)
	if child.WorkflowID == "" {
		return stepruntime.Result{State: stepruntime.Stopped}
	}
	group := int32(dataInt(a.Data, childGroupKey))
	action, verb := run.ActionStop, "stopped"
	if configBool(a, subworkflowKillKey, false) {
		action, verb = run.ActionKill, "killed"
	}
	err := pgx.BeginFunc(ctx, h.DB, func(tx pgx.Tx) error {
		_, err := queue.Enqueue(ctx, tx, queue.InstanceAction, group, run.ActionMessage{
			Ref: child, Group: group, Action: action,
			Reason: fmt.Sprintf("parent step %s of %s/%d/%d was %s", a.StepID, a.WorkflowID, a.InstanceID, a.RunID, verb),
		})
		return err
	})
	if err != nil {
		h.Logger.Warn(what+" step: stop child run", "workflow_id", a.WorkflowID, "instance_id", a.InstanceID,
			"run_id", a.RunID, "step_id", a.StepID, "error", err.Error())
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Second}
	}
	return stepruntime.Result{State: stepruntime.Stopped, Message: fmt.Sprintf("asked %s run %s to %s", what, child, action)}
}

// childRef reads the child's identity from the step's runtime data.
func childRef(data map[string]any) run.Ref {
	id, _ := data[childWorkflowKey].(string)
	return run.Ref{WorkflowID: id, InstanceID: dataInt(data, childInstanceKey), RunID: dataInt(data, childRunKey)}
}

// dataInt reads a number of runtime data, which is int64 in memory and a
// JSON number once read back from the database.
func dataInt(data map[string]any, key string) int64 {
	switch v := data[key].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int:
		return int64(v)
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	}
	return 0
}

// childError is a reason the child can never be created; it fails the step.
type childError struct{ msg string }

func (e *childError) Error() string { return e.msg }

const childOfSQL = `SELECT workflow_id, instance_id, run_id, workflow_version, group_id FROM workflow_instance
    WHERE parent_key = $1`

// childOf returns the runtime data of the child a parent attempt created,
// if it did.
func (h *host) childOf(ctx context.Context, q run.Tx, p run.Parent) (map[string]any, bool, error) {
	var ref run.Ref
	var version int64
	var group int32
	err := q.QueryRow(ctx, childOfSQL, p.Key()).Scan(&ref.WorkflowID, &ref.InstanceID, &ref.RunID, &version, &group)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up child of %s: %w", p.Key(), err)
	}
	return childData(ref, version, group), true, nil
}

func childData(ref run.Ref, version int64, group int32) map[string]any {
	return map[string]any{
		childWorkflowKey: ref.WorkflowID, childInstanceKey: ref.InstanceID, childRunKey: ref.RunID,
		childVersionKey: version, childGroupKey: group,
	}
}

// parentFenceSQL locks the parent run (shared) while this node owns it at
// its current generation, and reads what the child inherits.
const parentFenceSQL = `
SELECT i.group_count, i.group_id, i.depth, i.params, s.params,
    COALESCE(i.correlation_id, i.workflow_id || ':' || i.instance_id || ':' || i.run_id)
FROM workflow_instance i
JOIN flow_group g ON g.group_id = i.group_id AND g.generation = i.generation AND g.owner = $6
JOIN step_instance s ON s.workflow_id = i.workflow_id AND s.instance_id = i.instance_id AND s.run_id = i.run_id
    AND s.step_id = $4 AND s.attempt_id = $5
WHERE i.workflow_id = $1 AND i.instance_id = $2 AND i.run_id = $3 AND i.status IN ('IN_PROGRESS', 'PAUSED')
FOR SHARE OF i`

// fencedParent is what creating children reads of the parent attempt.
type fencedParent struct {
	groupCount, group    int32
	depth                int
	wfParams, stepParams []byte
	// correlation is the parent's correlation id, which its children
	// inherit (docs/events.md).
	correlation string
}

// fenceParent share-locks the parent run in tx while node owns it at its
// current generation and reads what its children inherit; run.ErrFenced when
// the node no longer owns it (or the run is over).
func fenceParent(ctx context.Context, tx pgx.Tx, p run.Parent, node string) (fencedParent, error) {
	var fp fencedParent
	err := tx.QueryRow(ctx, parentFenceSQL, p.WorkflowID, p.InstanceID, p.RunID, p.StepID, p.AttemptID, node).
		Scan(&fp.groupCount, &fp.group, &fp.depth, &fp.wfParams, &fp.stepParams, &fp.correlation)
	if errors.Is(err, pgx.ErrNoRows) {
		return fp, run.ErrFenced
	}
	if err != nil {
		return fp, fmt.Errorf("fence parent %s: %w", p.Key(), err)
	}
	return fp, nil
}

const recordChildSQL = `
UPDATE step_instance SET runtime_state = jsonb_set(runtime_state, '{data}', $6::jsonb), modify_time = now()
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5`

// childSpec is what a child run is made of.
type childSpec struct {
	def *definition.Version
	// runParams computes the child's run params from the parent run's
	// params and the parent step's params (both JSON params.Values).
	runParams func(wfParams, stepParams []byte) ([]byte, error)
	// inline marks a run of a definition that is not a pushed workflow (a
	// while step's iteration): it is not admitted under a run strategy and
	// its instance id is the next one among the runs of def.WorkflowID,
	// allocated under the parent workflow's lock.
	inline bool
	// data is recorded on the parent attempt with the child's identity.
	data map[string]any
}

// createChild creates the child run of a parent attempt, admitted under the
// child workflow's run strategy like a start (unless inline), and records it
// on the parent attempt, in one transaction fenced by the parent's
// generation. It returns the child's runtime data; run.ErrFenced when this node
// no longer owns the parent; a *childError when the child may not be
// created.
func (h *host) createChild(ctx context.Context, node string, p run.Parent, spec childSpec) (map[string]any, error) {
	v := spec.def
	var data map[string]any
	var created []run.Created
	err := pgx.BeginFunc(ctx, h.DB, func(tx pgx.Tx) error {
		// Lock order: workflow row, then instance rows (docs/run-control.md).
		lockID := v.WorkflowID
		if spec.inline {
			// The pushed workflow a (possibly nested) inline run belongs to.
			lockID = instance.RootWorkflowID(p.WorkflowID)
		}
		props, err := run.LockWorkflow(ctx, tx, lockID)
		if errors.Is(err, run.ErrWorkflowGone) {
			return &childError{msg: fmt.Sprintf("workflow %s does not exist", lockID)}
		}
		if err != nil {
			return err
		}
		fp, err := fenceParent(ctx, tx, p, node)
		if err != nil {
			return err
		}
		groupCount, depth := fp.groupCount, fp.depth
		if d, ok, err := h.childOf(ctx, tx, p); err != nil || ok {
			data = d
			maps.Copy(data, spec.data)
			return err
		}
		if depth+1 > MaxSubworkflowDepth {
			return &childError{msg: fmt.Sprintf("subworkflow depth limit %d exceeded: %s would run at depth %d",
				MaxSubworkflowDepth, v.WorkflowID, depth+1)}
		}
		p.Group = fp.group
		// A step acts for its workflow's owner; an iteration run belongs
		// to the parent's own workflow.
		startedFor := ""
		if !spec.inline {
			if startedFor, err = h.authorizeChild(ctx, tx, p.Ref, v.WorkflowID); err != nil {
				return err
			}
		}
		runParams, err := spec.runParams(fp.wfParams, fp.stepParams)
		if err != nil {
			return &childError{msg: "child run params: " + err.Error()}
		}
		// A pushed workflow's child gets the workflow's next instance id
		// (run.Create allocates it); an inline run the next one among the
		// runs of its id.
		var iid int64
		if spec.inline {
			if err := tx.QueryRow(ctx, `SELECT coalesce(max(instance_id), 0) + 1 FROM workflow_instance WHERE workflow_id = $1`,
				v.WorkflowID).Scan(&iid); err != nil {
				return fmt.Errorf("allocate instance id: %w", err)
			}
		}
		initiatorType, by := "SUBWORKFLOW", "subworkflow step"
		// A run inside a run of the same workflow (recursion) is part of
		// that run: under its strategy it would queue behind, be dropped
		// by, or stop (LAST_ONLY) its own ancestor.
		recursive := false
		if !spec.inline {
			if recursive, err = h.runsInside(ctx, tx, p.Ref, v.WorkflowID); err != nil {
				return err
			}
		}
		admission := run.ByStrategy
		if spec.inline {
			initiatorType, by = "WHILE", fmt.Sprintf("iteration %d of while step", p.Iteration)
			admission = run.Always // an iteration is not admitted under a run strategy
		}
		timeline := instance.StatusChange(string(instance.WorkflowCreated),
			fmt.Sprintf("started by %s %s of %s", by, p.StepID, p.Ref))
		if recursive {
			admission = run.Always
			timeline = append(timeline, instance.LogEvent("INFO",
				"admitted without the run strategy: it runs inside a run of the same workflow"))
		}
		timeout := int64(10 * 24 * time.Hour / time.Second)
		if v.Workflow.Timeout != nil {
			if d, err := v.Workflow.Timeout.Resolve(); err == nil && d > 0 {
				timeout = int64(d / time.Second)
			}
		}
		init := map[string]any{"type": initiatorType, "parent": p}
		if startedFor != "" {
			// Who caused the run, as a manual start records its caller.
			init["user"] = startedFor
		}
		initiator, _ := json.Marshal(init)
		parent, _ := json.Marshal(p)
		created, err = run.Create(ctx, tx, []run.New{{
			Ref: run.Ref{WorkflowID: v.WorkflowID, InstanceID: iid}, Version: v.Version, Definition: v.Raw,
			Workflow: &v.Workflow, RunParams: runParams, Initiator: initiator, Timeline: timeline, TimeoutSeconds: timeout,
			GroupCount: groupCount, Parent: parent, ParentKey: p.Key(), Depth: depth + 1, Correlation: fp.correlation,
			Admission: admission,
		}}, run.Options{Props: map[string][]byte{lockID: props}})
		if err != nil {
			return err
		}
		ref, group := created[0].Ref, created[0].GroupID
		data = childData(ref, v.Version, group)
		maps.Copy(data, spec.data)
		raw, _ := json.Marshal(data)
		if _, err := tx.Exec(ctx, recordChildSQL, p.WorkflowID, p.InstanceID, p.RunID, p.StepID, p.AttemptID, raw); err != nil {
			return fmt.Errorf("record child on %s: %w", p.Key(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// As a start does: admit again once committed (docs/run-control.md).
	run.AdmitAfterCommit(ctx, h.DB, created)
	return data, nil
}

// runsInsideSQL walks a run's ancestors (the parent column, at most the
// nesting limit deep) and reports whether the run or one of them belongs
// to workflow $4 (an iteration's id starts with its workflow's and ':').
const runsInsideSQL = `
WITH RECURSIVE chain(workflow_id, parent, depth) AS (
    SELECT workflow_id, parent, 0 FROM workflow_instance
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
    UNION ALL
    SELECT i.workflow_id, i.parent, c.depth + 1 FROM chain c JOIN workflow_instance i
      ON i.workflow_id = c.parent->>'workflow_id' AND i.instance_id = (c.parent->>'instance_id')::bigint
     AND i.run_id = (c.parent->>'run_id')::bigint
    WHERE c.depth < 64
)
SELECT EXISTS (SELECT 1 FROM chain WHERE split_part(workflow_id, ':', 1) = $4)`

// runsInside reports whether run ref is, or runs inside, a run of
// workflowID.
func (h *host) runsInside(ctx context.Context, q run.Tx, ref run.Ref, workflowID string) (bool, error) {
	var inside bool
	if err := q.QueryRow(ctx, runsInsideSQL, ref.WorkflowID, ref.InstanceID, ref.RunID, workflowID).Scan(&inside); err != nil {
		return false, fmt.Errorf("ancestors of %s: %w", ref, err)
	}
	return inside, nil
}

// childRunParams are the child's run params: with explicit, the step's own
// params; otherwise the parent run's params with the step's on top. Names
// the engine sets, the subworkflow's target, MAP values and params the
// child defines as not settable at start are left out.
func childRunParams(child *workflow.Workflow, wfParams, stepParams []byte, explicit bool) ([]byte, error) {
	out, err := inheritedParams(child, wfParams, stepParams, explicit)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// inheritedParams are childRunParams before encoding.
func inheritedParams(child *workflow.Workflow, wfParams, stepParams []byte, explicit bool) (workflow.Params, error) {
	var wfVals, stepVals params.Values
	if !explicit && len(wfParams) > 2 {
		if err := json.Unmarshal(wfParams, &wfVals); err != nil {
			return nil, fmt.Errorf("decode parent params: %w", err)
		}
	}
	if len(stepParams) > 2 {
		if err := json.Unmarshal(stepParams, &stepVals); err != nil {
			return nil, fmt.Errorf("decode step params: %w", err)
		}
	}
	out := workflow.Params{}
	add := func(vals params.Values) {
		for name, v := range vals {
			switch {
			case params.Reserved(name), name == params.RunTS, name == params.FirstTimeTriggerTimezone,
				name == params.StepType, name == workflow.ParamSubworkflowID, name == workflow.ParamSubworkflowVersion,
				v.Type == workflow.ParamTypeMap:
				continue
			}
			if def, ok := child.Params[name]; ok && !params.Mutable(def.EffectiveMode(), params.PhaseStart) {
				continue
			}
			val := v.Value
			if str, ok := val.(string); ok {
				val = strings.ReplaceAll(str, "$", "$$") // a value, not a template
			}
			out[name] = workflow.LiteralParam(v.Type, val)
		}
	}
	add(wfVals)
	add(stepVals)
	return out, nil
}

// childStatus reads a child run's status.
func (h *host) childStatus(ctx context.Context, ref run.Ref) (instance.WorkflowStatus, error) {
	var st instance.WorkflowStatus
	err := h.DB.QueryRow(ctx, `SELECT status FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
		ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&st)
	if errors.Is(err, pgx.ErrNoRows) {
		// Deleted with its workflow: nothing to wait for any more.
		return instance.WorkflowStopped, nil
	}
	if err != nil {
		return "", fmt.Errorf("read child %s: %w", ref, err)
	}
	return st, nil
}
