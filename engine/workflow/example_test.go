package workflow_test

import (
	"errors"
	"fmt"

	"github.com/maestro-aws/maestro/engine/workflow"
)

func Example() {
	def, err := workflow.DecodeJSON([]byte(`{
	  "properties": {"owner": "tester", "run_strategy": "sequential"},
	  "workflow": {
	    "id": "sample",
	    "steps": [
	      {"step": {"id": "a", "type": "NoOp", "transition": {"successors": {"b": "true", "c": "x > 1"}}}},
	      {"step": {"id": "b", "type": "NoOp", "transition": {"successors": {"job9": "true"}}}},
	      {"step": {"id": "c", "type": "Sleep", "sleep_seconds": "1min"}}
	    ]
	  }
	}`))
	if err != nil {
		panic(err)
	}
	err = workflow.Validator{}.Validate(def)
	var ve *workflow.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Path, "-", p.Message)
		}
	}
	// Output:
	// workflow.steps[1].step.transition.successors.job9 - successor "job9" is not a step of this steps list
}

func ExampleBuildDAG() {
	def, _ := workflow.DecodeYAML([]byte(`
Workflow:
  id: fan
  jobs:
    - job: {id: load, type: NoOp, transition: [left, right]}
    - job: {id: left, type: NoOp, transition: [join]}
    - job: {id: right, type: NoOp, transition: ['IF rows > 0 THEN join']}
    - job: {id: join, type: NoOp}
`))
	g, err := workflow.BuildDAG(def.Workflow.Steps)
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Roots(), g.Predecessors("join"), g.Successors("right"), g.TopoOrder())
	// Output:
	// [load] [left right] map[join:rows > 0] [load left right join]
}
