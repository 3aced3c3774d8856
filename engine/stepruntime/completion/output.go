package completion

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
)

// Errors of Store.SetOutputs (besides ErrNotFound and ErrForbidden).
var (
	ErrNotRunning      = errors.New("output params can be set only while the step attempt is RUNNING")
	ErrOutputsTooLarge = errors.New("output data too large")
)

// Outputs are output params and artifacts a job sets on the attempt that
// runs it. Params is the encoded params.Values, Artifacts a JSON object.
type Outputs struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	AttemptID  int64
	UUID       string
	Params     []byte
	Artifacts  []byte
	// MaxBytes bounds the attempt's merged params and artifacts.
	MaxBytes int
}

const attemptForOutputsSQL = `SELECT uuid::text, status FROM step_instance
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5 FOR SHARE`

// upsertOutputsSQL merges output data into the attempt's; nothing is
// written (no row returned) when the merge would be larger than $8.
const upsertOutputsSQL = `INSERT INTO step_output_data (step_uuid, workflow_id, instance_id, run_id, step_id, attempt_id,
    params, artifacts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $9)
ON CONFLICT (step_uuid) DO UPDATE SET params = step_output_data.params || EXCLUDED.params,
    artifacts = step_output_data.artifacts || EXCLUDED.artifacts, modify_time = now()
    WHERE octet_length((step_output_data.params || EXCLUDED.params)::text)
        + octet_length((step_output_data.artifacts || EXCLUDED.artifacts)::text) <= $8
RETURNING params`

// SetOutputs merges output params and artifacts into the attempt's and
// returns its merged params. Outputs come from the job a RUNNING attempt
// waits for; the engine reads them when that attempt ends (and only then).
// Errors: ErrNotFound, ErrForbidden (the UUID is not the attempt's),
// ErrNotRunning, ErrOutputsTooLarge.
func (s *Store) SetOutputs(ctx context.Context, o Outputs) ([]byte, error) {
	var merged []byte
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var uuid string
		var status instance.StepStatus
		err := tx.QueryRow(ctx, attemptForOutputsSQL, o.WorkflowID, o.InstanceID, o.RunID, o.StepID, o.AttemptID).Scan(&uuid, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("step attempt %s/%d/%d/%s/%d: %w", o.WorkflowID, o.InstanceID, o.RunID, o.StepID, o.AttemptID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read step attempt: %w", err)
		}
		if uuid != o.UUID {
			return ErrForbidden
		}
		if status != instance.StepRunning {
			return fmt.Errorf("step attempt is %s: %w", status, ErrNotRunning)
		}
		err = tx.QueryRow(ctx, upsertOutputsSQL, o.UUID, o.WorkflowID, o.InstanceID, o.RunID, o.StepID, o.AttemptID, o.Params,
			o.MaxBytes, o.Artifacts).Scan(&merged)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("invalid output data: the attempt's output params and artifacts would be more than %d bytes: %w",
				o.MaxBytes, ErrOutputsTooLarge)
		}
		if err != nil {
			return fmt.Errorf("store output data: %w", err)
		}
		return nil
	})
	return merged, err
}
