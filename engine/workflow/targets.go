package workflow

import "strings"

// SubworkflowTarget is a workflow a subworkflow step of a definition starts.
type SubworkflowTarget struct {
	// Path locates the step ("[0]", "[1].foreach.steps[0]").
	Path string
	// StepID is the step's id; WorkflowID the workflow it starts.
	StepID, WorkflowID string
}

// SubworkflowTargets lists the workflows the definition's subworkflow steps
// (nested in loops too) name with a literal subworkflow_id. An id computed
// by an expression or interpolated from params is known only when the step
// runs, and is left out.
func (w *Workflow) SubworkflowTargets() []SubworkflowTarget {
	var out []SubworkflowTarget
	WalkSteps(w.Steps, func(path string, n *StepNode, _ int) bool {
		if n.Subworkflow == nil {
			return true
		}
		p, ok := n.Subworkflow.Params[ParamSubworkflowID]
		id, isString := p.Value.(string)
		if ok && p.IsLiteral() && isString && id != "" && !strings.Contains(id, "$") {
			out = append(out, SubworkflowTarget{Path: path, StepID: n.ID(), WorkflowID: id})
		}
		return true
	})
	return out
}
