package tagpermit_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/tagpermit"
)

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := tagpermit.NewStore(dbtest.Pool(t))

	if _, err := st.Get(ctx, "gpu"); !errors.Is(err, tagpermit.ErrNotFound) || err.Error() != `tag permit "gpu" not found: not found` {
		t.Fatalf("Get of a missing permit: %v", err)
	}
	if err := st.Delete(ctx, "gpu"); !errors.Is(err, tagpermit.ErrNotFound) {
		t.Fatalf("Delete of a missing permit: %v", err)
	}
	if _, ok, err := st.Owner(ctx, "gpu"); ok || err != nil {
		t.Fatalf("Owner of a missing permit: %v %v", ok, err)
	}

	p, err := st.Upsert(ctx, "gpu", 2, map[string]json.RawMessage{"source": json.RawMessage(`"test"`)}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if p.Tag != "gpu" || p.MaxAllowed != 2 || p.CreatedBy != "alice" || timelineLen(t, p.Timeline) != 1 {
		t.Fatalf("created %+v", p)
	}
	for i := 0; i < tagpermit.TimelineLimit+3; i++ {
		if p, err = st.Upsert(ctx, "gpu", 1, nil, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	if p.MaxAllowed != 1 || p.ModifiedBy != "bob" || p.CreatedBy != "alice" || timelineLen(t, p.Timeline) != tagpermit.TimelineLimit {
		t.Fatalf("updated %+v (timeline %d events)", p, timelineLen(t, p.Timeline))
	}
	if owner, ok, err := st.Owner(ctx, "gpu"); !ok || err != nil || owner != "alice" {
		t.Fatalf("Owner = %q %v %v, want alice", owner, ok, err)
	}
	if all, err := st.List(ctx); err != nil || len(all) != 1 || all[0].Tag != "gpu" {
		t.Fatalf("List = %+v %v", all, err)
	}
	if err := st.Delete(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	if all, err := st.List(ctx); err != nil || all == nil || len(all) != 0 {
		t.Fatalf("List after delete = %#v %v, want an empty list", all, err)
	}
}

func timelineLen(t *testing.T, raw json.RawMessage) int {
	t.Helper()
	var events []json.RawMessage
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatalf("timeline %s: %v", raw, err)
	}
	return len(events)
}
