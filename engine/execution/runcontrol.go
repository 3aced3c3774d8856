package execution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Restart policies of an instance restart, as in Maestro.
const (
	RestartFromIncomplete = "RESTART_FROM_INCOMPLETE"
	RestartFromBeginning  = "RESTART_FROM_BEGINNING"
	// RestartFromSpecific restarts from one step (a step restart of an
	// ended run): the step and everything downstream of it run again.
	RestartFromSpecific = "RESTART_FROM_SPECIFIC"
)

// ErrInvalid reports a request the API must refuse as malformed.
var ErrInvalid = errors.New("invalid request")

// RestartRequest asks for a new run of an ended workflow instance.
type RestartRequest struct {
	WorkflowID string
	InstanceID int64
	// Policy is RESTART_FROM_INCOMPLETE (default), RESTART_FROM_BEGINNING or
	// RESTART_FROM_SPECIFIC (with StepID).
	Policy string
	StepID string
	// SkipStepID, with RESTART_FROM_INCOMPLETE, records that step SKIPPED
	// in the new run (a skip of a failed step of an ended run).
	SkipStepID string
	// RunParams override the previous run's run params by name.
	RunParams workflow.Params
	// StepRunParams override the params of top-level steps (by step id)
	// in the new run (Maestro's step_run_params and step_restart_params):
	// as restart params, checked against the steps' param modes.
	StepRunParams map[string]workflow.Params
	Initiator     map[string]any
}

// carriedStatuses are the step statuses a restart from incomplete keeps:
// the new run records them as done (with a reference to the run that did
// the work) and does not run them again.
var carriedStatuses = []string{
	string(instance.StepSucceeded), string(instance.StepSkipped),
	string(instance.StepCompletedWithError), string(instance.StepDisabled),
}

// lastRun is what a restart reads of an instance's latest run.
type lastRun struct {
	runID          int64
	status         instance.WorkflowStatus
	version        int64
	definition     []byte
	runParams      []byte
	initiator      []byte
	timeoutSeconds int64
}

const lastRunSQL = `SELECT run_id, status, workflow_version, definition, run_params, initiator, timeout_seconds
    FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 ORDER BY run_id DESC LIMIT 1`

func readLastRun(ctx context.Context, tx pgx.Tx, workflowID string, instanceID int64) (lastRun, error) {
	var r lastRun
	err := tx.QueryRow(ctx, lastRunSQL, workflowID, instanceID).Scan(&r.runID, &r.status, &r.version, &r.definition,
		&r.runParams, &r.initiator, &r.timeoutSeconds)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("workflow instance %s/%d: %w", workflowID, instanceID, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("read workflow instance %s/%d: %w", workflowID, instanceID, err)
	}
	return r, nil
}

// lockWorkflow takes the workflow's admission lock and maps its absence.
func lockWorkflow(ctx context.Context, tx pgx.Tx, workflowID string) ([]byte, error) {
	props, err := run.LockWorkflow(ctx, tx, workflowID)
	if errors.Is(err, run.ErrWorkflowGone) {
		return nil, fmt.Errorf("workflow %s: %w", workflowID, ErrNotFound)
	}
	return props, err
}

