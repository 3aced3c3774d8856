package run

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/maestro-aws/maestro/engine/instance"
)

// Deduplication and allocation in one statement, for a call whose caller
// holds the lock of every workflow it creates runs of (a batch of starts
// with request ids, execution.StartBatchTx): dedupAllocateSQL.
//
// Why this cannot leave a gap in a workflow's instance ids, nor start a
// request id twice: the caller took the workflow locks in an earlier
// statement, so this statement's snapshot (READ COMMITTED: taken when it
// starts) sees every run another transaction committed under those locks,
// and no other transaction can add a run of those workflows before this
// one commits (every creation of a run with an instance id to allocate,
// or admitted under its strategy, takes the workflow lock first). The
// statement counts, per workflow, exactly the runs it did not find stored
// (d), and allocates that many ids; the INSERT that follows inserts exactly
// those runs with those ids, or fails and the transaction with it. Checks
// (New.Check) run before the statement, so a run a check refuses is not
// counted either. It is the two statements it replaces (dedupSQL, then
// allocateSQL, both after the lock), evaluated over one snapshot.

// dedupAllocateSQL takes one row per run to look up or allocate for:
// $1 workflow, $2 request id (NULL: none to look up), $3 whether it gets an
// id allocated unless a stored run has its request id. It returns the
// stored first runs with the request ids (first column false) and, per
// workflow that allocated ids, how many (in the group column) and its latest
// instance id after them (first column true).
// The workflows are locked already, so the UPDATE's order does not matter.
const dedupAllocateSQL = `
WITH k AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[]) AS k(id, request_id, alloc)),
d AS MATERIALIZED (
    SELECT i.workflow_id, i.request_id, i.instance_id, i.uuid::text AS uuid, i.group_id, i.status, i.queued
    FROM (SELECT DISTINCT id, request_id FROM k WHERE request_id IS NOT NULL) AS q
    JOIN workflow_instance i ON i.workflow_id = q.id AND i.request_id = q.request_id AND i.run_id = 1),
n AS (
    SELECT k.id, count(*) AS n FROM k
    WHERE k.alloc AND NOT EXISTS (SELECT 1 FROM d WHERE d.workflow_id = k.id AND d.request_id = k.request_id)
    GROUP BY k.id),
a AS (
    UPDATE workflow w SET latest_instance_id = w.latest_instance_id + n.n
    FROM n WHERE w.workflow_id = n.id
    RETURNING w.workflow_id, n.n, w.latest_instance_id)
SELECT false, workflow_id, request_id, instance_id, uuid, group_id, status, queued FROM d
UNION ALL
SELECT true, workflow_id, NULL, latest_instance_id, NULL, n::integer, NULL, NULL FROM a`

// callerLocked reports whether opt's caller holds the lock of every
// workflow runs needs locked (admitted under its strategy or allocating an
// instance id) and some run has a request id to look up: dedupAllocate's
// case.
func callerLocked(runs []New, props map[string][]byte) bool {
	if len(props) == 0 {
		return false
	}
	lookup := false
	for i := range runs {
		r := &runs[i]
		if r.Admission == ByStrategy || r.Ref.InstanceID == 0 {
			if _, ok := props[r.Ref.WorkflowID]; !ok {
				return false
			}
		}
		if r.RequestID != "" && r.Ref.RunID == 1 {
			lookup = true
		}
	}
	return lookup
}

// dedupAllocate is dedup and then allocate for a call whose caller holds
// the workflow locks (callerLocked), with one statement. It gives the same
// outcome: a run whose request id a stored run has is that run's duplicate
// (whatever its check says); one whose request id an earlier run of the
// call that passed its check has is that run's duplicate (its GroupID the
// earlier run's index until Create resolves it); a run its check refuses
// has the check's error and no id. It returns the runs to create, in order,
// with their instance ids.
func dedupAllocate(ctx context.Context, tx Tx, runs []New, out []Created) ([]int, error) {
	type key struct{ workflowID, requestID string }
	n := len(runs)
	ids, rids, alloc := make([]string, 0, n), make([]pgtype.Text, 0, n), make([]bool, 0, n)
	earlier := make(map[key]int, n)
	dupOf := map[int]int{} // a run repeating an earlier checked run of the call
	checkErr := map[int]error{}
	for i := range runs {
		r := &runs[i]
		keyed := r.RequestID != "" && r.Ref.RunID == 1
		if keyed {
			if j, ok := earlier[key{r.Ref.WorkflowID, r.RequestID}]; ok {
				dupOf[i] = j
				continue
			}
		}
		if r.Check != nil {
			if err := r.Check(r); err != nil {
				checkErr[i] = err
				if keyed { // a stored run with its request id still answers it
					ids, rids, alloc = append(ids, r.Ref.WorkflowID), append(rids, textOrNull(r.RequestID)), append(alloc, false)
				}
				continue
			}
		}
		if keyed {
			earlier[key{r.Ref.WorkflowID, r.RequestID}] = i
		}
		if keyed || r.Ref.InstanceID == 0 {
			ids, rids, alloc = append(ids, r.Ref.WorkflowID), append(rids, textOrNull(r.RequestID)), append(alloc, r.Ref.InstanceID == 0)
		}
	}
	stored := map[key]Created{}
	last := map[string]int64{}
	allocated := map[string]int64{}
	if len(ids) > 0 {
		rows, err := tx.Query(ctx, dedupAllocateSQL, ids, rids, alloc)
		if err != nil {
			return nil, fmt.Errorf("find duplicate starts and allocate instance ids: %w", err)
		}
		// Declared once: Scan's pointers would move per-row variables to
		// the heap, a few allocations per row.
		var (
			allocRow   bool
			id         string
			rid, uuid  pgtype.Text
			instanceID int64
			group      pgtype.Int4
			status     pgtype.Text
			queued     pgtype.Bool
		)
		for rows.Next() {
			if err := rows.Scan(&allocRow, &id, &rid, &instanceID, &uuid, &group, &status, &queued); err != nil {
				rows.Close()
				return nil, fmt.Errorf("find duplicate starts and allocate instance ids: %w", err)
			}
			if allocRow {
				last[id], allocated[id] = instanceID, int64(group.Int32)
				continue
			}
			stored[key{id, rid.String}] = Created{Duplicated: true, Ref: Ref{WorkflowID: id, InstanceID: instanceID, RunID: 1},
				UUID: uuid.String, GroupID: group.Int32, Status: instance.WorkflowStatus(status.String), Queued: queued.Bool}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("find duplicate starts and allocate instance ids: %w", err)
		}
	}
	fresh := make([]int, 0, n)
	need := map[string][]int{}
	for i := range runs {
		r := &runs[i]
		if r.RequestID != "" && r.Ref.RunID == 1 {
			if c, ok := stored[key{r.Ref.WorkflowID, r.RequestID}]; ok {
				out[i] = c
				continue
			}
		}
		if j, ok := dupOf[i]; ok {
			out[i] = Created{Duplicated: true, GroupID: int32(j)}
			continue
		}
		if err, ok := checkErr[i]; ok {
			out[i].Err = err
			continue
		}
		if r.Ref.InstanceID == 0 {
			need[r.Ref.WorkflowID] = append(need[r.Ref.WorkflowID], i)
		}
		fresh = append(fresh, i)
	}
	for id, idx := range need {
		l, ok := last[id]
		if !ok || allocated[id] != int64(len(idx)) {
			return nil, fmt.Errorf("allocate instance ids of %s: %d allocated for %d runs: %w", id, allocated[id], len(idx), ErrWorkflowGone)
		}
		assignIDs(runs, idx, l, out)
	}
	return fresh, nil
}
