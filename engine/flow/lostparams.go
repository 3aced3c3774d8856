package flow

import (
	"context"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
)

// paramsLostAtStart reports whether a run about to be resumed was started
// without its params: IN_PROGRESS, none stored (the column's empty object:
// evaluated params always hold Maestro's defaults) and no step written.
// A start stores the params it evaluated in the CREATED -> IN_PROGRESS
// write itself, so this is a run whose params failed to evaluate and whose
// engine stopped between that write and the FAILED one its flow made next
// (the two usually share a transaction, but need not). Resumed from its
// row alone, the run would go on without params instead of failing.
func paramsLostAtStart(row flowstore.InstanceRow, steps []flowstore.StepRow, vals params.Values, paramErr error, start *startWrite) bool {
	return start == nil && vals == nil && paramErr == nil && row.Status == instance.WorkflowInProgress &&
		(len(row.Params) == 0 || string(row.Params) == "{}") && len(steps) == 0
}

// reevaluateLostParams evaluates again the params of a run started without
// them (paramsLostAtStart), from the inputs its start had. paramErr is
// the run's param failure, which its flow ends FAILED with; err is a
// failure to read the inputs, and the resume is tried again. Params that
// evaluate now (the failure was passing: a deadline under load) are
// written before anything else of the run, as its start would have
// written them: the returned write, which the flow orders its writes after.
func (e *Engine) reevaluateLostParams(ctx context.Context, g *group, row *flowstore.InstanceRow) (vals params.Values, write *startWrite, paramErr, err error) {
	created := flowstore.CreatedRow{Row: *row}
	if created.Initiator, created.RunConfig, created.Owner, err = e.store.ReadStartInputs(ctx, row.Ref); err != nil {
		return nil, nil, nil, err
	}
	vals, raw, paramErr := e.evaluateStartParams(ctx, row.Ref, created, created.Owner)
	if paramErr != nil {
		return nil, nil, paramErr, nil
	}
	row.Params = raw
	op := flowstore.UpdateInstanceOp(ctx, row.Ref, g.id, g.gen, flowstore.InstanceUpdate{
		From: instance.WorkflowInProgress, Status: instance.WorkflowInProgress, Params: raw,
	})
	return vals, &startWrite{op: op}, nil, nil
}