// Restart creates the next run of an ended instance. The new run is queued
// under the workflow's run strategy like a start. RESTART_FROM_INCOMPLETE
// copies the steps that completed in the previous run into the new run as
// they were (with a carried_from reference in runtime_state), so they are
// not run again and their successors see them done.
//
// Run params: the previous run's run params with req.RunParams overriding
// by name; an override the param's mode forbids on restart (CONSTANT,
// IMMUTABLE, MUTABLE_ON_START) is ErrInvalid.
func (s *Service) Restart(ctx context.Context, req RestartRequest) (*Instance, error) {
	policy := strings.ToUpper(req.Policy)
	if policy == "" {
		policy = RestartFromIncomplete
	}
	switch policy {
	case RestartFromIncomplete, RestartFromBeginning:
	case RestartFromSpecific:
		if req.StepID == "" {
			return nil, fmt.Errorf("%w: %s needs a step id", ErrInvalid, policy)
		}
	default:
		return nil, fmt.Errorf("%w: unknown restart policy %q; use %s, %s or %s (with a step)", ErrInvalid, req.Policy,
			RestartFromIncomplete, RestartFromBeginning, RestartFromSpecific)
	}
	if req.StepID != "" && policy != RestartFromSpecific {
		return nil, fmt.Errorf("%w: a step to restart from needs policy %s", ErrInvalid, RestartFromSpecific)
	}
	if err := checkRequest("", req.RunParams); err != nil {
		return nil, err
	}
	var ref run.Ref
	var created []run.Created
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		props, err := lockWorkflow(ctx, tx, req.WorkflowID)
		if err != nil {
			return err
		}
		prev, err := readLastRun(ctx, tx, req.WorkflowID, req.InstanceID)
		if err != nil {
			return err
		}
		if !prev.status.IsTerminal() {
			return fmt.Errorf("%w: workflow instance %s/%d run %d is %s; only an ended run can be restarted",
				ErrConflict, req.WorkflowID, req.InstanceID, prev.runID, prev.status)
		}
		if policy == RestartFromIncomplete && prev.status == instance.WorkflowSucceeded {
			return fmt.Errorf("%w: workflow instance %s/%d succeeded; nothing is incomplete (use %s)",
				ErrConflict, req.WorkflowID, req.InstanceID, RestartFromBeginning)
		}
		var wf workflow.Workflow
		if err := json.Unmarshal(prev.definition, &wf); err != nil {
			return fmt.Errorf("decode definition of %s/%d: %w", req.WorkflowID, req.InstanceID, err)
		}
		rerun := map[string]bool{}
		if policy == RestartFromSpecific {
			dag, err := workflow.BuildDAG(wf.Steps)
			if err != nil {
				return fmt.Errorf("build dag of %s/%d: %w", req.WorkflowID, req.InstanceID, err)
			}
			if !dag.Has(req.StepID) {
				return fmt.Errorf("step %s of %s/%d: %w", req.StepID, req.WorkflowID, req.InstanceID, ErrNotFound)
			}
			rerun = downstream(dag, req.StepID)
		}
		// Checked against the merged defs, so the engine's own defaults
		// (RUN_TS, ...) keep their modes too.
		if _, err := params.WorkflowDefs(params.WorkflowInput{Workflow: &wf, RunParams: req.RunParams, Phase: params.PhaseRestart}); err != nil {
			return fmt.Errorf("%w: restart params: %w", ErrInvalid, err)
		}
		runParams, err := mergeRunParams(prev.runParams, req.RunParams)
		if err != nil {
			return err
		}
		definition := prev.definition
		if len(req.StepRunParams) > 0 {
			if definition, err = overrideStepParams(&wf, req.StepRunParams); err != nil {
				return err
			}
		}
		ref = run.Ref{WorkflowID: req.WorkflowID, InstanceID: req.InstanceID, RunID: prev.runID + 1}
		initiator := prev.initiator
		if req.Initiator != nil {
			if initiator, err = json.Marshal(req.Initiator); err != nil {
				return fmt.Errorf("encode initiator: %w", err)
			}
		}
		// The restart of an incremental run whose range is still the next
		// one takes it back: its success moves the watermark
		// (docs/incremental.md).
		if initiator, err = restartRange(ctx, tx, req.WorkflowID, req.InstanceID, prev.initiator, initiator); err != nil {
			return err
		}
		cfg := map[string]any{"policy": policy, "from_run": prev.runID}
		if req.StepID != "" {
			cfg["step_id"] = req.StepID
		}
		if len(req.StepRunParams) > 0 {
			cfg["step_run_params"] = req.StepRunParams
		}
		runConfig, err := json.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("encode run config: %w", err)
		}
		created, err = run.Create(ctx, tx, []run.New{{
			Ref: ref, Version: prev.version, Definition: definition, RunParams: runParams, Initiator: initiator,
			TimeoutSeconds: prev.timeoutSeconds, RunConfig: runConfig, GroupCount: s.groupCount,
			Timeline: instance.StatusChange(string(instance.WorkflowCreated),
				fmt.Sprintf("restart of run %d (%s)", prev.runID, policy)),
		}}, run.Options{Props: map[string][]byte{req.WorkflowID: props}})
		if err != nil {
			return err
		}
		if policy == RestartFromBeginning || created[0].Status == instance.WorkflowStopped {
			return nil
		}
		return carrySteps(ctx, tx, ref, &wf, prev.runID, rerun, req.SkipStepID, authz.CallerFrom(ctx))
	})
	if err != nil {
		return nil, err
	}
	run.AdmitAfterCommit(ctx, s.db, created)
	return s.Instance(ctx, ref.WorkflowID, ref.InstanceID, ref.RunID)
}

