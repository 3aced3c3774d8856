package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/run"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Foreach steps (docs/foreach.md).
//
// A foreach step runs its steps once per combination of its loop params'
// values, each iteration an inline run of its own: workflow id
// "<workflow>:<instance>:<step>" (one per foreach step and parent
// instance, shared by all runs of that instance), instance id = the
// iteration (1-based), run id = the foreach run that ran it. Iterations are
// created in batches, each batch in one transaction with the progress
// record on the step attempt, fenced by the parent's generation, so a
// repeated Execute after a crash carries on from the record and never
// creates an iteration twice. The attempt keeps only that record (a few
// numbers): what it needs on each wake-up it asks PostgreSQL through an
// index that holds only the live and unsuccessful iterations, so neither
// memory nor the cost of a wake-up grows with the iterations done.

const (
	// MaxForeachIterations bounds the iterations of one foreach step.
	MaxForeachIterations = 1_000_000
	// DefaultForeachConcurrency is how many iterations run at once when
	// the step sets no concurrency.
	DefaultForeachConcurrency = 20
	// foreachBatchLimit bounds the iterations created in one transaction.
	foreachBatchLimit = 100
	// maxForeachSlices bounds the transactions creating iterations of one
	// foreach step at once.
	maxForeachSlices = 4
)

// foreachPoll is how often a foreach step looks at its iterations when no
// iteration's end woke it; a variable so tests can change it.
var foreachPoll = 2 * time.Second

const foreachType = string(workflow.StepKindForeach)

// Config keys the step actor passes to the foreach runtime.
const (
	foreachStepsKey       = "steps"
	foreachConcurrencyKey = "concurrency"
	foreachStrictKey      = "strict_ordering"
	foreachFailureKey     = "failure_mode"
	// foreachTypesKey holds the declared type of each loop param.
	foreachTypesKey = "loop_param_types"
)

// Runtime data (the progress record) and output names of a foreach step.
const (
	foreachWorkflowKey = "foreach_workflow_id"
	foreachRunKey      = "foreach_run_id"
	foreachTotalKey    = "foreach_total"
	// foreachNextKey is the 0-based index of the next iteration to
	// consider for launching; every iteration before it was launched or
	// kept from an earlier run.
	foreachNextKey = "foreach_next"
	// foreachKeepKey marks an attempt that keeps the iterations whose
	// latest run succeeded (a restart) instead of running all of them.
	foreachKeepKey = "foreach_keep_succeeded"
	// foreachCountsKey holds the final count of the attempt's own
	// iteration runs by status.
	foreachCountsKey = "foreach_counts"
	// foreachIterationsOut is the output: how many iterations the loop
	// params define.
	foreachIterationsOut = "foreach_iterations"
)

// foreachRuntime runs foreach steps for one engine.
type foreachRuntime struct{ h *host }

// foreachConfig is what the step actor tells the runtime of a foreach step.
func foreachConfig(f *workflow.Foreach, kill bool) map[string]json.RawMessage {
	steps, _ := json.Marshal(f.Steps)
	conc := int64(DefaultForeachConcurrency)
	if f.Concurrency != nil {
		conc = *f.Concurrency
	}
	strict := f.StrictOrdering != nil && *f.StrictOrdering
	mode, _ := json.Marshal(f.EffectiveFailureMode())
	types := map[string]workflow.ParamType{}
	if lp, ok := f.Params[workflow.ParamLoopParams].MapValue(); ok {
		for name, p := range lp {
			types[name] = p.Type
		}
	}
	typesJSON, _ := json.Marshal(types)
	return map[string]json.RawMessage{
		foreachTypesKey:       typesJSON,
		foreachStepsKey:       steps,
		foreachConcurrencyKey: json.RawMessage(strconv.FormatInt(conc, 10)),
		foreachStrictKey:      json.RawMessage(strconv.FormatBool(strict)),
		foreachFailureKey:     mode,
		subworkflowKillKey:    json.RawMessage(strconv.FormatBool(kill)),
	}
}

