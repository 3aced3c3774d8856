package flowstore

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/run"
)

// A run's chain of writes in one batch keeps its order across the
// batch's statements: a step's end written behind, the next step's
// insert and the run's end go out in that order, each in a statement
// after its predecessor's, while unrelated writes share the first wave.
func TestStatementWavesKeepEachRunsOrder(t *testing.T) {
	ctx := context.Background()
	a := run.Ref{WorkflowID: "a", InstanceID: 1, RunID: 1}
	b := run.Ref{WorkflowID: "b", InstanceID: 1, RunID: 1}
	aEnd1 := UpdateStepOp(ctx, a, 0, 1, "s1", 1, StepWrite{})
	aIns2 := InsertStepOp(ctx, a, 0, 1, "s2", 1, "", "", StepWrite{}).After(aEnd1)
	aEnd2 := UpdateStepOp(ctx, a, 0, 1, "s2", 1, StepWrite{}).After(aIns2)
	aRun := UpdateInstanceOp(ctx, a, 0, 1, InstanceUpdate{End: true}).After(aEnd2)
	bStart := UpdateInstanceOp(ctx, b, 0, 1, InstanceUpdate{})
	bIns := InsertStepOp(ctx, b, 0, 1, "s1", 1, "", "", StepWrite{}).After(bStart)
	bUpd := UpdateStepOp(ctx, b, 0, 1, "s0", 1, StepWrite{})

	waves := statementWaves([]*Op{aEnd1, bStart, aIns2, bIns, aEnd2, bUpd, aRun})
	where := map[*Op][2]int{}
	for w, wave := range waves {
		for slot, ops := range wave {
			for _, op := range ops {
				where[op] = [2]int{w, slot}
			}
		}
	}
	before := func(x, y *Op) bool {
		return where[x][0] < where[y][0] || where[x][0] == where[y][0] && where[x][1] < where[y][1]
	}
	for _, pair := range [][2]*Op{{aEnd1, aIns2}, {aIns2, aEnd2}, {aEnd2, aRun}, {bStart, bIns}} {
		if !before(pair[0], pair[1]) {
			t.Errorf("op at %v does not run before its successor at %v", where[pair[0]], where[pair[1]])
		}
	}
	if where[bStart][0] != 0 || where[bIns][0] != 0 || where[bUpd][0] != 0 || where[aEnd1][0] != 0 {
		t.Errorf("writes that need no later wave were pushed to one: %v", where)
	}
	if len(waves) != 2 {
		t.Errorf("%d waves, want 2 (a's chain goes back to an earlier statement once)", len(waves))
	}
}
