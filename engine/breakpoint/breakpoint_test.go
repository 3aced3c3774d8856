package breakpoint_test

import (
	"context"
	"errors"
	"testing"

	"github.com/maestro-aws/maestro/engine/breakpoint"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// The paths the engine is not needed for: set, set again, list, the
// not-found answers of delete and resume. (engine/api's breakpoint tests
// pause and resume real attempts through the engine.)
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Pool(t)
	st := breakpoint.NewStore(db)
	d, err := workflow.DecodeJSON([]byte(`{"workflow":{"id":"wf","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := definition.NewStore(db).Create(ctx, d, "alice"); err != nil {
		t.Fatal(err)
	}

	if _, _, err := st.DeleteAll(ctx, "wf", "s", "alice"); !errors.Is(err, breakpoint.ErrNotFound) ||
		err.Error() != "no breakpoint on step s of workflow wf: not found" {
		t.Fatalf("DeleteAll without breakpoints: %v", err)
	}
	ref := run.Ref{WorkflowID: "wf", InstanceID: 1, RunID: 1}
	if err := st.Resume(ctx, ref, "s", 1, "alice"); !errors.Is(err, breakpoint.ErrNotFound) {
		t.Fatalf("Resume of an attempt not paused: %v", err)
	}

	two := int64(2)
	a, err := st.Create(ctx, breakpoint.Spec{WorkflowID: "wf", StepID: "s"}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.Create(ctx, breakpoint.Spec{WorkflowID: "wf", StepID: "s"}, "bob")
	if err != nil || again.BreakpointID != a.BreakpointID || again.CreatedBy != "alice" {
		t.Fatalf("setting the same breakpoint again = %+v %v, want %+v", again, err, a)
	}
	b, err := st.Create(ctx, breakpoint.Spec{WorkflowID: "wf", StepID: "s", InstanceID: &two}, "bob")
	if err != nil || b.BreakpointID == a.BreakpointID || b.InstanceID == nil || *b.InstanceID != 2 {
		t.Fatalf("a breakpoint of instance 2 = %+v %v", b, err)
	}
	if bs, err := st.List(ctx, "wf", "s"); err != nil || len(bs) != 2 || bs[0].BreakpointID != a.BreakpointID {
		t.Fatalf("List = %+v %v", bs, err)
	}
	if ps, err := st.Paused(ctx, "wf", "s"); err != nil || ps == nil || len(ps) != 0 {
		t.Fatalf("Paused = %#v %v, want an empty list", ps, err)
	}
	if deleted, resumed, err := st.DeleteAll(ctx, "wf", "s", "alice"); err != nil || deleted != 2 || resumed != 0 {
		t.Fatalf("DeleteAll = %d %d %v, want 2 0", deleted, resumed, err)
	}
	if bs, err := st.List(ctx, "wf", "s"); err != nil || len(bs) != 0 {
		t.Fatalf("List after DeleteAll = %+v %v", bs, err)
	}
}
