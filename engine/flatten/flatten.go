// Package flatten is Maestro's foreach flattening view: every iteration of
// a step nested in (possibly nested) foreach steps of one run, as one flat
// list keyed by the iteration's rank, with its loop params and the state of
// the step's latest attempt in it. Maestro builds the view from step
// events in a table of its own; here it is read from the iteration runs.
package flatten

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// Iteration is one iteration of the step, with the step's latest attempt
// in the iteration run (the leaf).
type Iteration struct {
	// Rank orders the iterations: the iteration numbers from the outermost
	// foreach in, each prefixed by its length ("11" is 1, "212" is 12),
	// joined by "-".
	Rank string
	// AttemptSeq is the run and attempt of each foreach step on the path,
	// then of the leaf attempt, encoded like Rank.
	AttemptSeq string
	// LoopParams are the iteration's loop param values as text.
	LoopParams map[string]string
	// The leaf attempt.
	WorkflowID   string
	InstanceID   int64
	RunID        int64
	StepID       string
	AttemptID    int64
	Status       string
	Timeline     json.RawMessage
	RuntimeState json.RawMessage
	CreateTime   time.Time
	StartTime    *time.Time
	EndTime      *time.Time
	ModifyTime   time.Time
}

// Path returns the ids of the foreach steps that contain stepID, outermost
// first, and whether stepID is inside one at all.
func Path(wf *workflow.Workflow, stepID string) ([]string, bool) {
	var walk func(steps []workflow.StepNode, path []string) ([]string, bool)
	walk = func(steps []workflow.StepNode, path []string) ([]string, bool) {
		for i := range steps {
			n := &steps[i]
			if n.ID() == stepID {
				return path, len(path) > 0
			}
			if n.Foreach != nil {
				if p, ok := walk(n.Foreach.Steps, append(slices.Clone(path), n.ID())); ok {
					return p, true
				}
			}
		}
		return nil, false
	}
	return walk(wf.Steps, nil)
}

// LoopParamNames returns the loop param names of the foreach steps on the
// path, in order of first appearance.
func LoopParamNames(wf *workflow.Workflow, path []string) []string {
	var out []string
	on := map[string]bool{}
	for _, id := range path {
		on[id] = true
	}
	workflow.WalkSteps(wf.Steps, func(_ string, n *workflow.StepNode, _ int) bool {
		if n.Foreach != nil && on[n.ID()] {
			if lp, ok := n.Foreach.Params[workflow.ParamLoopParams].MapValue(); ok {
				for _, name := range slices.Sorted(maps.Keys(lp)) {
					if !slices.Contains(out, name) {
						out = append(out, name)
					}
				}
			}
		}
		return true
	})
	return out
}

// iterationRunsSQL reads, for each iteration of the given inline
// workflows, its newest run up to the root run $2, with its params and its
// parent (the foreach attempt that created it).
const iterationRunsSQL = `
SELECT DISTINCT ON (workflow_id, instance_id) workflow_id, instance_id, run_id, params, parent
FROM workflow_instance WHERE workflow_id = ANY($1) AND run_id <= $2
ORDER BY workflow_id, instance_id, run_id DESC`

// leafAttemptsSQL reads the latest attempt of step $3 in each of the runs
// named by the arrays $1 (workflow ids), $2 (instance ids) and $4 (run
// ids).
const leafAttemptsSQL = `
SELECT DISTINCT ON (s.workflow_id, s.instance_id) s.workflow_id, s.instance_id, s.run_id, s.attempt_id, s.status,
    s.timeline, s.runtime_state, s.create_time, s.start_time, s.end_time, s.modify_time
FROM unnest($1::text[], $2::bigint[], $4::bigint[]) AS r(workflow_id, instance_id, run_id)
JOIN step_instance s ON s.workflow_id = r.workflow_id AND s.instance_id = r.instance_id AND s.run_id = r.run_id
WHERE s.step_id = $3
ORDER BY s.workflow_id, s.instance_id, s.attempt_id DESC`

// parentRef is the foreach attempt that created an iteration run.
type parentRef struct {
	RunID     int64 `json:"run_id"`
	AttemptID int64 `json:"attempt_id"`
}

// node is one iteration run on the way down.
type node struct {
	workflowID string
	instanceID int64
	runID      int64
	params     json.RawMessage
	rank       []string
	seq        []string
}

