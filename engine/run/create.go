package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Create is where every run is born: a start, a batch of starts (time and
// signal triggers), a restart, a subworkflow's child and a foreach step's
// iterations all come through it. In the caller's transaction it
//
//   - deduplicates by request id: a run whose request id a stored run or an
//     earlier run of the call has is not created (Duplicated); a concurrent
//     start with the same request id that commits first makes the INSERT
//     fail with a unique violation (IsDuplicate), which the caller answers
//     as a duplicate,
//   - locks the workflows it admits under their run strategy or allocates
//     instance ids for (in id order; Options.Props names those the caller
//     has locked already) and allocates the ids: one UPDATE for a single
//     workflow, the common start, so the lock is held from the statement
//     that allocates,
//   - admits each run under its workflow's run strategy (PrepareStarts,
//     Rooms): dropped (FIRST_ONLY), queued, or admitted; LAST_ONLY stops
//     the runs it supersedes,
//   - inserts the runs with one INSERT INTO workflow_instance, their events
//     (a dropped run ends as it is created) and the start messages of the
//     admitted ones.
//
// Runs under FIRST_ONLY and LAST_ONLY are admitted in rounds, the r-th
// run of each such workflow in round r, so that a workflow's second run
// sees its first; a round is one INSERT. Runs under the other strategies
// (SEQUENTIAL, STRICT_SEQUENTIAL, PARALLEL: a limit on live runs) share
// one round however many of them a workflow has: the INSERT admits the
// k-th of them as if the k before it were there (insertRunsSQL). A single
// start, a restart, a child, a foreach batch, a batch of distinct
// workflows and a backfill's batch are one round.
//
// A run with Local set (a foreach iteration whose flow group this node
// holds, composite/local.go) is created IN_PROGRESS under the group's
// generation when the group is still held then, and gets no start message:
// the caller starts its flow once tx has committed.
//
// After the commit, the caller calls AdmitAfterCommit with the result.

// Admission says how a new run is admitted.
type Admission uint8

const (
	// ByStrategy admits the run under its workflow's run strategy, as a
	// start: the run may be dropped, queued or admitted at once.
	ByStrategy Admission = iota
	// Always admits the run at once: an inline run (a while or foreach
	// iteration) or a subworkflow run inside a run of its own workflow.
	Always
)

// New is a run to create.
type New struct {
	// Ref names the run. InstanceID 0 allocates the workflow's next
	// instance id; RunID 0 means 1.
	Ref     Ref
	Version int64
	// RequestID makes the start idempotent (run 1 only); empty for none.
	RequestID string
	// Check, when set, runs once the run is known not to be a duplicate
	// and may fill in the run (its params, say); an error leaves the run
	// out (Created.Err) and the others go on.
	Check func(*New) error
	// UUID is the run's uuid; "" picks a new one.
	UUID string
	// Definition is the run's workflow JSON; nil copies the definition of
	// the version from workflow_version. Runs that share one slice send it
	// once.
	Definition []byte
	// Workflow is the decoded definition, for the event of a dropped run;
	// nil decodes Definition (or names only the workflow).
	Workflow  *workflow.Workflow
	RunParams []byte
	// RunParamsBase, when set, is a JSON object of run params that
	// RunParams extends (no name in both; RunParams wins): the stored run
	// params are both objects' members. Runs that share one slice (a
	// foreach batch's inherited params) send and parse it once.
	RunParamsBase []byte
	// Initiator is the JSON of the initiator column.
	Initiator []byte
	// Timeline is the run's first timeline events (its CREATED event);
	// Create appends the admission's (dropped, queued).
	Timeline       []instance.TimelineEvent
	TimeoutSeconds int64
	// RunConfig is the JSON of run_config; nil is a start's.
	RunConfig  []byte
	GroupCount int32
	// Parent and ParentKey identify the step attempt that created a child
	// run (nil and "" for a root run); Depth is its nesting depth.
	Parent    []byte
	ParentKey string
	Depth     int
	// Correlation is the root run's correlation id; "" for a root run.
	Correlation string
	Admission   Admission
	// Local, when set, creates the run IN_PROGRESS on this node.
	Local *Local
}

// Local is what a run started on this node is created with.
type Local struct {
	// Generation is the one under which the node holds the run's group.
	Generation int64
	// Params are the run's evaluated params (JSON); Event its CREATED ->
	// IN_PROGRESS event, nil for none.
	Params []byte
	Event  []byte
	// ParamsBase, when set, is a JSON object of params that Params
	// extends, as New.RunParamsBase is for the run params.
	ParamsBase []byte
}

// Options are a Create call's settings.
type Options struct {
	// Props are the properties of the workflows the caller has locked
	// (LockWorkflow) already.
	Props map[string][]byte
	// Node is the engine node that creates runs with Local set; PickedUp
	// the timeline events it appends to them.
	Node     string
	PickedUp []byte
	// SkipExisting leaves out runs whose row exists already (a foreach
	// batch created again after a crash) instead of failing.
	SkipExisting bool
	// Deduplicated: the caller has looked for stored runs with the runs'
	// request ids in tx (LockForStart, FindStarted) and found none; Create
	// does not look again (it still finds repeats within the call).
	Deduplicated bool
}

// Created is what became of one run of a Create call.
type Created struct {
	Ref     Ref
	UUID    string
	GroupID int32
	// Status is CREATED, STOPPED (dropped by the run strategy) or
	// IN_PROGRESS (started on this node); for a duplicate, the first
	// run's.
	Status instance.WorkflowStatus
	// Queued: the run waits for its run strategy to admit it.
	Queued     bool
	Duplicated bool
	// Inserted is false for a duplicate and for a run SkipExisting left
	// out.
	Inserted  bool
	StartTime *time.Time
	// Err is what the run's Check returned.
	Err error
}

// Create creates runs; see the comment above.
func Create(ctx context.Context, tx Tx, runs []New, opt Options) ([]Created, error) {
	out := make([]Created, len(runs))
	for i := range runs {
		if runs[i].Ref.RunID == 0 {
			runs[i].Ref.RunID = 1
		}
		out[i].Ref = runs[i].Ref
	}
	fresh, err := dedup(ctx, tx, runs, out, opt.Deduplicated)
	if err != nil {
		return nil, err
	}
	props, err := lockAndAllocate(ctx, tx, runs, fresh, opt.Props, out)
	if err != nil {
		return nil, err
	}
	for _, round := range rounds(runs, fresh, props) {
		if err := createRound(ctx, tx, runs, round, props, opt, out); err != nil {
			return nil, err
		}
	}
	// Duplicates of runs of this call take their run's result.
	for i := range out {
		if out[i].Duplicated && out[i].Status == "" {
			first := out[out[i].GroupID]
			out[i] = Created{Ref: first.Ref, UUID: first.UUID, GroupID: first.GroupID, Status: first.Status,
				Queued: first.Queued, Duplicated: true}
		}
	}
	return out, nil
}

// AdmitAfterCommit runs admission again, once the creating transaction has
// committed, for each workflow one of whose new runs was queued: the
// creation counted the admitted runs under the workflow lock, but a run
// ending at that moment does not take the lock; if it still counted as
// active then, this admission sees it ended (docs/run-control.md). An
// error is left to the engine's admission sweep.
func AdmitAfterCommit(ctx context.Context, db Beginner, created []Created) {
	seen := map[string]bool{}
	for _, c := range created {
		if c.Queued && c.Inserted && !seen[c.Ref.WorkflowID] {
			seen[c.Ref.WorkflowID] = true
			_, _ = AdmitWorkflow(ctx, db, c.Ref.WorkflowID, false)
		}
	}
}

// lockAndAllocate locks the workflows whose fresh runs need their lock
// (admission under a strategy, or an instance id to allocate) and that the
// caller has not locked, gives the runs without an instance id the next
// ids of their workflows, in order, and returns every known workflow's
// properties. A single workflow to lock and allocate for is one UPDATE;
// several are locked in id order (so that creations of overlapping
// workflows cannot deadlock) and then allocated for with one UPDATE.
func lockAndAllocate(ctx context.Context, tx Tx, runs []New, fresh []int, have map[string][]byte, out []Created) (map[string][]byte, error) {
	props := make(map[string][]byte, len(have))
	for id, p := range have {
		props[id] = p
	}
	need := map[string][]int{} // the runs each workflow allocates ids for
	var lock, order []string
	for _, i := range fresh {
		r := runs[i]
		id := r.Ref.WorkflowID
		if r.Admission == ByStrategy || r.Ref.InstanceID == 0 {
			if _, ok := props[id]; !ok && !slices.Contains(lock, id) {
				lock = append(lock, id)
			}
		}
		if r.Ref.InstanceID == 0 {
			if _, ok := need[id]; !ok {
				order = append(order, id)
			}
			need[id] = append(need[id], i)
		}
	}
	if len(lock) == 1 && len(order) == 1 && lock[0] == order[0] {
		// The common start: lock, allocate and read the properties at once.
		id := lock[0]
		var p []byte
		var last int64
		err := tx.QueryRow(ctx, lockAllocateOneSQL, id, len(need[id])).Scan(&p, &last)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("workflow %s: %w", id, ErrWorkflowGone)
		}
		if err != nil {
			return nil, fmt.Errorf("allocate instance ids of %s: %w", id, err)
		}
		props[id] = p
		assignIDs(runs, need[id], last, out)
		return props, nil
	}
	if err := lockWorkflows(ctx, tx, lock, props); err != nil {
		return nil, err
	}
	if err := allocate(ctx, tx, runs, need, order, out); err != nil {
		return nil, err
	}
	return props, nil
}

