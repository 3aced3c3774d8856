package flow

import (
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
)

func members(ids ...string) []flowstore.Member {
	out := make([]flowstore.Member, len(ids))
	for i, id := range ids {
		out[i] = flowstore.Member{NodeID: id, ExpiresIn: 10 * time.Second}
	}
	return out
}

func TestFairShareAddsUpAndFavoursTheFirstNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		groups int
		live   []string
		want   []int
	}{
		{16, []string{"a"}, []int{16}},
		{16, []string{"a", "b"}, []int{8, 8}},
		{16, []string{"a", "b", "c"}, []int{6, 5, 5}},
		{64, []string{"a", "b", "c", "d"}, []int{16, 16, 16, 16}},
		{4, []string{"a", "b", "c", "d", "e"}, []int{1, 1, 1, 1, 0}},
	} {
		live := members(tc.live...)
		total := 0
		for i, id := range tc.live {
			got := fairShare(tc.groups, live, id)
			if got != tc.want[i] {
				t.Errorf("%d groups over %v: %s gets %d, want %d", tc.groups, tc.live, id, got, tc.want[i])
			}
			total += got
		}
		if total != tc.groups {
			t.Errorf("%d groups over %v: shares add up to %d", tc.groups, tc.live, total)
		}
	}
	if got := fairShare(16, members("a", "b"), "z"); got != 16 {
		t.Errorf("a node missing from the membership gets %d, want all", got)
	}
}

func TestNextExpiryOnlyWhenItComesBeforeTheHeartbeat(t *testing.T) {
	t.Parallel()
	live := []flowstore.Member{{NodeID: "a", ExpiresIn: 300 * time.Millisecond}, {NodeID: "b", ExpiresIn: 9 * time.Second},
		{NodeID: "me", ExpiresIn: 10 * time.Millisecond}}
	if d, ok := nextExpiry(live, "me", 2*time.Second); !ok || d != 300*time.Millisecond {
		t.Errorf("next expiry = %s %v, want a's 300ms (its own never counts)", d, ok)
	}
	if _, ok := nextExpiry(live[1:], "me", 2*time.Second); ok {
		t.Error("an expiry after the next heartbeat needs no early round")
	}
}
