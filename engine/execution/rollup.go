package execution

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
)

// Rollup (docs/rollup.md).
//
// The rollup of a run counts its leaf steps by status, flattened across the
// child runs its steps created: a step that has child runs linked to the
// attempt that did its work (a subworkflow step; foreach or while
// iterations once they are child runs) is not counted itself, the leaf
// steps of its children are, recursively. The run's own step rows are the
// merge of the base (steps a restart carried over from an earlier run,
// marked runtime_state.carried_from, whose children are those of the run
// that did the work) and the current state (the steps the run decided
// itself). It is computed on read, one query per nesting level, so it is a
// snapshot that may lag a level that is changing while it is read.

// RollupOverview is the leaf-step summary of a run and its nested child
// runs.
type RollupOverview struct {
	TotalLeafCount int64                                `json:"total_leaf_count"`
	Overview       map[instance.StepStatus]*RollupCount `json:"overview"`
}

// RollupCount is the number of leaf steps in one status and, for a status
// that is not successful, references to at most MaxRollupRefs of them.
type RollupCount struct {
	Count int64           `json:"cnt"`
	Refs  []StepReference `json:"ref,omitempty"`
}

// StepReference names the step attempt that did a leaf step's work (for a
// carried-over step, the attempt of the earlier run).
type StepReference struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"instance_id"`
	RunID      int64  `json:"run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"attempt_id"`
}

// MaxRollupRefs caps the references kept per status; the count stays exact.
const MaxRollupRefs = 10

// maxRollupLevels bounds the recursion whatever the data says: child runs
// are at most flow.MaxSubworkflowDepth deep, and a run is never visited
// twice.
const maxRollupLevels = 32

// rollupSucceeded reports whether a status needs no reference: the step
// did its work or was rightly not run.
func rollupSucceeded(s instance.StepStatus) bool {
	switch s {
	case instance.StepSucceeded, instance.StepSkipped, instance.StepDisabled, instance.StepUnsatisfied:
		return true
	}
	return false
}

// rollupLevelSQL reads the latest attempt of every step of a set of runs,
// with the attempt that did the work (carried_from for a carried-over step)
// and the child runs that attempt created, in one statement. Children are
// found by parent_key, the unique identity a child records of its parent:
// equal to the attempt's key for a subworkflow child, the key with an
// iteration suffix ("/i<n>") for an iteration of a loop step. The suffix
// match is a range on the same index (rechecked exactly), so each step
// costs index probes, never a scan of the runs table.
const rollupLevelSQL = `
WITH runs AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS r(workflow_id, instance_id, run_id)
), latest AS (
    SELECT DISTINCT ON (s.workflow_id, s.instance_id, s.run_id, s.step_id)
        s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id, s.status,
        COALESCE((s.runtime_state->'carried_from'->>'workflow_run_id')::bigint, s.run_id) AS work_run,
        COALESCE((s.runtime_state->'carried_from'->>'step_attempt_id')::bigint, s.attempt_id) AS work_attempt
    FROM step_instance s JOIN runs r USING (workflow_id, instance_id, run_id)
    ORDER BY s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id DESC
), keyed AS (
    SELECT l.*, l.workflow_id || '/' || l.instance_id || '/' || l.work_run || '/' || l.step_id || '/' ||
        l.work_attempt AS pkey
    FROM latest l
)
SELECT l.workflow_id, l.instance_id, l.step_id, l.status, l.work_run, l.work_attempt,
    c.workflow_id, c.instance_id, c.run_id
FROM keyed l
LEFT JOIN workflow_instance c ON c.parent_key = l.pkey
    OR (c.parent_key >= l.pkey || '/i' AND c.parent_key < l.pkey || '/j'
        AND left(c.parent_key, length(l.pkey) + 2) = l.pkey || '/i')
ORDER BY l.workflow_id, l.instance_id, l.run_id, l.step_id, c.instance_id, c.run_id`

// runKey identifies one run.
type runKey struct {
	workflowID string
	instanceID int64
	runID      int64
}

// rollupTx is how a rollup reads: one snapshot for every level (so a child
// that ends between two levels is seen in one state), read only, and
// without JIT compilation, which the planner's guess for the iteration
// range would otherwise buy at a cost far above the query's.
var rollupTx = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// Rollup computes the rollup of one run (docs/rollup.md).
func (s *Service) Rollup(ctx context.Context, workflowID string, instanceID, runID int64) (*RollupOverview, error) {
	ov := &RollupOverview{Overview: map[instance.StepStatus]*RollupCount{}}
	err := pgx.BeginTxFunc(ctx, s.db, rollupTx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
			return err
		}
		level := []runKey{{workflowID, instanceID, runID}}
		seen := map[runKey]bool{level[0]: true}
		for depth := 0; len(level) > 0; depth++ {
			if depth >= maxRollupLevels {
				return fmt.Errorf("more than %d levels of child runs", maxRollupLevels)
			}
			next, err := rollupLevel(ctx, tx, ov, level, seen)
			if err != nil {
				return fmt.Errorf("level %d: %w", depth, err)
			}
			level = next
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rollup of %s/%d/%d: %w", workflowID, instanceID, runID, err)
	}
	return ov, nil
}

// rollupLevel counts the leaf steps of a set of runs into ov and returns
// the child runs of their container steps, not seen before.
func rollupLevel(ctx context.Context, tx pgx.Tx, ov *RollupOverview, level []runKey, seen map[runKey]bool) ([]runKey, error) {
	wfs := make([]string, len(level))
	iids := make([]int64, len(level))
	rids := make([]int64, len(level))
	for i, r := range level {
		wfs[i], iids[i], rids[i] = r.workflowID, r.instanceID, r.runID
	}
	rows, err := tx.Query(ctx, rollupLevelSQL, wfs, iids, rids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var next []runKey
	for rows.Next() {
		var (
			ref                     StepReference
			status                  instance.StepStatus
			childWF                 *string
			childInstance, childRun *int64
		)
		if err := rows.Scan(&ref.WorkflowID, &ref.InstanceID, &ref.StepID, &status, &ref.RunID, &ref.AttemptID,
			&childWF, &childInstance, &childRun); err != nil {
			return nil, err
		}
		if childWF != nil {
			// A container: its children's steps count, not the step.
			child := runKey{*childWF, *childInstance, *childRun}
			if !seen[child] {
				seen[child] = true
				next = append(next, child)
			}
			continue
		}
		ov.add(status, ref)
	}
	return next, rows.Err()
}

// add counts one leaf step.
func (ov *RollupOverview) add(status instance.StepStatus, ref StepReference) {
	c := ov.Overview[status]
	if c == nil {
		c = &RollupCount{}
		ov.Overview[status] = c
	}
	c.Count++
	ov.TotalLeafCount++
	if !rollupSucceeded(status) && len(c.Refs) < MaxRollupRefs {
		c.Refs = append(c.Refs, ref)
	}
}