// lockWorkflows locks the workflows ids in id order and reads their
// properties into props.
func lockWorkflows(ctx context.Context, tx Tx, ids []string, props map[string][]byte) error {
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	rows, err := tx.Query(ctx, lockWorkflowsSQL, ids)
	if err != nil {
		return fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			return fmt.Errorf("lock %d workflows: %w", len(ids), err)
		}
		props[id] = p
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	for _, id := range ids {
		if _, ok := props[id]; !ok {
			return fmt.Errorf("workflow %s: %w", id, ErrWorkflowGone)
		}
	}
	return nil
}

// dedup marks the runs whose request id a stored run, or an earlier run of
// the call, has already; it returns the others, in order. With looked set
// the caller has looked for stored runs already. A duplicate of
// an earlier run of the call keeps that run's index in GroupID until the
// run is created (Create resolves it).
func dedup(ctx context.Context, tx Tx, runs []New, out []Created, looked bool) ([]int, error) {
	type key = StartKey
	var ids, rids []string
	for _, r := range runs {
		if r.RequestID != "" && r.Ref.RunID == 1 && !looked {
			ids, rids = append(ids, r.Ref.WorkflowID), append(rids, r.RequestID)
		}
	}
	stored, err := FindStarted(ctx, tx, ids, rids)
	if err != nil {
		return nil, err
	}
	earlier := map[key]int{}
	fresh := make([]int, 0, len(runs))
	for i := range runs {
		r := &runs[i]
		if r.RequestID != "" && r.Ref.RunID == 1 {
			k := key{r.Ref.WorkflowID, r.RequestID}
			if c, ok := stored[k]; ok {
				out[i] = c
				continue
			}
			if j, ok := earlier[k]; ok {
				out[i] = Created{Duplicated: true, GroupID: int32(j)}
				continue
			}
		}
		if r.Check != nil {
			if err := r.Check(&runs[i]); err != nil {
				out[i].Err = err
				continue
			}
		}
		if r.RequestID != "" && r.Ref.RunID == 1 {
			earlier[key{r.Ref.WorkflowID, r.RequestID}] = i
		}
		fresh = append(fresh, i)
	}
	return fresh, nil
}

