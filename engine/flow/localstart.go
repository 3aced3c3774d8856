package flow

import (
	"context"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
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

// Prepare evaluates the run's params as a start from the queue would, and
// builds its start event.
func (s localStarter) Prepare(ctx context.Context, run composite.NewRun) (composite.Prepared, error) {
	vals, raw, err := s.e.evaluateRunParams(ctx, run.Ref, run.Definition, run.RunParams, run.Initiator, "START", run.Owner)
	if err != nil {
		return composite.Prepared{}, err
	}
	ev, err := s.e.startEvent(run.Ref, flowstore.InstanceRow{Definition: run.Definition, UUID: run.UUID,
		Correlation: run.Correlation, Depth: run.Depth})
	if err != nil {
		return composite.Prepared{}, err
	}
	return composite.Prepared{Values: vals, JSON: raw, Event: ev}, nil
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
		if err := s.e.runFlowWith(ctx, g, r.Row, nil, false, 0, r.Values, nil); err != nil {
			s.e.cfg.Logger.Warn("start iteration", "flow", r.Row.Ref.String(), "error", err.Error())
		}
	}
}
