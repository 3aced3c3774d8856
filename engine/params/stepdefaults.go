package params

import (
	"maps"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// Maestro's default params of the step kinds (its default-step-params,
// default-foreach-step-params, default-while-step-params and
// default-subworkflow-step-params): a step's own params override them, and
// a param the step defines without a mode takes the default's mode. The
// general ones every step has (workflow_instance_id, step_instance_uuid,
// step_attempt_id, step_id) are set by StepDefs.
//
//	foreach:     loop_params (MAP, MUTABLE_ON_START, required), loop_index (LONG -1)
//	while:       loop_params (MAP, MUTABLE_ON_START, required), loop_index (LONG -1), condition (BOOLEAN false)
//	subworkflow: subworkflow_id (STRING, MUTABLE_ON_START, required),
//	             subworkflow_version (STRING "active", MUTABLE_ON_START)
//
// Their validators (@NotEmpty, @Min(0)) describe what the engine sets;
// the required params are checked at push (DryRun) instead. loop_index and
// condition have no mode, as in Maestro (so MUTABLE): the engine sets them
// as the loop goes.
var (
	loopDefaults = workflow.Params{
		workflow.ParamLoopParams: {Type: workflow.ParamTypeMap, Value: map[string]any{}, Mode: workflow.ParamModeMutableOnStart},
		workflow.ParamLoopIndex:  {Type: workflow.ParamTypeLong, Value: int64(-1)},
	}
	whileDefaults = func() workflow.Params {
		out := maps.Clone(loopDefaults)
		out["condition"] = workflow.Param{Type: workflow.ParamTypeBoolean, Value: false}
		return out
	}()
	subworkflowDefaults = workflow.Params{
		workflow.ParamSubworkflowVersion: {Type: workflow.ParamTypeString, Value: "active", Mode: workflow.ParamModeMutableOnStart},
	}
)

// requiredParams are the defaults a step of the kind must define (Maestro's
// internal mode REQUIRED), with their type and mode.
var requiredParams = map[workflow.StepKind]map[string]workflow.Param{
	workflow.StepKindForeach:     {workflow.ParamLoopParams: loopDefaults[workflow.ParamLoopParams]},
	workflow.StepKindWhile:       {workflow.ParamLoopParams: loopDefaults[workflow.ParamLoopParams]},
	workflow.StepKindSubworkflow: {workflow.ParamSubworkflowID: {Type: workflow.ParamTypeString, Mode: workflow.ParamModeMutableOnStart}},
}

// StepDefaults returns the default params of n's kind, to be merged under
// the step's own (StepInput.Typed).
func StepDefaults(n *workflow.StepNode) workflow.Params {
	switch n.Kind() {
	case workflow.StepKindForeach:
		return maps.Clone(loopDefaults)
	case workflow.StepKindWhile:
		return maps.Clone(whileDefaults)
	case workflow.StepKindSubworkflow:
		return maps.Clone(subworkflowDefaults)
	}
	return nil
}

// StepDefinitionDefs returns n's params merged over its kind's defaults
// and required params, each with its effective mode: what a version's
// enriched step_params show.
func StepDefinitionDefs(n *workflow.StepNode) workflow.Params {
	out := StepDefaults(n)
	if out == nil {
		out = workflow.Params{}
	}
	maps.Copy(out, requiredParams[n.Kind()])
	for name, p := range n.Common().Params {
		if d, ok := out[name]; ok && p.Mode == "" {
			p.Mode = d.Mode
		}
		out[name] = p
	}
	return out
}