// allocate gives the runs need names for each workflow of order the next
// ids of that workflow, in order, with one UPDATE.
func allocate(ctx context.Context, tx Tx, runs []New, need map[string][]int, order []string, out []Created) error {
	if len(order) == 0 {
		return nil
	}
	counts := make([]int64, len(order))
	for k, id := range order {
		counts[k] = int64(len(need[id]))
	}
	rows, err := tx.Query(ctx, allocateSQL, order, counts)
	if err != nil {
		return fmt.Errorf("allocate instance ids: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var last int64
		if err := rows.Scan(&id, &last); err != nil {
			return fmt.Errorf("allocate instance ids: %w", err)
		}
		assignIDs(runs, need[id], last, out)
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("allocate instance ids: %w", err)
	}
	if n != len(order) {
		return fmt.Errorf("allocate instance ids: %d of %d workflows: %w", n, len(order), ErrWorkflowGone)
	}
	return nil
}

// assignIDs numbers the runs idx up to last, the workflow's latest
// instance id after the allocation.
func assignIDs(runs []New, idx []int, last int64, out []Created) {
	for k, i := range idx {
		runs[i].Ref.InstanceID = last - int64(len(idx)-1-k)
		out[i].Ref = runs[i].Ref
	}
}

// rounds splits the runs to create so that no round holds two runs of one
// workflow under FIRST_ONLY or LAST_ONLY; every other run goes in the
// first.
func rounds(runs []New, fresh []int, props map[string][]byte) [][]int {
	var out [][]int
	seen := map[string]int{}
	byRound := map[string]bool{}
	for _, i := range fresh {
		r := 0
		if id := runs[i].Ref.WorkflowID; runs[i].Admission == ByStrategy {
			one, ok := byRound[id]
			if !ok {
				rule := ParseStrategy(props[id]).Rule
				one = rule == workflow.RunStrategyFirstOnly || rule == workflow.RunStrategyLastOnly
				byRound[id] = one
			}
			if one {
				r = seen[id]
				seen[id] = r + 1
			}
		}
		for len(out) <= r {
			out = append(out, nil)
		}
		out[r] = append(out[r], i)
	}
	return out
}

// admission is what a round's run strategies decided before its INSERT:
// the strategy of each workflow admitted under one, and the drop reason
// of those whose new run FIRST_ONLY drops. Whether a run has room (is
// admitted at once or queued) is decided by the INSERT itself, in the same
// statement (insertRunsSQL), under the workflow locks the call holds.
type admission struct {
	strategies map[string]Strategy
	drops      map[string]string
}

// admit applies PrepareStarts for the workflows of a round admitted under
// their strategy (a FIRST_ONLY or LAST_ONLY workflow has one run in a
// round; PrepareStarts does nothing for the others).
func admit(ctx context.Context, tx Tx, runs []New, round []int, props map[string][]byte) (admission, error) {
	a := admission{strategies: map[string]Strategy{}}
	for _, i := range round {
		if runs[i].Admission == ByStrategy {
			id := runs[i].Ref.WorkflowID
			a.strategies[id] = ParseStrategy(props[id])
		}
	}
	if len(a.strategies) == 0 {
		return a, nil
	}
	var err error
	a.drops, err = PrepareStarts(ctx, tx, a.strategies)
	return a, err
}

// droppedEvent is the CREATED -> STOPPED event of a run its strategy
// dropped: it is an event like any other (docs/events.md).
func droppedEvent(r *New, c Created) event.Record {
	correlation := r.Correlation
	if correlation == "" {
		correlation = RootCorrelation(c.Ref)
	}
	if r.Workflow != nil {
		return DroppedRunEventOf(c.Ref, r.Workflow, c.UUID, r.Depth, correlation, BackfillOf(r.Initiator))
	}
	return DroppedRunEvent(c.Ref, r.Definition, c.UUID, r.Depth, correlation, BackfillOf(r.Initiator))
}

// columns are a round's runs as the INSERT's arrays.
type columns struct {
	defs                                 [][]byte
	workflowIDs                          []string
	instanceIDs, runIDs, versions, gens  []int64
	timeouts                             []int64
	groups, groupCounts, defIdx, depths  []int32
	uuids                                [][16]byte    // not uuid.UUID: pgx encodes it through driver.Valuer, as text
	requestIDs, parentKeys, correlations []pgtype.Text // binary, where []*string goes through reflection
	statuses                             []string
	runParams, initiators, timelines     [][]byte
	params, runConfigs, parents, events  [][]byte
	queuedEvents                         [][]byte
	// bases are the JSON objects runs' run params and params extend and
	// the timelines runs share, sent once each; rpBase, pBase and tlBase
	// each run's (1-based, 0: none).
	bases                 [][]byte
	rpBase, pBase, tlBase []int32
	baseIdx               map[*byte]int32
	// limits is each run's admission check: NULL admits it
	// at once, else its workflow's concurrency; stricts its strictness.
	limits   []pgtype.Int8
	stricts  []bool
	anyLocal bool
}

func (c *columns) init(n int) {
	c.workflowIDs = make([]string, 0, n)
	c.instanceIDs, c.runIDs, c.versions, c.gens = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	c.timeouts = make([]int64, 0, n)
	c.groups, c.groupCounts, c.defIdx, c.depths = make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	c.uuids = make([][16]byte, 0, n)
	c.requestIDs, c.parentKeys, c.correlations = make([]pgtype.Text, 0, n), make([]pgtype.Text, 0, n), make([]pgtype.Text, 0, n)
	c.statuses = make([]string, 0, n)
	c.runParams, c.initiators, c.timelines = make([][]byte, 0, n), make([][]byte, 0, n), make([][]byte, 0, n)
	c.params, c.runConfigs, c.parents, c.events = make([][]byte, 0, n), make([][]byte, 0, n), make([][]byte, 0, n), make([][]byte, 0, n)
	c.limits, c.stricts, c.queuedEvents = make([]pgtype.Int8, 0, n), make([]bool, 0, n), make([][]byte, 0, n)
	c.rpBase, c.pBase = make([]int32, 0, n), make([]int32, 0, n)
	c.tlBase = make([]int32, n) // 0: each run's own timeline (shareTimelines)
}

// base is the 1-based index of JSON value b in c.bases, added on its
// first use (runs that share one slice share its entry); 0 for none.
func (c *columns) base(b []byte) int32 {
	if len(b) == 0 {
		return 0
	}
	if i, ok := c.baseIdx[&b[0]]; ok {
		return i
	}
	if c.baseIdx == nil {
		c.baseIdx = make(map[*byte]int32)
	}
	c.bases = append(c.bases, b)
	i := int32(len(c.bases))
	c.baseIdx[&b[0]] = i
	return i
}

// add appends run r, its result res (ref, group, status), its uuid id,
// its definition's index (0: its version's), its timeline's JSON and its
// admission check: limit (noLimit admits it at once, else its workflow's
// concurrency), strict and the event a queued run gets.
func (c *columns) add(r *New, res *Created, id [16]byte, def int32, timeline []byte, limit int64, strict bool, queuedEvent []byte) {
	lim := pgtype.Int8{Int64: limit, Valid: limit != noLimit}
	c.limits, c.stricts, c.queuedEvents = append(c.limits, lim), append(c.stricts, strict), append(c.queuedEvents, queuedEvent)
	cfg := r.RunConfig // nil: a start's ({"policy": "START"}, insertRunsSQL)
	runParams := r.RunParams
	if runParams == nil {
		runParams = []byte(`{}`)
	}
	initiator := r.Initiator
	if initiator == nil {
		initiator = []byte(`{}`)
	}
	var gen int64
	var params, ev []byte
	var pBase int32
	if r.Local != nil {
		gen, params, ev = r.Local.Generation, r.Local.Params, r.Local.Event
		pBase = c.base(r.Local.ParamsBase)
		c.anyLocal = true
	}
	c.rpBase, c.pBase = append(c.rpBase, c.base(r.RunParamsBase)), append(c.pBase, pBase)
	c.workflowIDs = append(c.workflowIDs, res.Ref.WorkflowID)
	c.instanceIDs, c.runIDs, c.versions = append(c.instanceIDs, res.Ref.InstanceID), append(c.runIDs, res.Ref.RunID), append(c.versions, r.Version)
	c.groups, c.uuids, c.requestIDs = append(c.groups, res.GroupID), append(c.uuids, id), append(c.requestIDs, textOrNull(r.RequestID))
	c.groupCounts, c.statuses, c.defIdx = append(c.groupCounts, r.GroupCount), append(c.statuses, string(res.Status)), append(c.defIdx, def)
	c.runParams, c.initiators, c.timelines = append(c.runParams, runParams), append(c.initiators, initiator), append(c.timelines, timeline)
	c.timeouts, c.gens = append(c.timeouts, r.TimeoutSeconds), append(c.gens, gen)
	c.params, c.runConfigs, c.parents = append(c.params, params), append(c.runConfigs, cfg), append(c.parents, r.Parent)
	c.parentKeys, c.depths, c.correlations = append(c.parentKeys, textOrNull(r.ParentKey)), append(c.depths, int32(r.Depth)), append(c.correlations, textOrNull(r.Correlation))
	c.events = append(c.events, ev)
}

// textOrNull is s, NULL when empty.
func textOrNull(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

// IsDuplicate reports a unique violation on insert: a run with the same
// request id that a concurrent transaction committed first.
func IsDuplicate(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "23505"
}
