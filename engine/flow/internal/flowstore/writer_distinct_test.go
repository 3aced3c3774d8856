package flowstore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// distinctJSON keeps each distinct value once, in the order of its first
// row, NULL included, and indexes every row to its own value.
func TestDistinctJSONIndexesEachRowToItsValue(t *testing.T) {
	col := jsonArray{[]byte(`{"a":1}`), []byte(`{"a":1}`), nil, []byte(`{"b":2}`), nil, []byte(`{"a":1}`), []byte(`{"a": 1}`)}
	vals, idx := distinctJSON(col)
	if len(vals) != 4 {
		t.Fatalf("distinct values: got %d (%q), want 4", len(vals), vals)
	}
	if len(idx) != len(col) {
		t.Fatalf("indexes: got %d, want %d", len(idx), len(col))
	}
	for i, k := range idx {
		got := vals[k-1]
		if string(got) != string(col[i]) || (got == nil) != (col[i] == nil) {
			t.Errorf("row %d: index %d names %q, want %q", i, k, got, col[i])
		}
	}
}

// A batch whose step writes share some retry policies and timelines and
// not others (sent once each, stepSource) stores each row's own, on insert
// and on update.
func TestWriterStoresEachStepsRetryAndTimeline(t *testing.T) {
	db, _, a, b := writerFixture(t)
	ctx := context.Background()
	tl := func(status instance.StepStatus, ms int64) []instance.TimelineEvent {
		ev := instance.StatusChange(string(status), "")
		for i := range ev {
			ev[i].Timestamp = ms
		}
		return ev
	}
	shared := instance.RetryInfo{ErrorRetryLimit: 2, PlatformRetryLimit: 10, Retryable: true}
	other := instance.RetryInfo{ErrorRetries: 1, ErrorRetryLimit: 2, Retryable: true}
	type row struct {
		ref   run.Ref
		group int32
		step  string
		retry instance.RetryInfo
		tl    []instance.TimelineEvent
	}
	rows := []row{
		{a, 0, "x", shared, tl(instance.StepRunning, 1000)},
		{a, 0, "y", shared, tl(instance.StepRunning, 1000)},
		{b, 1, "x", other, tl(instance.StepRunning, 1000)},
		{b, 1, "y", shared, tl(instance.StepRunning, 2000)},
		{b, 1, "z", other, nil},
	}
	var ops []*Op
	for i, r := range rows {
		w := StepWrite{Status: instance.StepRunning, Seq: 1, Retry: r.retry, Timeline: r.tl, Start: true}
		uuid := fmt.Sprintf("00000000-0000-0000-0001-%012d", i)
		ops = append(ops, InsertStepOp(ctx, r.ref, r.group, 5+2*int64(r.group), r.step, 1, uuid, "NoOp", w))
	}
	written, err := execBatch(ctx, db, ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		if !written[op] {
			t.Fatalf("insert %d not written", i)
		}
	}
	check := func(when string, want func(i int) (instance.RetryInfo, []instance.TimelineEvent)) {
		t.Helper()
		for i, r := range rows {
			var retry, timeline []byte
			if err := db.QueryRow(ctx, `SELECT retry, timeline FROM step_instance
                WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = 1`,
				r.ref.WorkflowID, r.ref.InstanceID, r.ref.RunID, r.step).Scan(&retry, &timeline); err != nil {
				t.Fatal(err)
			}
			var gotRetry instance.RetryInfo
			var gotTL []instance.TimelineEvent
			if err := json.Unmarshal(retry, &gotRetry); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(timeline, &gotTL); err != nil {
				t.Fatal(err)
			}
			wantRetry, wantTL := want(i)
			if gotRetry != wantRetry {
				t.Errorf("%s, row %d: retry %+v, want %+v", when, i, gotRetry, wantRetry)
			}
			if g, w := mustJSON(t, gotTL), mustJSON(t, orEmpty(wantTL)); g != w {
				t.Errorf("%s, row %d: timeline %s, want %s", when, i, g, w)
			}
		}
	}
	check("after the insert", func(i int) (instance.RetryInfo, []instance.TimelineEvent) { return rows[i].retry, rows[i].tl })

	// The updates swap the policies around and append timelines, two of
	// them the same.
	ended := []instance.RetryInfo{other, shared, shared, other, shared}
	appended := [][]instance.TimelineEvent{tl(instance.StepSucceeded, 3000), tl(instance.StepSucceeded, 3000),
		tl(instance.StepSucceeded, 4000), nil, tl(instance.StepSucceeded, 3000)}
	ops = ops[:0]
	for i, r := range rows {
		w := StepWrite{Status: instance.StepSucceeded, Seq: 2, Retry: ended[i], Timeline: appended[i], End: true}
		ops = append(ops, UpdateStepOp(ctx, r.ref, r.group, 5+2*int64(r.group), r.step, 1, w))
	}
	if written, err = execBatch(ctx, db, ops); err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		if !written[op] {
			t.Fatalf("update %d not written", i)
		}
	}
	check("after the update", func(i int) (instance.RetryInfo, []instance.TimelineEvent) {
		return ended[i], append(append([]instance.TimelineEvent{}, rows[i].tl...), appended[i]...)
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Runs ended in one statement append their own timelines to their own
// rows, whether they share one (sent once, updateInstancesSQL) or not.
func TestWriterAppendsEachRunsTimeline(t *testing.T) {
	db, _, a, b := writerFixture(t)
	ctx := context.Background()
	at := func(status instance.WorkflowStatus, reason string, ms int64) []instance.TimelineEvent {
		ev := instance.StatusChange(string(status), reason)
		for i := range ev {
			ev[i].Timestamp = ms
		}
		return ev
	}
	stored := func(ref run.Ref) string {
		t.Helper()
		var tl []byte
		if err := db.QueryRow(ctx, `SELECT timeline FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
			ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&tl); err != nil {
			t.Fatal(err)
		}
		var ev []instance.TimelineEvent
		if err := json.Unmarshal(tl, &ev); err != nil {
			t.Fatal(err)
		}
		return mustJSON(t, ev)
	}
	// First both pause with the same events, then each resumes with its own.
	steps := []struct {
		from, to instance.WorkflowStatus
		a, b     []instance.TimelineEvent
	}{
		{instance.WorkflowInProgress, instance.WorkflowPaused, at(instance.WorkflowPaused, "paused", 1000), at(instance.WorkflowPaused, "paused", 1000)},
		{instance.WorkflowPaused, instance.WorkflowInProgress, at(instance.WorkflowInProgress, "resumed by a", 2000), at(instance.WorkflowInProgress, "resumed by b", 2000)},
	}
	var wantA, wantB []instance.TimelineEvent
	for i, st := range steps {
		ops := []*Op{
			UpdateInstanceOp(ctx, a, 0, 5, InstanceUpdate{From: st.from, Status: st.to, Timeline: st.a}),
			UpdateInstanceOp(ctx, b, 1, 7, InstanceUpdate{From: st.from, Status: st.to, Timeline: st.b}),
		}
		written, err := execBatch(ctx, db, ops)
		if err != nil {
			t.Fatal(err)
		}
		if !written[ops[0]] || !written[ops[1]] {
			t.Fatalf("write %d: not both written: %v", i, written)
		}
		wantA, wantB = append(wantA, st.a...), append(wantB, st.b...)
		if got, want := stored(a), mustJSON(t, wantA); got != want {
			t.Errorf("write %d, run a: timeline %s, want %s", i, got, want)
		}
		if got, want := stored(b), mustJSON(t, wantB); got != want {
			t.Errorf("write %d, run b: timeline %s, want %s", i, got, want)
		}
	}
}
