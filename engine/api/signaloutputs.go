package api

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/wire"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// outputKey names a step attempt of a run.
func outputKey(stepID string, attemptID int64) string {
	return stepID + "\x00" + strconv.FormatInt(attemptID, 10)
}

// hasSignalOutputs reports whether a step of the run's workflow declares
// signal_outputs (steps inside loops run in runs of their own).
func (c *stepContext) hasSignalOutputs() bool {
	if c.wf == nil {
		return false
	}
	found := false
	workflow.WalkSteps(c.wf.Steps, func(_ string, n *workflow.StepNode, _ int) bool {
		if len(n.Common().SignalOutputs) > 0 {
			found = true
		}
		return false
	})
	return found
}

// loadSignalOutputs reads the output signals the run's step attempts
// announced (their PRODUCED lineage) into c, as Maestro's StepInstance
// signal_outputs: one entry per announced signal, in signal_outputs order.
func (s *Server) loadSignalOutputs(ctx context.Context, c *stepContext) error {
	if !c.hasSignalOutputs() {
		return nil
	}
	ls, err := signal.NewStore(s.cfg.DB).LineageOfRun(ctx, c.run.WorkflowID, c.run.InstanceID, c.run.RunID, "")
	if err != nil {
		return fmt.Errorf("read the output signals of %s/%d/%d: %w", c.run.WorkflowID, c.run.InstanceID, c.run.RunID, err)
	}
	ls = slices.DeleteFunc(ls, func(l signal.Lineage) bool { return l.Relation != signal.Produced })
	if len(ls) == 0 {
		return nil
	}
	seqs := make([]int64, len(ls))
	for i, l := range ls {
		seqs[i] = l.Signal.Seq
	}
	sigs, err := signal.BySeq(ctx, s.cfg.DB, seqs)
	if err != nil {
		return fmt.Errorf("read the output signals of %s/%d/%d: %w", c.run.WorkflowID, c.run.InstanceID, c.run.RunID, err)
	}
	slices.SortStableFunc(ls, func(a, b signal.Lineage) int { return position(a) - position(b) })
	c.signalOutputs = map[string]*wire.SignalOutputs{}
	for _, l := range ls {
		sig := sigs[l.Signal.Seq]
		if sig == nil {
			continue
		}
		k := outputKey(l.StepID, l.AttemptID)
		o := c.signalOutputs[k]
		if o == nil {
			o = &wire.SignalOutputs{Outputs: []wire.SignalOutput{}}
			c.signalOutputs[k] = o
		}
		o.Outputs = append(o.Outputs, wire.SignalOutput{
			Name: sig.Name, Params: sig.Params, Payload: sig.Payload, SignalID: sig.Seq,
			AnnounceTime: sig.CreateTime.UnixMilli(),
		})
	}
	return nil
}

// position is a PRODUCED lineage's index in the step's signal_outputs.
func position(l signal.Lineage) int {
	if l.OutputIndex == nil {
		return 0
	}
	return *l.OutputIndex
}