// loopDim is one loop param: its name and its values.
type loopDim struct {
	name   string
	typ    workflow.ParamType
	values reflect.Value // a slice
}

// loopDims reads the evaluated loop_params of a foreach attempt, each as
// its declared array type, in name order, and the number of iterations
// they define: the product of the arrays' lengths (every combination runs
// once).
func loopDims(a *stepruntime.Attempt) ([]loopDim, int64, error) {
	var types map[string]workflow.ParamType
	_ = json.Unmarshal(a.Config[foreachTypesKey], &types)
	lp, ok := a.Params[workflow.ParamLoopParams].(map[string]any)
	if !ok {
		return nil, 0, fmt.Errorf("the %s param is missing or not a MAP", workflow.ParamLoopParams)
	}
	names := make([]string, 0, len(lp))
	for name := range lp {
		names = append(names, name)
	}
	slices.Sort(names)
	dims := make([]loopDim, 0, len(names))
	total := int64(1)
	for _, name := range names {
		val := lp[name]
		t, ok := types[name]
		if !ok || !t.IsArray() {
			var err error
			if t, err = params.Infer(val); err != nil {
				return nil, 0, fmt.Errorf("loop param %s: %w", name, err)
			}
		}
		if t.IsArray() {
			conv, err := params.Convert(t, val)
			if err != nil {
				return nil, 0, fmt.Errorf("loop param %s: %w", name, err)
			}
			val = conv
		}
		v := reflect.ValueOf(val)
		if v.Kind() != reflect.Slice {
			return nil, 0, fmt.Errorf("loop param %s is %T, want an array", name, lp[name])
		}
		dims = append(dims, loopDim{name: name, typ: t, values: v})
		total *= int64(v.Len())
		if total > MaxForeachIterations {
			return nil, 0, fmt.Errorf("the loop params define more than %d iterations", MaxForeachIterations)
		}
	}
	return dims, total, nil
}

// loopValues returns the loop params of iteration index (0-based): the first loop
// param varies fastest, as in Maestro.
func loopValues(dims []loopDim, index int64) map[string]workflow.Param {
	out := make(map[string]workflow.Param, len(dims))
	for _, d := range dims {
		n := int64(d.values.Len())
		v := d.values.Index(int(index % n)).Interface()
		index /= n
		if s, ok := v.(string); ok {
			v = strings.ReplaceAll(s, "$", "$$") // a value, not a template
		}
		t, _ := params.Infer(v)
		out[d.name] = workflow.LiteralParam(t, v)
	}
	return out
}

// foreachState is the progress record of a foreach attempt.
type foreachState struct {
	workflowID string
	run        int64
	total      int64
	next       int64
	keep       bool
}

func readForeachState(data map[string]any) (foreachState, bool) {
	id, _ := data[foreachWorkflowKey].(string)
	if id == "" {
		return foreachState{}, false
	}
	keep, _ := data[foreachKeepKey].(bool)
	return foreachState{
		workflowID: id, run: dataInt(data, foreachRunKey), total: dataInt(data, foreachTotalKey),
		next: dataInt(data, foreachNextKey), keep: keep,
	}, true
}

func (st foreachState) data() map[string]any {
	return map[string]any{
		foreachWorkflowKey: st.workflowID, foreachRunKey: st.run, foreachTotalKey: st.total,
		foreachNextKey: st.next, foreachKeepKey: st.keep,
	}
}

func (r *foreachRuntime) retryLater(a *stepruntime.Attempt, what string, err error) stepruntime.Result {
	r.h.Logger.Warn("foreach step: "+what, "workflow_id", a.WorkflowID, "instance_id", a.InstanceID,
		"run_id", a.RunID, "step_id", a.StepID, "error", err.Error())
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Second}
}

