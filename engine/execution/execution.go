// Package execution is what the API does with workflow runs: start them
// (instance row + outbox message + notify, in one transaction), ask the
// engine to stop or kill them, and read them back. It never runs workflow
// logic itself.
package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// DefaultTimeout is a run's timeout when its workflow sets none (Maestro's
// 10 days).
const DefaultTimeout = 10 * 24 * time.Hour

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
}

// New builds the service. groupCount is the number of flow groups new runs
// are spread over; it must match the engine's.
func New(db *pgxpool.Pool, defs *definition.Store, groupCount int) *Service {
	if groupCount <= 0 {
		groupCount = flow.DefaultGroupCount
	}
	return &Service{db: db, defs: defs, groupCount: int32(groupCount)}
}

// StartRequest asks for a new run of a workflow version.
type StartRequest struct {
	WorkflowID string
	// Version is active, latest, default or a number.
	Version   string
	RunParams workflow.Params `json:"run_params"`
	// RequestID makes the start idempotent: a repeat returns the first run.
	RequestID string         `json:"request_id"`
	Initiator map[string]any `json:"initiator"`
}

// StartResult is the run a start created, or found for a repeated request.
type StartResult struct {
	Instance   *Instance
	Duplicated bool
}

// Start creates the run and hands it to the engine.
func (s *Service) Start(ctx context.Context, req StartRequest) (*StartResult, error) {
	v, err := s.defs.Get(ctx, req.WorkflowID, req.Version)
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" {
		if inst, err := s.byRequestID(ctx, req.WorkflowID, req.RequestID); err == nil {
			return &StartResult{Instance: inst, Duplicated: true}, nil
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	timeout := DefaultTimeout
	if v.Workflow.Timeout != nil {
		if d, err := v.Workflow.Timeout.Resolve(); err == nil && d > 0 {
			timeout = d
		}
	}
	runParams, err := json.Marshal(orEmptyParams(req.RunParams))
	if err != nil {
		return nil, fmt.Errorf("encode run params: %w", err)
	}
	initiator := req.Initiator
	if initiator == nil {
		initiator = map[string]any{"type": "MANUAL"}
	}
	created := []instance.TimelineEvent{instance.StatusEvent(string(instance.WorkflowCreated), "run requested")}
	var ref flow.Ref
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var iid int64
		err := tx.QueryRow(ctx, `UPDATE workflow SET latest_instance_id = latest_instance_id + 1
                WHERE workflow_id = $1 RETURNING latest_instance_id`, req.WorkflowID).Scan(&iid)
		if errors.Is(err, pgx.ErrNoRows) {
			// Deleted since its version was read.
			return fmt.Errorf("workflow %s: %w", req.WorkflowID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("allocate instance id: %w", err)
		}
		ref = flow.Ref{WorkflowID: req.WorkflowID, InstanceID: iid, RunID: 1}
		group := instance.GroupFor(req.WorkflowID, iid, s.groupCount)
		var requestID *string
		if req.RequestID != "" {
			requestID = &req.RequestID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
                request_id, group_count, group_id, status, definition, run_params, initiator, timeline, timeout_seconds)
                VALUES ($1, $2, 1, $3, $4, $5, $6, $7, 'CREATED', $8, $9, $10, $11, $12)`,
			req.WorkflowID, iid, v.Version, uuid.New(), requestID, s.groupCount, group, v.Raw, runParams,
			initiator, created, int64(timeout/time.Second)); err != nil {
			return fmt.Errorf("insert instance: %w", err)
		}
		_, err = queue.Enqueue(ctx, tx, queue.StartWorkflow, group, flow.StartMessage{Ref: ref, Group: group})
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && req.RequestID != "" {
		// A concurrent start with the same request id won.
		inst, err := s.byRequestID(ctx, req.WorkflowID, req.RequestID)
		if err != nil {
			return nil, err
		}
		return &StartResult{Instance: inst, Duplicated: true}, nil
	}
	if err != nil {
		return nil, err
	}
	inst, err := s.Instance(ctx, ref.WorkflowID, ref.InstanceID, ref.RunID)
	if err != nil {
		return nil, err
	}
	return &StartResult{Instance: inst}, nil
}

func orEmptyParams(p workflow.Params) workflow.Params {
	if p == nil {
		return workflow.Params{}
	}
	return p
}

// Act asks the engine to stop or kill a run (the latest run when run is 0).
// It returns the run as it is now; the engine applies the action shortly.
func (s *Service) Act(ctx context.Context, workflowID string, instanceID, run int64, action flow.Action) (*Instance, error) {
	inst, err := s.Instance(ctx, workflowID, instanceID, run)
	if err != nil {
		return nil, err
	}
	if inst.Status.IsTerminal() {
		return nil, fmt.Errorf("%w: workflow instance %s/%d is already %s", ErrConflict, workflowID, instanceID, inst.Status)
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		_, err := queue.Enqueue(ctx, tx, queue.InstanceAction, inst.groupID, flow.ActionMessage{
			Ref:   flow.Ref{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID},
			Group: inst.groupID, Action: action,
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
func (s *Service) ActOnAll(ctx context.Context, workflowID string, action flow.Action) (int, error) {
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
			if _, err := queue.Enqueue(ctx, tx, queue.InstanceAction, l.group, flow.ActionMessage{
				Ref:   flow.Ref{WorkflowID: workflowID, InstanceID: l.iid, RunID: l.run},
				Group: l.group, Action: action,
			}); err != nil {
				return err
			}
		}
		n = len(all)
		return nil
	})
	return n, err
}
