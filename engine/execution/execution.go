// Package execution is what the API does with workflow runs: start them
// (instance row + outbox message + notify, in one transaction), ask the
// engine to stop or kill them, and read them back. It never runs workflow
// logic itself.
package execution

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// Errors the API maps to responses.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// Service starts and controls runs.
type Service struct {
	db         *pgxpool.Pool
	defs       *definition.Store
	groupCount int32
	// startDefs are the definitions starts decoded (start.go).
	startDefs *startDefinitions
	// grouping: concurrent starts share transactions (start.go).
	grouping bool
	groups   startGroups
}

// New builds the service. groupCount is the number of flow groups new runs
// are spread over; it must match the engine's.
func New(db *pgxpool.Pool, defs *definition.Store, groupCount int) *Service {
	if groupCount <= 0 {
		groupCount = run.DefaultGroupCount
	}
	return &Service{db: db, defs: defs, groupCount: int32(groupCount), startDefs: newStartDefinitions(), grouping: true}
}

// GroupStarts turns the group commit of concurrent starts (startgroup.go)
// on, the default, or off: then every start has a transaction of its own.
// Call it before the service is used.
func (s *Service) GroupStarts(on bool) { s.grouping = on }

// Readmit applies a workflow's current run strategy to its queued runs now,
// for example after its properties changed. An error is left to the
// engine's admission sweep, which admits within its interval.
func (s *Service) Readmit(ctx context.Context, workflowID string) {
	_, _ = run.AdmitWorkflow(ctx, s.db, workflowID, false)
}

// pastTense words the actions on timelines.
var pastTense = map[run.Action]string{
	run.ActionStop: "stopped", run.ActionKill: "killed", run.StepRestart: "restarted", run.StepSkip: "skipped",
}

// byCaller is the reason an action of the caller in ctx (authz.WithCaller)
// is recorded with on the timelines it touches, e.g. "stopped by alice";
// "" when there is no caller (the engine then writes its default reason).
func byCaller(ctx context.Context, action run.Action, suffix string) string {
	c := authz.CallerFrom(ctx)
	if c == "" {
		return ""
	}
	verb, ok := pastTense[action]
	if !ok {
		verb = string(action)
	}
	return verb + suffix + " by " + c
}

// Act asks the engine to stop or kill a run (the latest run when run is 0).
// It returns the run as it is now; the engine applies the action shortly.
// The caller in ctx is recorded on the run's timeline.
func (s *Service) Act(ctx context.Context, workflowID string, instanceID, runID int64, action run.Action) (*Instance, error) {
	inst, err := s.Instance(ctx, workflowID, instanceID, runID)
	if err != nil {
		return nil, err
	}
	if inst.Status.IsTerminal() {
		return nil, fmt.Errorf("%w: workflow instance %s/%d is already %s", ErrConflict, workflowID, instanceID, inst.Status)
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		_, err := queue.Enqueue(ctx, tx, queue.InstanceAction, inst.groupID, run.ActionMessage{
			Ref:   run.Ref{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID},
			Group: inst.groupID, Action: action, Reason: byCaller(ctx, action, ""),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// ActOnAll stops or kills every live run of a workflow and returns how many
// it asked the engine to act on.
func (s *Service) ActOnAll(ctx context.Context, workflowID string, action run.Action) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT instance_id, run_id, group_id FROM workflow_instance
                WHERE workflow_id = $1 AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')`, workflowID)
		if err != nil {
			return fmt.Errorf("list live instances: %w", err)
		}
		type live struct {
			iid, run int64
			group    int32
		}
		all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (live, error) {
			var l live
			err := r.Scan(&l.iid, &l.run, &l.group)
			return l, err
		})
		if err != nil {
			return fmt.Errorf("list live instances: %w", err)
		}
		for _, l := range all {
			if _, err := queue.Enqueue(ctx, tx, queue.InstanceAction, l.group, run.ActionMessage{
				Ref:   run.Ref{WorkflowID: workflowID, InstanceID: l.iid, RunID: l.run},
				Group: l.group, Action: action, Reason: byCaller(ctx, action, " with every run of the workflow"),
			}); err != nil {
				return err
			}
		}
		n = len(all)
		return nil
	})
	return n, err
}