// Iterations lists the iterations of stepID in run runID of instance
// instanceID of workflowID, whose runtime workflow is wf, by rank. The
// list is empty when the step is not inside a foreach step.
func Iterations(ctx context.Context, db *pgxpool.Pool, wf *workflow.Workflow, workflowID string, instanceID, runID int64,
	stepID string) ([]Iteration, error) {
	path, ok := Path(wf, stepID)
	if !ok {
		return []Iteration{}, nil
	}
	names := LoopParamNames(wf, path)
	level := []node{{workflowID: workflowID, instanceID: instanceID, runID: runID}}
	for _, foreach := range path {
		byID := map[string]node{}
		ids := make([]string, 0, len(level))
		for _, n := range level {
			id := fmt.Sprintf("%s:%d:%s", n.workflowID, n.instanceID, foreach)
			byID[id] = n
			ids = append(ids, id)
		}
		rows, err := db.Query(ctx, iterationRunsSQL, ids, runID)
		if err != nil {
			return nil, fmt.Errorf("read iterations of foreach %s: %w", foreach, err)
		}
		next, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
			var n node
			var parent []byte
			if err := r.Scan(&n.workflowID, &n.instanceID, &n.runID, &n.params, &parent); err != nil {
				return n, err
			}
			var p parentRef
			_ = json.Unmarshal(parent, &p) // an iteration always records its parent
			up := byID[n.workflowID]
			n.rank = append(slices.Clone(up.rank), encode(n.instanceID))
			n.seq = append(slices.Clone(up.seq), encode(p.RunID), encode(p.AttemptID))
			return n, nil
		})
		if err != nil {
			return nil, fmt.Errorf("read iterations of foreach %s: %w", foreach, err)
		}
		level = next
	}
	return leaves(ctx, db, level, stepID, names)
}

// leaves reads the step's latest attempt in each iteration run.
func leaves(ctx context.Context, db *pgxpool.Pool, level []node, stepID string, names []string) ([]Iteration, error) {
	byRef := make(map[string]node, len(level))
	wfs, iids, runs := make([]string, 0, len(level)), make([]int64, 0, len(level)), make([]int64, 0, len(level))
	for _, n := range level {
		byRef[fmt.Sprintf("%s\x00%d", n.workflowID, n.instanceID)] = n
		wfs, iids, runs = append(wfs, n.workflowID), append(iids, n.instanceID), append(runs, n.runID)
	}
	rows, err := db.Query(ctx, leafAttemptsSQL, wfs, iids, stepID, runs)
	if err != nil {
		return nil, fmt.Errorf("read attempts of step %s: %w", stepID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Iteration, error) {
		it := Iteration{StepID: stepID}
		err := r.Scan(&it.WorkflowID, &it.InstanceID, &it.RunID, &it.AttemptID, &it.Status, &it.Timeline, &it.RuntimeState,
			&it.CreateTime, &it.StartTime, &it.EndTime, &it.ModifyTime)
		if err != nil {
			return it, err
		}
		n := byRef[fmt.Sprintf("%s\x00%d", it.WorkflowID, it.InstanceID)]
		it.Rank = strings.Join(n.rank, "-")
		it.AttemptSeq = strings.Join(append(slices.Clone(n.seq), encode(it.RunID), encode(it.AttemptID)), "-")
		it.LoopParams = loopParams(n.params, names)
		return it, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read attempts of step %s: %w", stepID, err)
	}
	slices.SortFunc(out, func(a, b Iteration) int { return strings.Compare(a.Rank, b.Rank) })
	return out, nil
}

// loopParams reads the loop params' values of an iteration run as text.
func loopParams(raw json.RawMessage, names []string) map[string]string {
	var vals map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(raw, &vals) != nil {
		return nil
	}
	out := map[string]string{}
	for _, name := range names {
		v, ok := vals[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(v.Value, &s) == nil {
			out[name] = s
		} else {
			out[name] = string(v.Value)
		}
	}
	return out
}

// encode prefixes a number with its length, as Maestro's iteration ids:
// one digit for lengths below 10, then A, B, ... so that ranks sort by
// number.
func encode(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) < 10 {
		return string(rune('0'+len(s))) + s
	}
	return string(rune('A'+len(s)-10)) + s
}

// RankOf turns an iteration id ("1-12", numbers joined by "-") into its
// rank ("11-212").
func RankOf(iterationID string) (string, error) {
	parts := strings.Split(iterationID, "-")
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("iteration id %q: %q is not an iteration number", iterationID, p)
		}
		parts[i] = encode(n)
	}
	return strings.Join(parts, "-"), nil
}

// Priority orders statuses for the representative iteration: the highest
// is shown (failures and pauses first), as Maestro's.
var Priority = map[string]int{
	"SUCCEEDED": 10, "UNSATISFIED": 20, "NOT_CREATED": 30, "DISABLED": 40, "SKIPPED": 50, "FINISHING": 60,
	"STARTING": 70, "INITIALIZED": 80, "CREATED": 90, "COMPLETED_WITH_ERROR": 100, "STOPPED": 110, "RUNNING": 120,
	"WAITING_FOR_PERMITS": 130, "EVALUATING_PARAMS": 140, "WAITING_FOR_SIGNALS": 150, "TIMED_OUT": 160,
	"INTERNALLY_FAILED": 170, "FATALLY_FAILED": 180, "PLATFORM_FAILED": 190, "USER_FAILED": 200, "TIMEOUT_FAILED": 201,
	"PAUSED": 210,
}