// Start decides the attempt's foreach run: its number (one more than any
// run of the iterations so far) and whether iterations that succeeded in
// an earlier run are kept (every run but a restart from the beginning).
// A repeated Start returns the record already made.
func (r *foreachRuntime) Start(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	if st, ok := readForeachState(a.Data); ok {
		return stepruntime.Result{State: stepruntime.Done, Data: st.data()}
	}
	_, total, err := loopDims(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: "foreach: " + err.Error()}
	}
	st := foreachState{workflowID: instance.ForeachWorkflowID(a.WorkflowID, a.InstanceID, a.StepID), total: total}
	var policy string
	err = r.h.DB.QueryRow(ctx, `
SELECT coalesce((SELECT max(run_id) FROM workflow_instance WHERE workflow_id = $1), 0) + 1,
    coalesce((SELECT run_config->>'policy' FROM workflow_instance
        WHERE workflow_id = $2 AND instance_id = $3 AND run_id = $4), '')`,
		st.workflowID, a.WorkflowID, a.InstanceID, a.RunID).Scan(&st.run, &policy)
	if err != nil {
		return r.retryLater(a, "read earlier iterations", err)
	}
	// A restart from the beginning runs every iteration again, but a
	// later attempt of the step in that run keeps what the first did.
	st.keep = st.run > 1 && (policy != "RESTART_FROM_BEGINNING" || a.AttemptID > 1)
	return stepruntime.Result{State: stepruntime.Done, Data: st.data(),
		Message: fmt.Sprintf("foreach of %d iterations (iteration run %d)", total, st.run)}
}

// Execute looks at the iterations of the attempt's run, launches more while
// the concurrency allows, and ends the step once all have ended.
func (r *foreachRuntime) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	st, ok := readForeachState(a.Data)
	if !ok {
		return stepruntime.Result{State: stepruntime.FatalError, Message: "foreach: the attempt has no progress record"}
	}
	pr, err := r.h.foreachProgress(ctx, st)
	if err != nil {
		return r.retryLater(a, "read iteration progress", err)
	}
	var mode workflow.FailureMode
	_ = json.Unmarshal(a.Config[foreachFailureKey], &mode)
	failed := pr.unsuccessful > 0 && mode != workflow.FailureModeIgnoreFailure
	if failed && pr.live > 0 {
		if mode == workflow.FailureModeFailImmediately {
			if err := r.h.stopIterations(ctx, a, st, false, "an iteration failed and the foreach fails immediately"); err != nil {
				return r.retryLater(a, "stop iterations", err)
			}
		}
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: foreachPoll}
	}
	if (failed || st.next >= st.total) && pr.live == 0 {
		return r.finish(ctx, a, st)
	}
	if failed || st.next >= st.total {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: foreachPoll}
	}
	var conc int64
	_ = json.Unmarshal(a.Config[foreachConcurrencyKey], &conc)
	busy := pr.live
	if configBool(a, foreachStrictKey, false) && pr.live > 0 {
		// Strict ordering: no iteration starts more than concurrency
		// places after the oldest one still running.
		busy = st.next - (pr.oldestLive - 1)
	}
	room := min(conc-busy, foreachBatchLimit*r.h.foreachSlices())
	// Launch in batches of at least a tenth of the concurrency while
	// iterations run: one transaction per ten iterations instead of one
	// each, for a concurrency that dips by at most a tenth.
	if room <= 0 || (pr.live > 0 && room < min(max(conc/10, 1), st.total-st.next)) {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: foreachPoll}
	}
	next, created, err := r.h.createIterations(ctx, r.h.NodeID, a, st, room)
	var fatal *childError
	switch {
	case errors.As(err, &fatal):
		return stepruntime.Result{State: stepruntime.FatalError, Message: fatal.msg}
	case err != nil:
		return r.retryLater(a, "create iterations", err)
	}
	st.next = next
	delay := foreachPoll
	if created == room && conc-busy > room {
		delay = time.Millisecond // more room than one batch: go on at once
	}
	if st.next >= st.total && created == 0 {
		delay = time.Millisecond // only kept iterations were left: finish
	}
	return stepruntime.Result{State: stepruntime.Continue, Data: st.data(), DataRecorded: true, NextPollDelay: delay}
}