// overrideStepParams applies step params overrides to a run's workflow
// (top-level steps), as restart params checked against the steps' param
// modes, and returns the workflow's JSON for the new run.
func overrideStepParams(wf *workflow.Workflow, overrides map[string]workflow.Params) ([]byte, error) {
	for _, id := range slices.Sorted(maps.Keys(overrides)) {
		idx := slices.IndexFunc(wf.Steps, func(n workflow.StepNode) bool { return n.ID() == id })
		if idx < 0 {
			return nil, fmt.Errorf("%w: step_run_params: the workflow has no top-level step %q", ErrInvalid, id)
		}
		n := &wf.Steps[idx]
		common := n.Common()
		defs := params.StepDefinitionDefs(n)
		if err := params.CheckOverrides(defs, overrides[id], params.PhaseRestart); err != nil {
			return nil, fmt.Errorf("%w: step_run_params of step %s: %w", ErrInvalid, id, err)
		}
		merged := maps.Clone(common.Params)
		if merged == nil {
			merged = workflow.Params{}
		}
		for name, p := range overrides[id] {
			if def, ok := defs[name]; ok && p.Mode == "" {
				p.Mode = def.Mode
			}
			merged[name] = p
		}
		common.Params = merged
	}
	out, err := json.Marshal(wf)
	if err != nil {
		return nil, fmt.Errorf("encode the restarted workflow: %w", err)
	}
	return out, nil
}

// downstream is step and every step reachable from it.
func downstream(dag *workflow.DAG, step string) map[string]bool {
	out := map[string]bool{step: true}
	todo := []string{step}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for next := range dag.Successors(id) {
			if !out[next] {
				out[next] = true
				todo = append(todo, next)
			}
		}
	}
	return out
}

// mergeRunParams overrides the previous run params by name.
func mergeRunParams(prev []byte, overrides workflow.Params) ([]byte, error) {
	merged := workflow.Params{}
	if len(prev) > 2 {
		if err := json.Unmarshal(prev, &merged); err != nil {
			return nil, fmt.Errorf("decode previous run params: %w", err)
		}
	}
	maps.Copy(merged, overrides)
	b, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("encode run params: %w", err)
	}
	return b, nil
}

const carryStepsSQL = `
INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, seq, step_type,
    params, outputs, runtime_state, retry, timeline, create_time, start_time, end_time)
SELECT workflow_id, instance_id, $4, step_id, attempt_id, gen_random_uuid(),
    CASE WHEN step_id = $8 THEN 'SKIPPED' ELSE status END, 1, step_type, params, outputs,
    runtime_state || jsonb_build_object('carried_from', COALESCE(runtime_state->'carried_from',
        jsonb_build_object('workflow_run_id', run_id, 'step_attempt_id', attempt_id, 'step_instance_uuid', uuid))),
    retry, timeline || CASE WHEN step_id = $8 THEN $9::jsonb ELSE $5::jsonb END, create_time, start_time, end_time
FROM (SELECT DISTINCT ON (step_id) * FROM step_instance
      WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
      ORDER BY step_id, attempt_id DESC) latest
WHERE (status = ANY ($6::text[]) OR step_id = $8) AND NOT (step_id = ANY ($7::text[]))
RETURNING step_id, attempt_id, uuid::text, seq`

