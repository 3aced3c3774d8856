package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// The SEL functions a step's params use to read child runs:
// params.getFromSubworkflow and params.getFromForeach.

// Funcs are the SEL functions that read the child runs of upstream steps
// (subworkflow children, foreach iterations) for an attempt of run ref;
// upstream is the params (outputs merged in) of the run's other steps.
func Funcs(db *pgxpool.Pool, ref run.Ref, upstream map[string]params.Values) map[string]sel.Func {
	r := reader{db: db, ref: ref, upstream: upstream}
	return map[string]sel.Func{
		"params.getFromSubworkflow": r.getFromSubworkflow,
		"params.getFromForeach":     r.getFromForeach,
	}
}

// reader reads child runs for one attempt's params.
type reader struct {
	db       *pgxpool.Pool
	ref      run.Ref
	upstream map[string]params.Values
}

// ErrNoSubworkflowParam reports params.getFromSubworkflow of a step that
// ran no child, or of a param the child does not have.
var ErrNoSubworkflowParam = errors.New("no such subworkflow param")

// getFromSubworkflow implements params.getFromSubworkflow(stepId,
// paramName): the param of the child run an upstream subworkflow step
// created.
func (r reader) getFromSubworkflow(ctx context.Context, args []any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("params.getFromSubworkflow takes (stepId, paramName), got %d arguments", len(args))
	}
	step, ok1 := args[0].(string)
	name, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, errors.New("params.getFromSubworkflow takes two strings")
	}
	vals := r.upstream[step]
	id, _ := vals[workflow.ParamSubworkflowID].Value.(string)
	child := run.Ref{WorkflowID: id, InstanceID: valueInt(vals[childInstanceKey]), RunID: valueInt(vals[childRunKey])}
	if child.WorkflowID == "" || child.InstanceID == 0 {
		return nil, fmt.Errorf("%w: step %s has no subworkflow run", ErrNoSubworkflowParam, step)
	}
	var raw []byte
	err := r.db.QueryRow(ctx, `SELECT params FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
		child.WorkflowID, child.InstanceID, child.RunID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: subworkflow run %s of step %s does not exist", ErrNoSubworkflowParam, child, step)
	}
	if err != nil {
		return nil, fmt.Errorf("read params of subworkflow run %s: %w", child, err)
	}
	var childVals params.Values
	if err := json.Unmarshal(raw, &childVals); err != nil {
		return nil, fmt.Errorf("decode params of subworkflow run %s: %w", child, err)
	}
	v, ok := childVals[name]
	if !ok {
		return nil, fmt.Errorf("%w: param %s of subworkflow run %s (step %s)", ErrNoSubworkflowParam, name, child, step)
	}
	return v.Value, nil
}

func valueInt(v params.Value) int64 {
	return dataInt(map[string]any{"v": v.Value}, "v")
}

// ErrNoForeachParam reports params.getFromForeach of a step that ran no
// iterations, or of a param an iteration's step does not have.
var ErrNoForeachParam = errors.New("no such foreach param")

// foreachParamSQL reads one param of one step of the latest run of each
// iteration of a foreach, in iteration order.
const foreachParamSQL = `
SELECT r.instance_id, s.params->$4
FROM (SELECT instance_id, max(run_id) AS run_id FROM workflow_instance
      WHERE workflow_id = $1 AND instance_id <= $2 GROUP BY instance_id) r
LEFT JOIN LATERAL (
    SELECT params FROM step_instance s
    WHERE s.workflow_id = $1 AND s.instance_id = r.instance_id AND s.run_id = r.run_id AND s.step_id = $3
    ORDER BY attempt_id DESC LIMIT 1) s ON true
ORDER BY r.instance_id`

// getFromForeach implements params.getFromForeach(foreachStepId, stepId,
// paramName): the values of a param of a step inside an upstream foreach,
// one per iteration in iteration order (the latest run of each), as an
// array of the param's type.
func (r reader) getFromForeach(ctx context.Context, args []any) (any, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("params.getFromForeach takes (foreachStepId, stepId, paramName), got %d arguments", len(args))
	}
	var strs [3]string
	for i, arg := range args {
		s, ok := arg.(string)
		if !ok {
			return nil, errors.New("params.getFromForeach takes three strings")
		}
		strs[i] = s
	}
	foreachStep, step, name := strs[0], strs[1], strs[2]
	total, ok := r.upstream[foreachStep][foreachIterationsOut]
	if !ok {
		return nil, fmt.Errorf("%w: step %s is not a foreach step that has run", ErrNoForeachParam, foreachStep)
	}
	fid := instance.ForeachWorkflowID(r.ref.WorkflowID, r.ref.InstanceID, foreachStep)
	rows, err := r.db.Query(ctx, foreachParamSQL, fid, valueInt(total), step, name)
	if err != nil {
		return nil, fmt.Errorf("read %s of step %s in foreach %s: %w", name, step, foreachStep, err)
	}
	defer rows.Close()
	var vals []params.Value
	for rows.Next() {
		var it int64
		var raw []byte
		if err := rows.Scan(&it, &raw); err != nil {
			return nil, err
		}
		var one params.Values
		if raw != nil {
			if err := json.Unmarshal([]byte(`{"v":`+string(raw)+`}`), &one); err != nil {
				return nil, fmt.Errorf("decode %s of iteration %d: %w", name, it, err)
			}
		}
		v, ok := one["v"]
		if !ok {
			return nil, fmt.Errorf("%w: iteration %d of foreach %s has no param %s in step %s", ErrNoForeachParam, it, foreachStep, name, step)
		}
		vals = append(vals, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return foreachArray(vals)
}

// foreachArray turns the iterations' values of one param into a SEL array
// of their type.
func foreachArray(vals []params.Value) (any, error) {
	if len(vals) == 0 {
		return []string{}, nil
	}
	switch t := vals[0].Type; t {
	case workflow.ParamTypeString:
		return convertValues[string](vals, t)
	case workflow.ParamTypeLong:
		return convertValues[int64](vals, t)
	case workflow.ParamTypeDouble:
		return convertValues[float64](vals, t)
	case workflow.ParamTypeBoolean:
		return convertValues[bool](vals, t)
	default:
		return nil, fmt.Errorf("params.getFromForeach reads STRING, LONG, DOUBLE or BOOLEAN params, not %s", t)
	}
}

func convertValues[T any](vals []params.Value, t workflow.ParamType) ([]T, error) {
	out := make([]T, len(vals))
	for i, v := range vals {
		c, err := params.Convert(t, v.Value)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", i+1, err)
		}
		x, ok := c.(T)
		if !ok {
			return nil, fmt.Errorf("iteration %d has a %T, want %s", i+1, c, t)
		}
		out[i] = x
	}
	return out, nil
}
