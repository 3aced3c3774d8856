// Package completion stores the completion calls of step attempts whose
// job reports back by itself (an asynchronous Lambda step): the job sets
// its outputs with PUT /api/v3/output-data, then says it is done with PUT
// /api/v3/step-completion. The call is written in one transaction with a
// step_update message that wakes the attempt at once; the runtime reads
// it (Store.Completion) and ends the attempt with its state.
package completion

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// KeyAwaits is set to true in the runtime data (runtime_state.data) of an
// attempt that waits for a completion call; only such an attempt accepts
// one.
const KeyAwaits = "awaits_completion"

// States a completion may report, as Maestro's step runtime states.
var States = []string{"DONE", "USER_ERROR", "PLATFORM_ERROR", "FATAL_ERROR"}

// Errors of Store.Complete.
var (
	ErrNotFound  = errors.New("step attempt not found")
	ErrForbidden = errors.New("step_instance_uuid does not match the step attempt")
	ErrConflict  = errors.New("step attempt does not accept a completion")
)

// Request is a completion call. UUID is the attempt's step_instance_uuid:
// knowing it proves the caller runs the attempt.
type Request struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"workflow_instance_id"`
	RunID      int64  `json:"workflow_run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"step_attempt_id"`
	UUID       string `json:"step_instance_uuid"`
	// StepToken is the attempt's step token, when not sent as TokenHeader.
	StepToken string `json:"step_token,omitempty"`
	// State is DONE, USER_ERROR, PLATFORM_ERROR or FATAL_ERROR.
	State string `json:"state"`
	// Message explains the state; it goes on the step's timeline.
	Message string `json:"message,omitempty"`
}

// Completion is a stored completion call.
type Completion struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

// Store reads and writes completion calls.
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

const attemptForCompletionSQL = `
SELECT s.uuid::text, s.status, COALESCE((s.runtime_state->'data'->>'` + KeyAwaits + `')::boolean, false), i.group_id
FROM step_instance s JOIN workflow_instance i USING (workflow_id, instance_id, run_id)
WHERE s.workflow_id = $1 AND s.instance_id = $2 AND s.run_id = $3 AND s.step_id = $4 AND s.attempt_id = $5
FOR SHARE OF s`

const insertCompletionSQL = `
INSERT INTO step_completion (step_uuid, workflow_id, instance_id, run_id, step_id, attempt_id, state, message)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (step_uuid) DO NOTHING`

const readCompletionSQL = `SELECT state, message FROM step_completion WHERE step_uuid = $1`

// Complete records a completion call and wakes the attempt. The first call
// of an attempt wins: a repeated one changes nothing and returns the
// stored completion.
func (s *Store) Complete(ctx context.Context, r Request) (Completion, error) {
	var out Completion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var (
			uuid   string
			status instance.StepStatus
			awaits bool
			group  int32
		)
		err := tx.QueryRow(ctx, attemptForCompletionSQL, r.WorkflowID, r.InstanceID, r.RunID, r.StepID, r.AttemptID).
			Scan(&uuid, &status, &awaits, &group)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("step attempt %s/%d/%d/%s/%d: %w", r.WorkflowID, r.InstanceID, r.RunID, r.StepID, r.AttemptID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read step attempt: %w", err)
		}
		if uuid != r.UUID {
			return ErrForbidden
		}
		if err := tx.QueryRow(ctx, readCompletionSQL, uuid).Scan(&out.State, &out.Message); err == nil {
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read completion: %w", err)
		}
		if status != instance.StepRunning || !awaits {
			return fmt.Errorf("%w: it is %s and waits for no completion call (only an asynchronous Lambda step does, while RUNNING)",
				ErrConflict, status)
		}
		if _, err := tx.Exec(ctx, insertCompletionSQL, uuid, r.WorkflowID, r.InstanceID, r.RunID, r.StepID, r.AttemptID,
			r.State, r.Message); err != nil {
			return fmt.Errorf("store completion: %w", err)
		}
		out = Completion{State: r.State, Message: r.Message}
		ref := run.Ref{WorkflowID: r.WorkflowID, InstanceID: r.InstanceID, RunID: r.RunID}
		if _, err := queue.Enqueue(ctx, tx, queue.StepUpdate, group, run.StepUpdateMessage{Ref: ref, Group: group, StepID: r.StepID}); err != nil {
			return fmt.Errorf("wake the step: %w", err)
		}
		return nil
	})
	return out, err
}

// Completion returns an attempt's completion call, or nil when none came
// yet.
func (s *Store) Completion(ctx context.Context, stepUUID string) (*Completion, error) {
	var c Completion
	err := s.db.QueryRow(ctx, readCompletionSQL, stepUUID).Scan(&c.State, &c.Message)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read completion of step attempt %s: %w", stepUUID, err)
	}
	return &c, nil
}
