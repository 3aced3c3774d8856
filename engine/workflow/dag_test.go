package workflow

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestBuildDAG(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, string(readFile(t, "testdata/dag.json")))
	g, err := BuildDAG(d.Workflow.Steps)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"Len", g.Len(), 6},
		{"IDs", g.IDs(), []string{"load", "agg.region", "agg.product", "agg.channel", "audit", "join"}},
		{"Roots", g.Roots(), []string{"load"}},
		{"Leaves", g.Leaves(), []string{"audit", "join"}},
		{"Predecessors(join)", g.Predecessors("join"), []string{"agg.region", "agg.product", "agg.channel"}},
		{"Predecessors(load)", g.Predecessors("load"), []string{}},
		{"Predecessors(unknown)", g.Predecessors("nope"), []string(nil)},
		{"Successors(agg.channel)", g.Successors("agg.channel"), map[string]string{"join": "true", "audit": "true"}},
		{"Successors(unknown)", g.Successors("nope"), map[string]string(nil)},
		{"TopoOrder", g.TopoOrder(), []string{"load", "agg.region", "agg.product", "agg.channel", "audit", "join"}},
		{"Has", g.Has("audit") && !g.Has("x"), true},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if !equalAny(c.got, c.want) {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		return slices.Equal(x, b.([]string)) && (x == nil) == (b.([]string) == nil)
	case map[string]string:
		return maps.Equal(x, b.(map[string]string)) && (x == nil) == (b.(map[string]string) == nil)
	}
	return a == b
}

func TestTopoOrderPrefersDefinitionOrder(t *testing.T) {
	t.Parallel()
	// e is defined first but depends on everything; b and c become ready together.
	d := mustDecode(t, doc("", `{"step":{"id":"e","type":"NoOp"}},
		{"step":{"id":"c","type":"NoOp","transition":{"successors":{"e":"true"}}}},
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"c":"true","b":"true"}}}},
		{"step":{"id":"b","type":"NoOp","transition":{"successors":{"e":"true"}}}},
		{"step":{"id":"z","type":"NoOp"}}`))
	g, err := BuildDAG(d.Workflow.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.TopoOrder(), ","); got != "a,c,b,e,z" {
		t.Fatalf("TopoOrder = %s", got)
	}
	if got := strings.Join(g.Roots(), ","); got != "a,z" {
		t.Fatalf("Roots = %s", got)
	}
}

func TestBuildDAGErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps string
		wants []want
	}{
		{"missing successor", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}}`,
			[]want{{"steps[0].step.transition.successors.b", `successor "b" is not a step of this steps list`}}},
		{"duplicate id", `{"step":{"id":"a","type":"NoOp"}},{"step":{"id":"a","type":"NoOp"}}`,
			[]want{{"steps[1].step.id", `duplicate step id "a"`}}},
		{"missing id", `{"step":{"type":"NoOp"}}`, []want{{"steps[0].step.id", "step id is required"}}},
		{"cycle", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"x > 1"}}}},{"step":{"id":"b","type":"NoOp","transition":{"successors":{"a":"true"}}}}`,
			[]want{{"steps[1].step.transition.successors.a", "cycle: a -> b -> a"}}},
		{"shortest cycle is named", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true","d":"true"}}}},
			{"step":{"id":"b","type":"NoOp","transition":{"successors":{"c":"true"}}}},
			{"step":{"id":"c","type":"NoOp","transition":{"successors":{"a":"true"}}}},
			{"step":{"id":"d","type":"NoOp","transition":{"successors":{"a":"true"}}}}`,
			[]want{{"steps[3].step.transition.successors.a", "cycle: a -> d -> a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := mustDecode(t, doc("", tc.steps))
			g, err := BuildDAG(d.Workflow.Steps)
			if g != nil {
				t.Error("got a DAG along with the error")
			}
			assertProblems(t, err, tc.wants...)
		})
	}
}

func TestWalkSteps(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, string(readFile(t, "testdata/foreach.json")))
	var got []string
	WalkSteps(d.Workflow.Steps, func(path string, n *StepNode, depth int) bool {
		got = append(got, path+"="+n.ID()+"@"+string(rune('0'+depth)))
		return true
	})
	want := "[0]=prepare@0 [1]=sweep@0 [1].foreach.steps[0]=train@1 [1].foreach.steps[1]=evaluate@1"
	if strings.Join(got, " ") != want {
		t.Fatalf("walk = %v", got)
	}
}
