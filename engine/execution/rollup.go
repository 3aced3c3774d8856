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
	TotalLeafCount int64
	Overview       map[instance.StepStatus]*RollupCount
}

// RollupCount is the number of leaf steps in one status and, for a status
// that is not successful, references to at most MaxRollupRefs of them.
type RollupCount struct {
	Count int64
	Refs  []StepReference
}

// StepReference names the step attempt that did a leaf step's work (for a
// carried-over step, the attempt of the earlier run).
type StepReference struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	AttemptID  int64
}

// MaxRollupRefs caps the references kept per status; the count stays exact.
const MaxRollupRefs = 10

// maxRollupLevels bounds the recursion whatever the data says: child runs
// are at most composite.MaxSubworkflowDepth deep, and a run is never visited
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

// The rollup reads one level of runs at a time: the latest attempt of
// every step, with the attempt that did the work (carried_from for a
// carried-over step) and the child runs that attempt created.
//
// Subworkflow and while children are found by parent_key, the unique
// identity a child records of its parent: equal to the attempt's key for a
// subworkflow child, the key with an iteration suffix ("/i<n>") for a while
// iteration. The suffix match is a range on the same index (rechecked
// exactly), so each such step costs index probes; typed steps, which never
// have children, cost none.
//
// A foreach step's iterations are not looked up one by one: the step is
// returned with its type and iteration count, and the next level reads the
// iterations as a set: the latest run of each iteration, whichever run of
// the parent made it, so the iterations kept from an earlier run (the
// base) and those run again (the current state) merge by construction, and
// their steps are read by one range of the primary key and a hash join
// rather than a probe per iteration.

// rollupRunsSQL reads the latest attempts of the steps of a list of runs.
const rollupRunsSQL = `
WITH runs AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS r(workflow_id, instance_id, run_id)
), latest AS (
    SELECT DISTINCT ON (s.workflow_id, s.instance_id, s.run_id, s.step_id) ` + rollupStepColumns + `
    FROM step_instance s JOIN runs r USING (workflow_id, instance_id, run_id)
    ORDER BY s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id DESC
)` + rollupChildrenSQL

// rollupSetSQL reads the latest attempts of the steps of the latest run of
// each of iterations 1..$2 of foreach workflow $1.
const rollupSetSQL = `
WITH set_runs AS (
    SELECT instance_id, max(run_id) AS run_id FROM workflow_instance
    WHERE workflow_id = $1 AND instance_id <= $2 GROUP BY instance_id
), latest AS (
    SELECT DISTINCT ON (s.instance_id, s.step_id) ` + rollupStepColumns + `
    FROM step_instance s JOIN set_runs r ON r.instance_id = s.instance_id AND r.run_id = s.run_id
    WHERE s.workflow_id = $1 AND s.instance_id <= $2
    ORDER BY s.instance_id, s.step_id, s.attempt_id DESC
)` + rollupChildrenSQL

const rollupStepColumns = `s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id, s.status, s.step_type,
        (s.runtime_state->'data'->>'foreach_total')::bigint AS foreach_total,
        COALESCE((s.runtime_state->'carried_from'->>'workflow_run_id')::bigint, s.run_id) AS work_run,
        COALESCE((s.runtime_state->'carried_from'->>'step_attempt_id')::bigint, s.attempt_id) AS work_attempt`

// rollupChildrenSQL ends both queries: it returns the containers (child
// runs of subworkflow and while steps through a LATERAL join, so other
// steps skip the probes altogether; foreach steps with iterations) one row
// each, and the leaves aggregated: a count per status and at most
// MaxRollupRefs references per status that is not a success, so a level
// of 10,000 iterations sends a handful of rows, not 10,000.
const rollupChildrenSQL = `, containers AS (
    SELECT l.*, c.workflow_id AS child_wf, c.instance_id AS child_iid, c.run_id AS child_run
    FROM latest l
    JOIN LATERAL (
        SELECT c.workflow_id, c.instance_id, c.run_id FROM workflow_instance c
        WHERE l.step_type IN ('subworkflow', 'while') AND (c.parent_key = l.workflow_id || '/' || l.instance_id || '/' ||
                l.work_run || '/' || l.step_id || '/' || l.work_attempt
            OR (c.parent_key >= l.workflow_id || '/' || l.instance_id || '/' || l.work_run || '/' || l.step_id || '/' ||
                    l.work_attempt || '/i'
                AND c.parent_key < l.workflow_id || '/' || l.instance_id || '/' || l.work_run || '/' || l.step_id || '/' ||
                    l.work_attempt || '/j'
                AND left(c.parent_key, length(l.workflow_id || '/' || l.instance_id || '/' || l.work_run || '/' ||
                    l.step_id || '/' || l.work_attempt) + 2) = l.workflow_id || '/' || l.instance_id || '/' ||
                    l.work_run || '/' || l.step_id || '/' || l.work_attempt || '/i'))
    ) c ON true
), leaves AS (
    SELECT l.* FROM latest l
    WHERE NOT (l.step_type = 'foreach' AND COALESCE(l.foreach_total, 0) > 0)
      AND NOT EXISTS (SELECT 1 FROM containers c WHERE c.workflow_id = l.workflow_id AND c.instance_id = l.instance_id
          AND c.run_id = l.run_id AND c.step_id = l.step_id)
)
SELECT 'child', workflow_id, instance_id, step_id, status, work_run, work_attempt, child_wf, child_iid, child_run, 0
FROM containers
UNION ALL
SELECT 'set', workflow_id, instance_id, step_id, status, work_run, work_attempt, NULL, NULL, NULL, foreach_total
FROM latest WHERE step_type = 'foreach' AND COALESCE(foreach_total, 0) > 0
UNION ALL
SELECT 'count', NULL, NULL, NULL, status, NULL, NULL, NULL, NULL, NULL, count(*) FROM leaves GROUP BY status
UNION ALL
(SELECT 'ref', workflow_id, instance_id, step_id, status, work_run, work_attempt, NULL, NULL, NULL, 0 FROM (
    SELECT l.*, row_number() OVER (PARTITION BY status ORDER BY workflow_id, instance_id, run_id, step_id) AS n
    FROM leaves l WHERE status NOT IN ('SUCCEEDED', 'SKIPPED', 'DISABLED', 'UNSATISFIED')) r
WHERE n <= ` + maxRollupRefsSQL + `
ORDER BY workflow_id, instance_id, run_id, step_id)`