// foreachSlices is how many transactions may create iterations of one
// foreach step at once: up to maxForeachSlices, half the pool's
// connections at most (the engine's writer and queue need theirs).
func (h *host) foreachSlices() int64 {
	return int64(max(1, min(maxForeachSlices, int(h.DB.Config().MaxConns)/2)))
}

// foreachSummary describes a finished foreach attempt that ran ran
// iterations itself: the iterations before st.next that it did not run
// were kept from earlier runs; those from st.next on were never launched
// (the loop ended early on a failure or a stop).
func foreachSummary(st foreachState, ran int64) string {
	summary := fmt.Sprintf("foreach of %d iterations", st.total)
	var notes []string
	if kept := min(st.next, st.total) - ran; st.keep && kept > 0 {
		notes = append(notes, fmt.Sprintf("%d kept from earlier runs", kept))
	}
	if left := st.total - st.next; left > 0 {
		notes = append(notes, fmt.Sprintf("%d not launched", left))
	}
	if len(notes) > 0 {
		summary += " (" + strings.Join(notes, ", ") + ")"
	}
	return summary
}

// finish ends the step from the final state of its iterations.
func (r *foreachRuntime) finish(ctx context.Context, a *stepruntime.Attempt, st foreachState) stepruntime.Result {
	counts, err := r.h.foreachCounts(ctx, st)
	if err != nil {
		return r.retryLater(a, "count iterations", err)
	}
	data := st.data()
	data[foreachCountsKey] = counts
	outputs := map[string]any{foreachIterationsOut: st.total}
	summary := foreachSummary(st, sumCounts(counts))
	res := stepruntime.Result{State: stepruntime.Done, Data: data, Outputs: outputs}
	switch {
	case counts[string(instance.WorkflowFailed)] > 0:
		res.State = stepruntime.FatalError
		res.Message = fmt.Sprintf("%s: %d iterations failed", summary, counts[string(instance.WorkflowFailed)])
	case counts[string(instance.WorkflowTimedOut)] > 0:
		res.State = stepruntime.TimedOut
		res.Message = fmt.Sprintf("%s: %d iterations timed out", summary, counts[string(instance.WorkflowTimedOut)])
	case counts[string(instance.WorkflowStopped)] > 0:
		res.State = stepruntime.Stopped
		res.Message = fmt.Sprintf("%s: %d iterations were stopped", summary, counts[string(instance.WorkflowStopped)])
	default:
		res.Message = summary + " succeeded"
	}
	return res
}

func sumCounts(c map[string]int64) int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Terminate stops (or kills) the live iterations of the attempt's run.
func (r *foreachRuntime) Terminate(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	st, ok := readForeachState(a.Data)
	if !ok {
		return stepruntime.Result{State: stepruntime.Stopped}
	}
	kill := configBool(a, subworkflowKillKey, false)
	if err := r.h.stopIterations(ctx, a, st, kill, ""); err != nil {
		return r.retryLater(a, "stop iterations", err)
	}
	return stepruntime.Result{State: stepruntime.Stopped, Message: "asked the live iterations to stop"}
}

// foreachProgress is what a wake-up needs to know about the iterations of
// one foreach run.
type foreachProgress struct {
	live         int64 // CREATED, IN_PROGRESS or PAUSED
	oldestLive   int64 // the lowest live iteration (1-based), 0 if none
	unsuccessful int64 // ended other than SUCCEEDED
}

// foreachProgressSQL reads only workflow_instance_unsucceeded_idx: the
// cost is the live and unsuccessful iterations, whatever the total.
const foreachProgressSQL = `
SELECT count(*) FILTER (WHERE status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')),
    coalesce(min(instance_id) FILTER (WHERE status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')), 0),
    count(*) FILTER (WHERE status IN ('FAILED', 'STOPPED', 'TIMED_OUT'))
FROM workflow_instance WHERE workflow_id = $1 AND run_id = $2 AND status <> 'SUCCEEDED'`