// carrySteps copies the completed steps of run from into the new run, and
// records skipStep (if set) SKIPPED, with its event: the carried steps
// change no status in the new run, the skipped one does. by names who
// asked for the skip.
func carrySteps(ctx context.Context, tx pgx.Tx, ref run.Ref, wf *workflow.Workflow, from int64, rerun map[string]bool, skipStep, by string) error {
	if by == "" {
		by = "user"
	}
	ev, _ := json.Marshal([]instance.TimelineEvent{instance.LogEvent("INFO",
		fmt.Sprintf("completed in run %d; carried over by the restart", from))})
	skipped, _ := json.Marshal(instance.StatusChange(string(instance.StepSkipped),
		fmt.Sprintf("skipped by %s after run %d ended", by, from)))
	skip := make([]string, 0, len(rerun))
	for id := range rerun {
		skip = append(skip, id)
	}
	rows, err := tx.Query(ctx, carryStepsSQL, ref.WorkflowID, ref.InstanceID, from, ref.RunID, ev, carriedStatuses, skip,
		skipStep, skipped)
	if err != nil {
		return fmt.Errorf("carry steps of run %d into %s: %w", from, ref, err)
	}
	type carried struct {
		step, uuid string
		attempt    int64
		seq        int64
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (carried, error) {
		var c carried
		err := r.Scan(&c.step, &c.attempt, &c.uuid, &c.seq)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("carry steps of run %d into %s: %w", from, ref, err)
	}
	for _, c := range all {
		if c.step != skipStep {
			continue
		}
		var runUUID string
		if err := tx.QueryRow(ctx, `SELECT uuid::text FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
			ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&runUUID); err != nil {
			return fmt.Errorf("read run %s: %w", ref, err)
		}
		return event.Insert(ctx, tx, run.SkippedStepEvent(ref, wf, runUUID, run.RootCorrelation(ref), c.step, c.attempt, c.uuid, c.seq))
	}
	return nil
}

// Unblock marks failed runs so they no longer block a STRICT_SEQUENTIAL
// workflow, and admits the queued runs that may now run. With instanceID 0
// every blocking run of the workflow is unblocked; otherwise the instance's
// latest run must be FAILED. It returns how many runs it unblocked.
func (s *Service) Unblock(ctx context.Context, workflowID string, instanceID int64) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		props, err := lockWorkflow(ctx, tx, workflowID)
		if err != nil {
			return err
		}
		by := authz.CallerFrom(ctx)
		if by == "" {
			by = "user"
		}
		ev, _ := json.Marshal([]instance.TimelineEvent{instance.LogEvent("INFO", "unblocked by "+by)})
		if instanceID > 0 {
			prev, err := readLastRun(ctx, tx, workflowID, instanceID)
			if err != nil {
				return err
			}
			if prev.status != instance.WorkflowFailed {
				return fmt.Errorf("%w: workflow instance %s/%d is %s; only a FAILED run can be unblocked",
					ErrConflict, workflowID, instanceID, prev.status)
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE workflow_instance f SET unblocked = true, seq = seq + 1, modify_time = now(),
                timeline = timeline || $3::jsonb
            WHERE f.workflow_id = $1 AND ($2::bigint = 0 OR f.instance_id = $2::bigint) AND f.status = 'FAILED' AND NOT f.unblocked
              AND NOT EXISTS (SELECT 1 FROM workflow_instance n
                  WHERE n.workflow_id = f.workflow_id AND n.instance_id = f.instance_id AND n.run_id > f.run_id)`,
			workflowID, instanceID, ev)
		if err != nil {
			return fmt.Errorf("unblock runs of %s: %w", workflowID, err)
		}
		n = int(tag.RowsAffected())
		_, err = run.AdmitQueued(ctx, tx, workflowID, props)
		return err
	})
	return n, err
}

// StepActionResult is what a step action did.
type StepActionResult struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	Action     run.Action
	// Status is ACCEPTED when the engine applies the action to the live
	// run, RESTARTED when the action started a new run (Restarted).
	Status    string
	Restarted *Instance
}

// StepAct applies a step action. On a live run it is checked against the
// status of the step's latest attempt (StepActionMap) and handed to the
// engine through the outbox. On an ended run, restart starts a new run
// from that step (RESTART_FROM_SPECIFIC) and skip a new run from the
// incomplete steps with that step SKIPPED; other actions are conflicts.
func (s *Service) StepAct(ctx context.Context, workflowID string, instanceID, runID int64, stepID string, action run.Action) (*StepActionResult, error) {
	return s.stepAct(ctx, workflowID, instanceID, runID, stepID, action, nil)
}

