package flow

import (
	"context"
	"maps"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// localStarter lets the composite runtimes start child runs in flow groups
// this node holds without the queue (composite/local.go, docs/foreach.md).
type localStarter struct{ e *Engine }

var _ composite.Starter = localStarter{}

// Held reports the generation of a group this node holds and is not
// handing over, with its lease not yet due by the node's own clock.
func (s localStarter) Held(id int32) (int64, bool) {
	g := s.e.group(id)
	if g == nil || g.HandingOver() || !g.HeldNow() {
		return 0, false
	}
	return g.gen, true
}

// Prepare evaluates the runs' params as a start from the queue would, and
// builds their start events. What the runs share is evaluated once
// (params.Batch); when that cannot be (params that read signals, or a
// shared param that fails), each run is evaluated on its own.
func (s localStarter) Prepare(ctx context.Context, runs []composite.NewRun, varying []string) []composite.Prepared {
	out := make([]composite.Prepared, len(runs))
	batch := s.batch(ctx, runs, varying)
	for i, r := range runs {
		p := &out[i]
		if batch != nil {
			rctx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
			p.Values, p.Base, p.JSON, p.Err = batch.EvaluateSplit(rctx, r.Ref.InstanceID, r.Own)
			cancel()
		} else {
			p.Values, p.JSON, p.Err = s.e.evaluateRunParams(ctx, r.Ref, r.Definition, runParams(r), r.Initiator, "START", r.Owner)
		}
		if p.Err != nil {
			continue
		}
		p.Event, p.Err = s.e.startEvent(r.Ref, flowstore.InstanceRow{Definition: r.Definition, UUID: r.UUID,
			Correlation: r.Correlation, Depth: r.Depth})
	}
	return out
}

// runParams are the run params of r: those it shares, and its own.
func runParams(r composite.NewRun) workflow.Params {
	out := make(workflow.Params, len(r.RunParams)+len(r.Own))
	maps.Copy(out, r.RunParams)
	maps.Copy(out, r.Own)
	return out
}

// batch evaluates what runs share, nil when they are evaluated one by one.
func (s localStarter) batch(ctx context.Context, runs []composite.NewRun, varying []string) *params.Batch {
	if len(runs) < 2 {
		return nil
	}
	first := runs[0]
	def, err := s.e.defs.acquire(first.Definition, false)
	if err != nil {
		return nil
	}
	defer s.e.defs.release(def)
	initiator := decodeInitiator(first.Initiator)
	ctx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	wf := def.wf // the batch keeps it; the cache may drop its entry
	b, err := params.NewBatch(ctx, params.WorkflowInput{Workflow: &wf, RunParams: runParams(first),
		InstanceID: first.Ref.InstanceID, RunID: first.Ref.RunID, Initiator: initiator, RunPolicy: "START",
		Owner: first.Owner}, varying)
	if err != nil {
		return nil
	}
	return b
}

// Run starts the flows of runs just committed IN_PROGRESS. Their memory is
// charged without refusal, as an adopted run's is: the foreach concurrency
// bounds how many there are.
func (s localStarter) Run(ctx context.Context, runs []composite.StartedRun) {
	for _, r := range runs {
		s.e.wroteEvent(r.Event)
		g := s.e.group(r.Row.GroupID)
		if g == nil || g.gen != r.Generation {
			continue // the group's next owner adopts it
		}
		// Charged for its params whole, the shared part included, as a
		// run started from the queue is.
		held := runFootprint(len(r.Row.Definition), len(r.Row.Params)+len(r.ParamsBase))
		s.e.mem.force(held)
		if err := s.e.runFlowWith(ctx, g, r.Row, nil, false, held, r.Values, nil); err != nil {
			s.e.cfg.Logger.Warn("start iteration", "flow", r.Row.Ref.String(), "error", err.Error())
		}
	}
}