func (h *host) foreachProgress(ctx context.Context, st foreachState) (foreachProgress, error) {
	var p foreachProgress
	err := h.DB.QueryRow(ctx, foreachProgressSQL, st.workflowID, st.run).Scan(&p.live, &p.oldestLive, &p.unsuccessful)
	if err != nil {
		return p, fmt.Errorf("progress of %s run %d: %w", st.workflowID, st.run, err)
	}
	return p, nil
}

// foreachCounts counts the iterations of one foreach run by status, once,
// when the step ends.
func (h *host) foreachCounts(ctx context.Context, st foreachState) (map[string]int64, error) {
	rows, err := h.DB.Query(ctx, `SELECT status, count(*) FROM workflow_instance
        WHERE workflow_id = $1 AND run_id = $2 GROUP BY status`, st.workflowID, st.run)
	if err != nil {
		return nil, fmt.Errorf("count iterations of %s run %d: %w", st.workflowID, st.run, err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return nil, err
		}
		out[status] = n
	}
	return out, rows.Err()
}

// nextIterationsSQL finds, from iteration $2 (1-based) on, up to $4
// iterations whose latest run did not succeed (or that never ran), for an
// attempt that keeps succeeded iterations. Each candidate costs one probe
// of the primary key.
const nextIterationsSQL = `
SELECT g FROM generate_series($2::bigint, $3::bigint) AS g
WHERE (SELECT status FROM workflow_instance
       WHERE workflow_id = $1 AND instance_id = g ORDER BY run_id DESC LIMIT 1) IS DISTINCT FROM 'SUCCEEDED'
ORDER BY g LIMIT $4`

// iterationTimeout bounds one iteration run; the foreach step's own
// timeout, if any, stops the iterations earlier.
const iterationTimeout = int64(10 * 24 * time.Hour / time.Second)

