// Package execution is what the API does with workflow runs: start them
// (instance row + outbox message + notify, in one transaction), ask the
// engine to stop or kill them, and read them back. It never runs workflow
// logic itself.
package execution

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// DefaultTimeout is a run's timeout when its workflow sets none (Maestro's
// 10 days).
const DefaultTimeout = 10 * 24 * time.Hour

// Limits on what a start or restart request may carry, as in Maestro.
const (
	// MaxRequestIDLength bounds a request id in bytes. Maestro's request id
	// is a UUID (36 characters); any string up to this length is accepted.
	MaxRequestIDLength = 256
	// MaxRunParams bounds the number of run params of a start or restart
	// (Maestro's PARAM_MAP_SIZE_LIMIT).
	MaxRunParams = 128
)

// checkRequest refuses a request id or run params over the limits
// (ErrInvalid), before anything is written: an oversized request id would
// otherwise fail in the unique index as a database error.
func checkRequest(requestID string, runParams workflow.Params) error {
	if len(requestID) > MaxRequestIDLength {
		return fmt.Errorf("%w: request_id is %d bytes long; the limit is %d", ErrInvalid, len(requestID), MaxRequestIDLength)
	}
	if !utf8.ValidString(requestID) || strings.ContainsRune(requestID, 0) {
		return fmt.Errorf("%w: request_id is not valid UTF-8 or contains a NUL byte", ErrInvalid)
	}
	if strings.ContainsRune(requestID, utf8.RuneError) {
		// JSON decoding turns every lone surrogate escape (\ud800,
		// \udfff, ...) into U+FFFD: two different ids would become one,
		// and the second start would be taken for a repeat of the first.
		return fmt.Errorf("%w: request_id contains U+FFFD (or a lone surrogate escape, which decodes to it)", ErrInvalid)
	}
	if len(runParams) > MaxRunParams {
		return fmt.Errorf("%w: %d run params; the limit is %d", ErrInvalid, len(runParams), MaxRunParams)
	}
	return nil
}

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
		groupCount = run.DefaultGroupCount
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
	// Instance is the created run's row as read right after the start
	// committed, without the step overview (RuntimeOverview is nil): every
	// caller wants only its ids and status, and a run this new has no steps
	// worth a second query.
	Instance   *Instance
	Duplicated bool
}

// Start creates the run and hands it to the engine (run.Create).
func (s *Service) Start(ctx context.Context, req StartRequest) (*StartResult, error) {
	if err := checkRequest(req.RequestID, req.RunParams); err != nil {
		return nil, err
	}
	v, err := s.defs.Get(ctx, req.WorkflowID, req.Version)
	if err != nil {
		return nil, err
	}
	start := run.New{Ref: run.Ref{WorkflowID: req.WorkflowID}, Version: v.Version, RequestID: req.RequestID,
		Definition: v.Raw, Workflow: &v.Workflow, GroupCount: s.groupCount,
		Check: func(n *run.New) error { return startInputs(n, req.RunParams, req.Initiator) }}
	var created []run.Created
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		if created, err = run.Create(ctx, tx, []run.New{start}, run.Options{}); err != nil {
			return err
		}
		if created[0].Queued && testHookQueued != nil {
			testHookQueued()
		}
		return created[0].Err
	})
	if run.IsDuplicate(err) && req.RequestID != "" {
		// A concurrent start with the same request id won.
		return s.duplicate(ctx, req.WorkflowID, req.RequestID)
	}
	if errors.Is(err, run.ErrWorkflowGone) {
		// Deleted since its version was read.
		return nil, fmt.Errorf("workflow %s: %w", req.WorkflowID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	c := created[0]
	if c.Duplicated {
		return s.duplicate(ctx, req.WorkflowID, req.RequestID)
	}
	run.AdmitAfterCommit(ctx, s.db, created)
	inst, err := s.Run(ctx, c.Ref.WorkflowID, c.Ref.InstanceID, c.Ref.RunID)
	if err != nil {
		return nil, err
	}
	return &StartResult{Instance: inst}, nil
}

// duplicate is the answer to a start whose request id an earlier start
// used: that start's run.
func (s *Service) duplicate(ctx context.Context, workflowID, requestID string) (*StartResult, error) {
	inst, err := s.byRequestID(ctx, workflowID, requestID)
	if err != nil {
		return nil, err
	}
	return &StartResult{Instance: inst, Duplicated: true}, nil
}

// testHookQueued, when set, runs inside a start's transaction once its run
// was queued: a test ends a run there to race the start.
var testHookQueued func()

// Readmit applies a workflow's current run strategy to its queued runs now,
// for example after its properties changed. An error is left to the
// engine's admission sweep, which admits within its interval.
func (s *Service) Readmit(ctx context.Context, workflowID string) {
	_, _ = run.AdmitWorkflow(ctx, s.db, workflowID, false)
}

func orEmptyParams(p workflow.Params) workflow.Params {
	if p == nil {
		return workflow.Params{}
	}
	return p
}

// ManualInitiator is the initiator of a run a caller started or restarted
// by hand (Maestro's MANUAL initiator).
func ManualInitiator(caller string) map[string]any {
	return map[string]any{"type": "MANUAL", "user": caller}
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
