package flowstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
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

	// c: a chain of steps each written once (NoOp), one statement.
	c := run.Ref{WorkflowID: "c", InstanceID: 1, RunID: 1}
	cIns1 := InsertStepOp(ctx, c, 0, 1, "s1", 1, "", "", StepWrite{})
	cIns2 := InsertStepOp(ctx, c, 0, 1, "s2", 1, "", "", StepWrite{}).After(cIns1)
	cIns3 := InsertStepOp(ctx, c, 0, 1, "s3", 1, "", "", StepWrite{}).After(cIns2)

	waves := statementWaves([]*Op{aEnd1, cIns1, bStart, aIns2, cIns2, bIns, aEnd2, cIns3, bUpd, aRun})
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
	if got := waves[0][slotInsert]; where[cIns1] != where[cIns3] || where[cIns1][0] != 0 ||
		slices.Index(got, cIns1) > slices.Index(got, cIns2) || slices.Index(got, cIns2) > slices.Index(got, cIns3) {
		t.Errorf("a chain of inserts is not one statement in its order: %v %v %v", where[cIns1], where[cIns2], where[cIns3])
	}
	if len(waves) != 2 {
		t.Errorf("%d waves, want 2 (a's chain goes back to an earlier statement once)", len(waves))
	}
}

// A batch holding long chains of steps each written once (NoOp), of two
// runs interleaved, writes each chain in one statement: every row, and
// its event, is written, and each run's events follow the order of its
// writes (event ids ascending along the chain).
func TestChainInOneStatementKeepsItsEventsInOrder(t *testing.T) {
	t.Parallel()
	db, _, ref1, ref2 := writerFixture(t)
	ctx := context.Background()
	const steps = 60
	var batch []*Op
	prev := map[run.Ref]*Op{}
	for i := range steps {
		for g, ref := range []run.Ref{ref1, ref2} {
			ev := []byte(fmt.Sprintf(`{"workflow_id":"wf","instance_id":%d,"step_id":"c%d"}`, ref.InstanceID, i))
			op := InsertStepOp(ctx, ref, int32(g), 5+2*int64(g), fmt.Sprintf("c%d", i), 1,
				fmt.Sprintf("00000000-0000-0000-%04d-%012d", ref.InstanceID, i), "NoOp",
				StepWrite{Status: instance.StepSucceeded, Seq: 1, Start: true, End: true, Timeline: []instance.TimelineEvent{}, Event: ev}).
				After(prev[ref])
			prev[ref] = op
			batch = append(batch, op)
		}
	}
	if waves := statementWaves(batch); len(waves) != 1 || len(waves[0][slotInsert]) != len(batch) {
		t.Fatalf("the chains took %d waves, want one insert statement", len(waves))
	}
	w := NewWriter(db, WriterConfig{Linger: -1})
	w.Submit(batch...) // before the loop runs: one batch
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, op := range batch {
		if err := op.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range []run.Ref{ref1, ref2} {
		rows, err := db.Query(ctx, `SELECT payload->>'step_id' FROM maestro_event
            WHERE workflow_id = 'wf' AND (payload->>'instance_id')::bigint = $1 ORDER BY event_id`, ref.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != steps {
			t.Fatalf("run %d: %d events, want %d", ref.InstanceID, len(got), steps)
		}
		for i, s := range got {
			if s != fmt.Sprintf("c%d", i) {
				t.Fatalf("run %d: event %d is %s's, want c%d's (events %v)", ref.InstanceID, i, s, i, got)
			}
		}
	}
}
