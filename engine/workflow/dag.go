package workflow

import (
	"container/heap"
	"slices"
	"strings"
)

// DAG is the graph of one steps list: the steps are the nodes and their transitions' successors
// the edges, each guarded by a SEL condition. Nested foreach and while bodies are DAGs of their
// own. Ids are returned in definition order wherever an order is not implied by the graph.
type DAG struct {
	ids   []string
	index map[string]int
	succ  [][]edge // sorted by target index
	pred  [][]int  // sorted
}

type edge struct {
	to   int
	cond string
}

// BuildDAG builds the DAG of one steps list. It fails with a *ValidationError (paths relative to
// "steps") when ids are missing or repeated, a successor is not in the list, or the graph has a
// cycle.
func BuildDAG(steps []StepNode) (*DAG, error) {
	var ps problems
	g := buildDAG(steps, rootLoc("steps"), &ps, nil)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return g, nil
}

// buildDAG builds the graph and reports problems under at. elsewhere, when given, maps ids to
// where they are defined in the whole workflow, to explain successors that are not siblings.
func buildDAG(steps []StepNode, at *loc, ps *problems, elsewhere map[string]*loc) *DAG {
	g := &DAG{
		ids:   make([]string, len(steps)),
		index: make(map[string]int, len(steps)),
		succ:  make([][]edge, len(steps)),
		pred:  make([][]int, len(steps)),
	}
	stepAt := func(i int) *loc { return at.at(i).child(string(steps[i].Kind())) }
	for i := range steps {
		id := steps[i].ID()
		g.ids[i] = id
		if id == "" {
			if elsewhere == nil { // the validator reports missing ids itself
				ps.report(stepAt(i).child("id"), "step id is required")
			}
			continue
		}
		if _, dup := g.index[id]; dup {
			if elsewhere == nil {
				ps.reportf(stepAt(i).child("id"), "duplicate step id %q", id)
			}
			continue
		}
		g.index[id] = i
	}
	for i := range steps {
		c := steps[i].Common()
		if c == nil || c.Transition == nil {
			continue
		}
		for to, cond := range c.Transition.Successors {
			j, ok := g.index[to]
			if !ok {
				p := stepAt(i).child("transition").child("successors").child(to)
				if where, found := elsewhere[to]; found {
					ps.reportf(p, "successor %q is defined in another steps list (%s); successors must be steps of the same list", to, where)
				} else {
					ps.reportf(p, "successor %q is not a step of this steps list", to)
				}
				continue
			}
			g.succ[i] = append(g.succ[i], edge{to: j, cond: cond})
			g.pred[j] = append(g.pred[j], i)
		}
	}
	for i := range g.succ {
		slices.SortFunc(g.succ[i], func(a, b edge) int { return a.to - b.to })
		slices.Sort(g.pred[i])
	}
	g.checkPredecessors(steps, stepAt, ps)
	g.checkCycles(stepAt, ps)
	return g
}

// checkPredecessors compares optional explicit predecessor lists with the graph.
func (g *DAG) checkPredecessors(steps []StepNode, stepAt func(int) *loc, ps *problems) {
	for i := range steps {
		c := steps[i].Common()
		if c == nil || c.Transition == nil || len(c.Transition.Predecessors) == 0 {
			continue
		}
		want := g.Predecessors(g.ids[i])
		got := slices.Clone(c.Transition.Predecessors)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			ps.reportf(stepAt(i).child("transition").child("predecessors"), "predecessors [%s] do not match the DAG, which gives [%s]",
				strings.Join(c.Transition.Predecessors, ", "), strings.Join(g.Predecessors(g.ids[i]), ", "))
		}
	}
}

// checkCycles reports one cycle per strongly connected component, at the edge that closes it.
func (g *DAG) checkCycles(stepAt func(int) *loc, ps *problems) {
	n := len(g.ids)
	indeg := make([]int, n)
	for i := range g.pred {
		indeg[i] = len(g.pred[i])
	}
	queue := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		done++
		for _, e := range g.succ[i] {
			indeg[e.to]--
			if indeg[e.to] == 0 {
				queue = append(queue, e.to)
			}
		}
	}
	if done == n {
		return
	}
	for _, comp := range g.components(indeg) {
		cycle := g.shortestCycle(comp)
		if cycle == nil {
			continue
		}
		names := make([]string, 0, len(cycle)+1)
		for _, i := range cycle {
			names = append(names, g.ids[i])
		}
		names = append(names, g.ids[cycle[0]])
		last := cycle[len(cycle)-1]
		ps.reportf(stepAt(last).child("transition").child("successors").child(g.ids[cycle[0]]), "cycle: %s", strings.Join(names, " -> "))
	}
}

