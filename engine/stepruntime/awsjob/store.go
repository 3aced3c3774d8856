package awsjob

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// Store is the registry of running AWS jobs (table aws_job, migration
// 00140): which attempt waits for which job.
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

const registerSQL = `
INSERT INTO aws_job (service, job_id, step_uuid, workflow_id, instance_id, run_id, step_id, attempt_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (service, job_id) DO NOTHING`

const forgetSQL = `DELETE FROM aws_job WHERE service = $1 AND job_id = $2`

const jobAttemptSQL = `
SELECT j.workflow_id, j.instance_id, j.run_id, j.step_id, i.group_id
FROM aws_job j JOIN workflow_instance i USING (workflow_id, instance_id, run_id)
WHERE j.service = $1 AND j.job_id = $2`

// Register implements Registry.
func (s *Store) Register(ctx context.Context, service, jobID string, a *stepruntime.Attempt) error {
	if _, err := s.db.Exec(ctx, registerSQL, service, jobID, a.UUID, a.WorkflowID, a.InstanceID, a.RunID, a.StepID, a.AttemptID); err != nil {
		return fmt.Errorf("register %s job %s: %w", service, jobID, err)
	}
	return nil
}

// Forget implements Registry.
func (s *Store) Forget(ctx context.Context, service, jobID string) error {
	if _, err := s.db.Exec(ctx, forgetSQL, service, jobID); err != nil {
		return fmt.Errorf("forget %s job %s: %w", service, jobID, err)
	}
	return nil
}

// Wake enqueues a step_update message for the attempt waiting for the
// job, which makes it look at the job at once. It reports false when no
// attempt waits for it (a job Maestro did not start, or one whose attempt
// has already seen it end).
func (s *Store) Wake(ctx context.Context, service, jobID string) (bool, error) {
	woke := false
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var m run.StepUpdateMessage
		err := tx.QueryRow(ctx, jobAttemptSQL, service, jobID).Scan(&m.WorkflowID, &m.InstanceID, &m.RunID, &m.StepID, &m.Group)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the attempt of %s job %s: %w", service, jobID, err)
		}
		if _, err := queue.Enqueue(ctx, tx, queue.StepUpdate, m.Group, m); err != nil {
			return fmt.Errorf("wake the attempt of %s job %s: %w", service, jobID, err)
		}
		woke = true
		return nil
	})
	return woke, err
}