// maxRollupRefsSQL is MaxRollupRefs in the SQL text.
const maxRollupRefsSQL = "10"

// runKey identifies one run.
type runKey struct {
	workflowID string
	instanceID int64
	runID      int64
}

// foreachSet is the iterations of one foreach step: the latest run of
// each of iterations 1..total of workflowID.
type foreachSet struct {
	workflowID string
	total      int64
}

// rollupLevel is what one query reads: runs and foreach iteration sets.
type rollupLevel struct {
	runs []runKey
	sets []foreachSet
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
		root := runKey{workflowID, instanceID, runID}
		level := rollupLevel{runs: []runKey{root}}
		seen := map[runKey]bool{root: true}
		seenSets := map[string]bool{}
		for depth := 0; len(level.runs)+len(level.sets) > 0; depth++ {
			if depth >= maxRollupLevels {
				return fmt.Errorf("more than %d levels of child runs", maxRollupLevels)
			}
			next, err := readRollupLevel(ctx, tx, ov, level, seen, seenSets)
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

// readRollupLevel counts the leaf steps of one level into ov and returns
// the next: the child runs and foreach iteration sets of its container
// steps, not seen before.
func readRollupLevel(ctx context.Context, tx pgx.Tx, ov *RollupOverview, level rollupLevel,
	seen map[runKey]bool, seenSets map[string]bool) (rollupLevel, error) {
	var next rollupLevel
	if len(level.runs) > 0 {
		wfs := make([]string, len(level.runs))
		iids := make([]int64, len(level.runs))
		rids := make([]int64, len(level.runs))
		for i, r := range level.runs {
			wfs[i], iids[i], rids[i] = r.workflowID, r.instanceID, r.runID
		}
		if err := scanRollupRows(ctx, tx, ov, &next, seen, seenSets, rollupRunsSQL, wfs, iids, rids); err != nil {
			return rollupLevel{}, err
		}
	}
	for _, f := range level.sets {
		if err := scanRollupRows(ctx, tx, ov, &next, seen, seenSets, rollupSetSQL, f.workflowID, f.total); err != nil {
			return rollupLevel{}, err
		}
	}
	return next, nil
}

// scanRollupRows runs one rollup query, counting leaves into ov and adding
// the children of containers to next.
func scanRollupRows(ctx context.Context, tx pgx.Tx, ov *RollupOverview, next *rollupLevel,
	seen map[runKey]bool, seenSets map[string]bool, sql string, args ...any) error {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			kind                    string
			ref                     StepReference
			wf, step                *string
			iid, workRun, workAtt   *int64
			status                  instance.StepStatus
			childWF                 *string
			childInstance, childRun *int64
			n                       int64
		)
		if err := rows.Scan(&kind, &wf, &iid, &step, &status, &workRun, &workAtt, &childWF, &childInstance, &childRun, &n); err != nil {
			return err
		}
		if wf != nil {
			ref = StepReference{WorkflowID: *wf, InstanceID: *iid, RunID: *workRun, StepID: *step, AttemptID: *workAtt}
		}
		switch kind {
		case "set": // its iterations' steps count, not the step
			id := instance.ForeachWorkflowID(ref.WorkflowID, ref.InstanceID, ref.StepID)
			if !seenSets[id] {
				seenSets[id] = true
				next.sets = append(next.sets, foreachSet{id, n})
			}
		case "child": // its children's steps count, not the step
			child := runKey{*childWF, *childInstance, *childRun}
			if !seen[child] {
				seen[child] = true
				next.runs = append(next.runs, child)
			}
		case "count":
			ov.count(status, n)
		case "ref":
			ov.ref(status, ref)
		}
	}
	return rows.Err()
}

// count adds n leaf steps in status.
func (ov *RollupOverview) count(status instance.StepStatus, n int64) {
	ov.entry(status).Count += n
	ov.TotalLeafCount += n
}

// ref keeps a reference to a leaf step that is not a success, up to
// MaxRollupRefs per status.
func (ov *RollupOverview) ref(status instance.StepStatus, ref StepReference) {
	if c := ov.entry(status); !rollupSucceeded(status) && len(c.Refs) < MaxRollupRefs {
		c.Refs = append(c.Refs, ref)
	}
}

func (ov *RollupOverview) entry(status instance.StepStatus) *RollupCount {
	c := ov.Overview[status]
	if c == nil {
		c = &RollupCount{}
		ov.Overview[status] = c
	}
	return c
}