// RestartStep is the restart step action with step params: stepParams
// override the step's params in the new run when the instance has ended
// (a restart from the step); a live run's new attempt takes none, and
// stepParams are then ErrInvalid.
func (s *Service) RestartStep(ctx context.Context, workflowID string, instanceID, runID int64, stepID string, stepParams workflow.Params) (*StepActionResult, error) {
	return s.stepAct(ctx, workflowID, instanceID, runID, stepID, run.StepRestart, stepParams)
}

func (s *Service) stepAct(ctx context.Context, workflowID string, instanceID, runID int64, stepID string, action run.Action,
	stepParams workflow.Params) (*StepActionResult, error) {
	if action == run.StepBypassDependencies { // recorded on the attempt's signal wait, not an instance action
		return s.BypassDependencies(ctx, workflowID, instanceID, runID, stepID, "")
	}
	inst, _, err := s.actionTarget(ctx, workflowID, instanceID, runID, stepID, action)
	if err != nil {
		return nil, err
	}
	res := &StepActionResult{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID, StepID: stepID, Action: action}
	if inst.Status.IsTerminal() {
		req := RestartRequest{WorkflowID: workflowID, InstanceID: instanceID}
		if c := authz.CallerFrom(ctx); c != "" {
			req.Initiator = ManualInitiator(c)
		}
		switch action {
		case run.StepRestart:
			req.Policy, req.StepID = RestartFromSpecific, stepID
			if len(stepParams) > 0 {
				req.StepRunParams = map[string]workflow.Params{stepID: stepParams}
			}
		case run.StepSkip:
			req.Policy, req.SkipStepID = RestartFromIncomplete, stepID
		default:
			return nil, fmt.Errorf("%w: step action %s: workflow instance %s/%d has ended (%s)",
				ErrConflict, action, workflowID, instanceID, inst.Status)
		}
		restarted, err := s.Restart(ctx, req)
		if err != nil {
			return nil, err
		}
		res.Status, res.Restarted = "RESTARTED", restarted
		return res, nil
	}
	if len(stepParams) > 0 {
		return nil, fmt.Errorf("%w: step params apply to a restart of an ended run; workflow instance %s/%d is %s",
			ErrInvalid, workflowID, instanceID, inst.Status)
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		_, err := queue.Enqueue(ctx, tx, queue.InstanceAction, inst.groupID, run.ActionMessage{
			Ref:   run.Ref{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID},
			Group: inst.groupID, Action: action, StepID: stepID, Reason: byCaller(ctx, action, ""),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Status = "ACCEPTED"
	return res, nil
}

// actionTarget reads the latest run of an instance and the latest attempt
// of a step in it, and checks that the attempt's status allows the action;
// a run other than the latest is ErrConflict.
func (s *Service) actionTarget(ctx context.Context, workflowID string, instanceID, runID int64, stepID string,
	action run.Action) (*Instance, *StepAttempt, error) {
	inst, err := s.Instance(ctx, workflowID, instanceID, 0)
	if err != nil {
		return nil, nil, err
	}
	if runID != 0 && runID != inst.RunID {
		return nil, nil, fmt.Errorf("%w: run %d of workflow instance %s/%d is not its latest run (%d)",
			ErrConflict, runID, workflowID, instanceID, inst.RunID)
	}
	a, err := s.Attempt(ctx, workflowID, instanceID, inst.RunID, stepID, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := run.CheckStepAction(a.Status, action); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return inst, a, nil
}

// restartRange is the initiator of the restart of an incremental run: with
// its range in "incremental" when the restart takes the range back
// (incremental.Restarted), else without it.
func restartRange(ctx context.Context, tx pgx.Tx, workflowID string, instanceID int64, prev, initiator []byte) ([]byte, error) {
	if !bytes.Contains(prev, []byte(`"incremental"`)) {
		return initiator, nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(initiator))
	dec.UseNumber() // snapshot and signal ids beyond 2^53 keep every digit
	if err := dec.Decode(&m); err != nil || m == nil {
		return initiator, nil //nolint:nilerr // an initiator that is not an object carries no range
	}
	delete(m, "incremental")
	r, err := incremental.Restarted(ctx, tx, workflowID, instanceID)
	if err != nil {
		return nil, err
	}
	if r != nil {
		m["incremental"] = r
	}
	return json.Marshal(m)
}