// components returns the strongly connected components among the nodes Kahn's algorithm could
// not order (indeg > 0), each sorted, ordered by their first node (Tarjan, iterative).
func (g *DAG) components(indeg []int) [][]int {
	n := len(g.ids)
	const unvisited = -1
	order := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range order {
		order[i] = unvisited
	}
	var comps [][]int
	var sccStack []int
	counter := 0
	type frame struct{ v, next int }
	for root := range n {
		if indeg[root] == 0 || order[root] != unvisited {
			continue
		}
		call := []frame{{v: root}}
		order[root], low[root] = counter, counter
		counter++
		sccStack = append(sccStack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.next < len(g.succ[f.v]) {
				w := g.succ[f.v][f.next].to
				f.next++
				if indeg[w] == 0 {
					continue
				}
				if order[w] == unvisited {
					order[w], low[w] = counter, counter
					counter++
					sccStack = append(sccStack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				} else if onStack[w] {
					low[f.v] = min(low[f.v], order[w])
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == order[v] {
				var comp []int
				for {
					w := sccStack[len(sccStack)-1]
					sccStack = sccStack[:len(sccStack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				slices.Sort(comp)
				comps = append(comps, comp)
			}
		}
	}
	slices.SortFunc(comps, func(a, b []int) int { return a[0] - b[0] })
	return comps
}

// shortestCycle returns the shortest cycle through the first node of comp, staying inside comp,
// or nil when comp is a single node without a self-loop.
func (g *DAG) shortestCycle(comp []int) []int {
	start := comp[0]
	in := make(map[int]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	prev := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range g.succ[v] {
			if !in[e.to] {
				continue
			}
			if e.to == start {
				var cycle []int
				for x := v; x != -1; x = prev[x] {
					cycle = append(cycle, x)
				}
				slices.Reverse(cycle)
				return cycle
			}
			if _, seen := prev[e.to]; !seen {
				prev[e.to] = v
				queue = append(queue, e.to)
			}
		}
	}
	return nil
}

// Len returns the number of steps.
func (g *DAG) Len() int { return len(g.ids) }

// IDs returns the step ids in definition order.
func (g *DAG) IDs() []string { return slices.Clone(g.ids) }

// Has reports whether id is a step of this DAG.
func (g *DAG) Has(id string) bool {
	_, ok := g.index[id]
	return ok
}

// Roots returns the steps without predecessors, in definition order.
func (g *DAG) Roots() []string {
	var out []string
	for i, p := range g.pred {
		if len(p) == 0 {
			out = append(out, g.ids[i])
		}
	}
	return out
}

// Leaves returns the steps without successors, in definition order.
func (g *DAG) Leaves() []string {
	var out []string
	for i, s := range g.succ {
		if len(s) == 0 {
			out = append(out, g.ids[i])
		}
	}
	return out
}

// Successors returns a fresh map of the successors of id to their SEL conditions.
func (g *DAG) Successors(id string) map[string]string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	out := make(map[string]string, len(g.succ[i]))
	for _, e := range g.succ[i] {
		out[g.ids[e.to]] = e.cond
	}
	return out
}

// Predecessors returns the predecessors of id in definition order.
func (g *DAG) Predecessors(id string) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	out := make([]string, len(g.pred[i]))
	for k, p := range g.pred[i] {
		out[k] = g.ids[p]
	}
	return out
}

// TopoOrder returns the steps in an order where every step comes after its predecessors; among
// the steps ready at the same time, definition order wins.
func (g *DAG) TopoOrder() []string {
	indeg := make([]int, len(g.ids))
	ready := &intHeap{}
	for i := range g.ids {
		indeg[i] = len(g.pred[i])
		if indeg[i] == 0 {
			*ready = append(*ready, i)
		}
	}
	heap.Init(ready)
	out := make([]string, 0, len(g.ids))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, g.ids[i])
		for _, e := range g.succ[i] {
			indeg[e.to]--
			if indeg[e.to] == 0 {
				heap.Push(ready, e.to)
			}
		}
	}
	return out
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
