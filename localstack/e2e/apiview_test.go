package e2e_test

// The scenarios read the REST API's answers only through these helpers, so
// that a change of Maestro's response field names is made here once. The
// shapes are Maestro's (engine/wire).

// workflowView is what the scenarios read of a pushed workflow.
type workflowView struct {
	CreatedBy string
}

// readWorkflow reads a push's answer: Maestro's WorkflowCreateResponse,
// whose version metadata names the version's author.
func readWorkflow(body map[string]any) workflowView {
	def, _ := body["workflow_definition"].(map[string]any)
	meta, _ := def["metadata"].(map[string]any)
	by, _ := meta["version_author"].(string)
	return workflowView{CreatedBy: by}
}

// instanceView is what the scenarios read of a workflow instance (a run)
// or of a start's answer (Maestro's flat WorkflowStartResponse).
type instanceView struct {
	Status string
	// InitiatorType is MANUAL, TIME, SIGNAL, ...
	InitiatorType string
}

func readInstance(body map[string]any) instanceView {
	v := instanceView{}
	v.Status, _ = body["status"].(string)
	if in, ok := body["initiator"].(map[string]any); ok {
		v.InitiatorType, _ = in["type"].(string)
	}
	return v
}

// stepView is one step of a run's step list.
type stepView struct {
	ID     string
	Status string
	// Params are the step's evaluated params: name -> value.
	Params map[string]any
}

// readSteps reads a run's steps: a list of Maestro's StepInstance (under
// "items", see callAPI), each with its status in runtime_state.
func readSteps(body map[string]any) []stepView {
	list, _ := body["items"].([]any)
	out := make([]stepView, 0, len(list))
	for _, s := range list {
		m, _ := s.(map[string]any)
		v := stepView{}
		v.ID, _ = m["step_id"].(string)
		if rs, ok := m["runtime_state"].(map[string]any); ok {
			v.Status, _ = rs["status"].(string)
		}
		v.Params = map[string]any{}
		ps, _ := m["params"].(map[string]any)
		for name, p := range ps {
			if pm, ok := p.(map[string]any); ok {
				v.Params[name] = pm["value"]
				if ev, ok := pm["evaluated_result"]; ok {
					v.Params[name] = ev
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// lineageView is one entry of a signal lineage answer.
type lineageView struct {
	Relation string
	// Name and Seq name the signal instance.
	Name string
	Seq  int64
}

func readLineage(body map[string]any) []lineageView {
	list, _ := body["lineage"].([]any)
	out := make([]lineageView, 0, len(list))
	for _, e := range list {
		m, _ := e.(map[string]any)
		v := lineageView{}
		v.Relation, _ = m["relation"].(string)
		if s, ok := m["signal"].(map[string]any); ok {
			v.Name, _ = s["name"].(string)
			seq, _ := s["seq_id"].(float64)
			v.Seq = int64(seq)
		}
		out = append(out, v)
	}
	return out
}
