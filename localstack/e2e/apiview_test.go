package e2e_test

// The scenarios read the REST API's answers only through these helpers, so
// that a change of Maestro's response field names is made here once.

// workflowView is what the scenarios read of a pushed workflow.
type workflowView struct {
	CreatedBy string
}

func readWorkflow(body map[string]any) workflowView {
	by, _ := body["created_by"].(string)
	return workflowView{CreatedBy: by}
}

// instanceView is what the scenarios read of a workflow instance (a run).
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

func readSteps(body map[string]any) []stepView {
	list, _ := body["steps"].([]any)
	out := make([]stepView, 0, len(list))
	for _, s := range list {
		m, _ := s.(map[string]any)
		v := stepView{}
		v.ID, _ = m["step_id"].(string)
		v.Status, _ = m["status"].(string)
		v.Params = map[string]any{}
		ps, _ := m["params"].(map[string]any)
		for name, p := range ps {
			if pm, ok := p.(map[string]any); ok {
				v.Params[name] = pm["value"]
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
