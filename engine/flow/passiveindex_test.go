package flow

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/maestro-aws/maestro/engine/run"
)

// The passive index hands runs back in wake-time order, at most a batch at
// a time, only once they are due; a run added again takes its new time;
// taking a run removes it from both views.
func TestPassiveIndexOrder(t *testing.T) {
	var x passiveIndex
	base := time.Now()
	ref := func(i int64) run.Ref { return run.Ref{WorkflowID: "wf", InstanceID: i, RunID: 1} }
	for i, off := range []int{50, 10, 40, 20, 30} {
		x.add(ref(int64(i)), base.Add(time.Duration(off)*time.Second))
	}
	x.add(ref(2), base.Add(5*time.Second)) // moved to the front
	if !x.take(ref(4)) || x.take(ref(4)) || x.has(ref(4)) {
		t.Fatal("take: want the run removed once")
	}
	if got := x.popDue(base, 10); len(got) != 0 {
		t.Fatalf("popDue before any is due: %v", got)
	}
	got := x.popDue(base.Add(25*time.Second), 2)
	if want := []run.Ref{ref(2), ref(1)}; !slices.Equal(got, want) {
		t.Fatalf("first batch %v, want %v", got, want)
	}
	got = x.popDue(base.Add(time.Hour), 10)
	if want := []run.Ref{ref(3), ref(0)}; !slices.Equal(got, want) {
		t.Fatalf("rest %v, want %v", got, want)
	}
	if x.len() != 0 {
		t.Fatalf("%d runs left", x.len())
	}
	if _, ok := x.next(); ok {
		t.Fatal("next on an empty index")
	}
}

// Runs of one workflow share the index's copy of its id.
func TestPassiveIndexInternsWorkflowIDs(t *testing.T) {
	var x passiveIndex
	a := run.Ref{WorkflowID: string([]byte("wf-shared")), InstanceID: 1, RunID: 1}
	b := run.Ref{WorkflowID: string([]byte("wf-shared")), InstanceID: 2, RunID: 1}
	x.add(a, time.Now())
	x.add(b, time.Now())
	ea, eb := x.byRef[a], x.byRef[b]
	if ea == nil || eb == nil {
		t.Fatal("runs not found by key")
	}
	if unsafeData(ea.ref.WorkflowID) != unsafeData(eb.ref.WorkflowID) {
		t.Error("the two runs keep their own copies of the workflow id")
	}
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
