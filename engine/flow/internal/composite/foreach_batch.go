package composite

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// batchSpec is what every batch of one foreach call is built from.
type batchSpec struct {
	st     foreachState
	dims   []loopDim
	def    []byte
	inline *workflow.Workflow
	parent run.Parent
	// traceContext is the foreach step call's traceparent.
	traceContext string
}

// batchInputs is what a batch is built from that the transaction creating
// it reads under its locks: the owner of the parent's workflow and the
// fenced parent.
type batchInputs struct {
	owner string
	fp    fencedParent
}

// buildBatch builds the runs of iterations iters (1-based) from spec and
// from, with the params of those this node will start evaluated.
func (h *host) buildBatch(ctx context.Context, spec batchSpec, from batchInputs, iters []int64) (*iterationBatch, error) {
	base, err := inheritedParams(spec.inline, from.fp.wfParams, from.fp.stepParams, false)
	if err != nil {
		return nil, &childError{msg: "iteration params: " + err.Error()}
	}
	parent := spec.parent
	parent.Group = from.fp.group
	b := &iterationBatch{def: spec.def, correlation: from.fp.correlation, depth: from.fp.depth + 1,
		groupCount: from.fp.groupCount, traceContext: spec.traceContext,
		runs: make([]run.New, 0, len(iters)), own: make([]workflow.Params, 0, len(iters)),
		values: make([]params.Values, 0, len(iters)), base: base}
	// The params every iteration varies: its loop params and loop_index.
	// The others, inherited, are encoded once for the batch.
	varying := make([]string, 0, len(spec.dims)+1)
	for _, d := range spec.dims {
		varying = append(varying, d.name)
	}
	varying = append(varying, workflow.ParamLoopIndex)
	shared := maps.Clone(base)
	for _, name := range varying {
		delete(shared, name)
	}
	if b.sharedJSON, err = json.Marshal(shared); err != nil {
		return nil, &childError{msg: "iteration params: " + err.Error()}
	}
	for _, it := range iters {
		if err := b.add(spec.st, parent, base, loopValues(spec.dims, it-1), it); err != nil {
			return nil, err
		}
	}
	if h.Local != nil {
		b.prepareLocal(ctx, h.Local, from.owner, varying)
	}
	return b, nil
}

// iterationBatch is the iteration runs of one batch.
type iterationBatch struct {
	def         []byte
	correlation string
	depth       int
	groupCount  int32
	runs        []run.New
	// base are the run params the runs inherit, own each run's loop
	// params and loop_index, which replace those of the same name; values
	// the evaluated params of the runs to start on this node.
	base   workflow.Params
	own    []workflow.Params
	values []params.Values
	// traceContext is the traceparent run.Create stores on the runs (the
	// foreach step's call): their flows continue it.
	traceContext string
	// sharedJSON is the JSON object of the run params the iterations share
	// (the inherited ones but those a loop param or loop_index replaces).
	sharedJSON []byte
}

// foreachInitiator is an iteration's initiator: its JSON is that of the
// map {"type": "FOREACH", "parent": ...} (keys in name order).
type foreachInitiator struct {
	Parent run.Parent `json:"parent"`
	Type   string     `json:"type"`
}

func (b *iterationBatch) add(st foreachState, p run.Parent, base workflow.Params, loop map[string]workflow.Param, it int64) error {
	own := make(workflow.Params, len(loop)+1)
	maps.Copy(own, loop)
	own[workflow.ParamLoopIndex] = workflow.LiteralParam(workflow.ParamTypeLong, it-1)
	ownJSON, err := json.Marshal(own)
	if err != nil {
		return &childError{msg: fmt.Sprintf("params of iteration %d: %v", it, err)}
	}
	// The run params are the shared object's members and the iteration's
	// own (loop_index at least; no name is in both), joined by the
	// insert: the shared object, one slice for the batch, is sent and
	// parsed once (run.New.RunParamsBase).
	var shared []byte
	if len(b.sharedJSON) > 2 {
		shared = b.sharedJSON
	}
	// "/f": a foreach iteration, which the rollup finds through the
	// iterations' workflow id rather than the attempt (docs/rollup.md).
	parentKey := fmt.Sprintf("%s/f%d", p.Key(), it)
	p.Iteration = it
	parent, _ := json.Marshal(p)
	initiator, _ := json.Marshal(foreachInitiator{Parent: p, Type: "FOREACH"})
	b.runs = append(b.runs, run.New{
		Ref: run.Ref{WorkflowID: st.workflowID, InstanceID: it, RunID: st.run}, UUID: uuid.NewString(),
		Definition: b.def, RunParams: ownJSON, RunParamsBase: shared, Initiator: initiator,
		Timeline: instance.StatusChange(string(instance.WorkflowCreated),
			fmt.Sprintf("iteration %d of foreach step %s of %s", it, p.StepID, p.Ref)),
		TimeoutSeconds: iterationTimeout, GroupCount: b.groupCount, Parent: parent, ParentKey: parentKey,
		Depth: b.depth, Correlation: b.correlation, Admission: run.Always,
	})
	b.own = append(b.own, own)
	b.values = append(b.values, nil)
	return nil
}

// prepareLocal marks the iterations of the batch whose flow group this
// node holds for a start here, with their evaluated params and start
// events. One whose params do not evaluate is left to the queue, whose
// start ends it with the error.
func (b *iterationBatch) prepareLocal(ctx context.Context, s Starter, owner string, varying []string) {
	var idx []int
	var gens []int64
	var runs []NewRun
	for i := range b.runs {
		r := &b.runs[i]
		gen, ok := s.Held(instance.GroupFor(r.Ref.WorkflowID, r.Ref.InstanceID, r.GroupCount))
		if !ok {
			continue
		}
		idx, gens = append(idx, i), append(gens, gen)
		runs = append(runs, NewRun{Ref: r.Ref, Definition: b.def, RunParams: b.base, Own: b.own[i], Initiator: r.Initiator,
			Owner: owner, UUID: r.UUID, Correlation: b.correlation, Depth: b.depth})
	}
	if len(runs) == 0 {
		return
	}
	for k, p := range s.Prepare(ctx, runs, varying) {
		if p.Err != nil {
			continue
		}
		i := idx[k]
		b.runs[i].Local = &run.Local{Generation: gens[k], Params: p.JSON, ParamsBase: p.Base, Event: p.Event}
		b.values[i] = p.Values
	}
}

// started is iteration i, created IN_PROGRESS on this node, as its flow
// starts from it.
func (b *iterationBatch) started(i int, c run.Created) StartedRun {
	r := b.runs[i]
	return StartedRun{
		Row: flowstore.InstanceRow{Ref: c.Ref, GroupCount: r.GroupCount, GroupID: c.GroupID, Status: c.Status, Seq: 1,
			// RunParams and Params are the run's own parts (its flow reads
			// neither: Values are its params; Run charges its memory).
			Definition: b.def, RunParams: r.RunParams, Params: r.Local.Params, TimeoutSeconds: r.TimeoutSeconds,
			StartTime: c.StartTime, Parent: r.Parent, UUID: c.UUID, Correlation: b.correlation, Depth: b.depth,
			TraceContext: b.traceContext},
		Generation: r.Local.Generation, Values: b.values[i], Event: r.Local.Event, ParamsBase: r.Local.ParamsBase,
	}
}