// createIterations creates up to n iterations from st.next on and records
// the progress on the attempt. It returns the new next index and how many
// runs it created. Iterations in flow groups this node holds start here
// once their transaction has committed (local.go); the others get start
// messages.
//
// Up to foreachBatchLimit iterations are created in one transaction with
// the progress record, fenced by the parent's generation. More are split
// into slices of at most foreachBatchLimit (as even as they go) created by
// concurrent transactions, each fenced on its own. Their progress is
// recorded once all have committed, but not on its own while iterations
// are left to create: the first slice of the next call records the
// progress it starts from (everything before st.next has committed), so
// no transaction of its own stands between one call's slices and the
// next's; the call that reaches the last iteration records its progress
// itself. A crash, a failed slice or a call that creates nothing in
// between leaves iterations past the durable record, which the next
// Execute skips (their primary key makes the insert a no-op) while the
// progress query counts them live.
func (h *host) createIterations(ctx context.Context, node string, a *stepruntime.Attempt, st foreachState, n int64) (int64, int64, error) {
	dims, _, err := loopDims(a)
	if err != nil {
		return 0, 0, &childError{msg: "foreach: " + err.Error()}
	}
	var steps []workflow.StepNode
	if err := json.Unmarshal(a.Config[foreachStepsKey], &steps); err != nil {
		return 0, 0, &childError{msg: "decode foreach steps: " + err.Error()}
	}
	inline := workflow.Workflow{ID: st.workflowID, Steps: steps}
	def, err := json.Marshal(inline)
	if err != nil {
		return 0, 0, &childError{msg: "encode iteration definition: " + err.Error()}
	}
	parent := run.Parent{Ref: run.Ref{WorkflowID: a.WorkflowID, InstanceID: a.InstanceID, RunID: a.RunID}, StepID: a.StepID, AttemptID: a.AttemptID}
	spec := batchSpec{st: st, dims: dims, def: def, inline: &inline, parent: parent, traceContext: tracing.Traceparent(ctx)}
	iters, err := h.pickIterations(ctx, st, n)
	if err != nil {
		return 0, 0, err
	}
	next := st.total
	if int64(len(iters)) == n {
		next = iters[len(iters)-1] // 1-based last launched = 0-based next
	}
	progress := st
	progress.next = next
	if len(iters) <= foreachBatchLimit {
		made, err := h.createSlice(ctx, node, a, spec, iters, &progress)
		if err != nil {
			return 0, 0, err
		}
		h.startLocal(ctx, made.started)
		return next, made.created, nil
	}
	parts := evenSlices(iters, foreachBatchLimit)
	made := make([]sliceMade, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		var record *foreachState
		if i == 0 {
			record = &st // what this call starts from, committed
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			made[i], errs[i] = h.createSlice(ctx, node, a, spec, part, record)
			// Committed: its iterations start now, whatever the other
			// slices do, rather than wait for the slowest.
			h.startLocal(ctx, made[i].started)
		}()
	}
	wg.Wait()
	var created int64
	for _, m := range made {
		created += m.created
	}
	for _, err := range errs {
		var fatal *childError
		if errors.As(err, &fatal) {
			return 0, 0, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	if next < st.total {
		return next, created, nil // recorded by the next call's first slice
	}
	if err := h.recordProgress(ctx, node, parent, progress); err != nil {
		return 0, 0, err
	}
	return next, created, nil
}

// evenSlices splits iters into the fewest slices of at most limit, their
// sizes differing by at most one: concurrent slices take about as long.
func evenSlices(iters []int64, limit int) [][]int64 {
	k := (len(iters) + limit - 1) / limit
	out := make([][]int64, 0, k)
	for i := range k {
		out = append(out, iters[i*len(iters)/k:(i+1)*len(iters)/k])
	}
	return out
}

// sliceMade is what one transaction of createIterations created.
type sliceMade struct {
	created int64
	started []StartedRun
}

func (h *host) startLocal(ctx context.Context, started []StartedRun) {
	if len(started) > 0 {
		h.Local.Run(ctx, started)
	}
}

// createSlice creates the runs of iterations iters in one transaction
// fenced by the parent's generation, with the progress record when
// record is set.
func (h *host) createSlice(ctx context.Context, node string, a *stepruntime.Attempt, spec batchSpec, iters []int64, record *foreachState) (sliceMade, error) {
	var made sliceMade
	err := pgx.BeginFunc(ctx, h.DB, func(tx pgx.Tx) error {
		made = sliceMade{}
		// Lock order: workflow row, then instance rows (docs/run-control.md).
		// Shared: sibling foreach steps and slices launch at once, a delete waits.
		root := instance.RootWorkflowID(a.WorkflowID)
		var from batchInputs
		if err := tx.QueryRow(ctx, `SELECT owner FROM workflow WHERE workflow_id = $1 FOR SHARE`, root).Scan(&from.owner); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return &childError{msg: fmt.Sprintf("workflow %s does not exist", root)}
			}
			return err
		}
		fp, err := fenceParent(ctx, tx, spec.parent, node)
		if err != nil {
			return err
		}
		from.fp = fp
		if fp.depth+1 > MaxSubworkflowDepth {
			return &childError{msg: fmt.Sprintf("nesting limit %d exceeded: the iterations of %s would run at depth %d",
				MaxSubworkflowDepth, spec.st.workflowID, fp.depth+1)}
		}
		if len(iters) > 0 {
			b, err := h.buildBatch(ctx, spec, from, iters)
			if err != nil {
				return err
			}
			pickedUp, _ := json.Marshal(flowstore.PickedUp(node))
			created, err := run.Create(ctx, tx, b.runs, run.Options{Node: node, PickedUp: pickedUp, SkipExisting: true})
			if err != nil {
				return fmt.Errorf("insert iterations: %w", err)
			}
			for i, c := range created {
				if !c.Inserted {
					continue
				}
				made.created++
				if c.Status == instance.WorkflowInProgress {
					made.started = append(made.started, b.started(i, c))
				}
			}
		}
		if record == nil {
			return nil
		}
		raw, _ := json.Marshal(record.data())
		_, err = tx.Exec(ctx, recordChildSQL, a.WorkflowID, a.InstanceID, a.RunID, a.StepID, a.AttemptID, raw)
		return err
	})
	if err != nil {
		return sliceMade{}, err
	}
	return made, nil
}

// recordProgress records the progress of a foreach attempt, fenced by the
// parent's generation.
func (h *host) recordProgress(ctx context.Context, node string, p run.Parent, st foreachState) error {
	return pgx.BeginFunc(ctx, h.DB, func(tx pgx.Tx) error {
		if _, err := fenceParent(ctx, tx, p, node); err != nil {
			return err
		}
		raw, _ := json.Marshal(st.data())
		_, err := tx.Exec(ctx, recordChildSQL, p.WorkflowID, p.InstanceID, p.RunID, p.StepID, p.AttemptID, raw)
		return err
	})
}

// nextIterations returns the next up to n iterations (1-based) of an
// attempt that runs every iteration (one that keeps none from earlier
// runs).
func nextIterations(st foreachState, n int64) []int64 {
	out := make([]int64, 0, max(min(n, st.total-st.next), 0))
	for it := st.next + 1; it <= st.total && int64(len(out)) < n; it++ {
		out = append(out, it)
	}
	return out
}

// pickIterations returns the next up to n iterations (1-based) to launch.
// For an attempt that keeps succeeded iterations it reads which did not
// succeed; one of them created meanwhile (by this attempt, before a crash)
// is skipped by the insert.
func (h *host) pickIterations(ctx context.Context, st foreachState, n int64) ([]int64, error) {
	if !st.keep {
		return nextIterations(st, n), nil
	}
	rows, err := h.DB.Query(ctx, nextIterationsSQL, st.workflowID, st.next+1, st.total, n)
	if err != nil {
		return nil, fmt.Errorf("find iterations to run again: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// scanIterations reads (iteration, group) rows of a foreach run into one
// queue message per iteration and the groups they target.
func scanIterations[M any](rows pgx.Rows, st foreachState, msg func(run.Ref, int32) M) ([]int32, []M, error) {
	defer rows.Close()
	var groups []int32
	var msgs []M
	for rows.Next() {
		var id int64
		var g int32
		if err := rows.Scan(&id, &g); err != nil {
			return nil, nil, err
		}
		groups = append(groups, g)
		msgs = append(msgs, msg(run.Ref{WorkflowID: st.workflowID, InstanceID: id, RunID: st.run}, g))
	}
	return groups, msgs, rows.Err()
}

// liveIterationsSQL lists the live iterations of a foreach run (at most
// its concurrency) through workflow_instance_unsucceeded_idx.
const liveIterationsSQL = `
SELECT instance_id, group_id FROM workflow_instance
WHERE workflow_id = $1 AND run_id = $2 AND status <> 'SUCCEEDED' AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')`

// stopIterations asks the owners of the live iterations of a foreach run
// to stop (or kill) them, in one transaction.
func (h *host) stopIterations(ctx context.Context, a *stepruntime.Attempt, st foreachState, kill bool, reason string) error {
	action, verb := run.ActionStop, "stopped"
	if kill {
		action, verb = run.ActionKill, "killed"
	}
	if reason == "" {
		reason = fmt.Sprintf("foreach step %s of %s/%d/%d was %s", a.StepID, a.WorkflowID, a.InstanceID, a.RunID, verb)
	}
	return pgx.BeginFunc(ctx, h.DB, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, liveIterationsSQL, st.workflowID, st.run)
		if err != nil {
			return err
		}
		groups, msgs, err := scanIterations(rows, st, func(ref run.Ref, g int32) run.ActionMessage {
			return run.ActionMessage{Ref: ref, Group: g, Action: action, Reason: reason}
		})
		if err != nil {
			return err
		}
		return queue.EnqueueBatch(ctx, tx, queue.InstanceAction, groups, msgs)
	})
}
