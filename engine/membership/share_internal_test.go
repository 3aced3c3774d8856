package membership

import (
	"testing"
	"time"
)

func members(ids ...string) []Member {
	out := make([]Member, len(ids))
	for i, id := range ids {
		out[i] = Member{NodeID: id, ExpiresIn: 10 * time.Second}
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

// A draining node's share is 0 and the others divide every group among
// themselves; if every node drains (forced), they keep sharing them.
func TestFairShareLeavesDrainingNodesOut(t *testing.T) {
	t.Parallel()
	live := members("a", "b", "c")
	live[1].Draining = true
	want := map[string]int{"a": 8, "b": 0, "c": 8}
	for id, w := range want {
		if got := fairShare(16, live, id); got != w {
			t.Errorf("b draining: %s gets %d, want %d", id, got, w)
		}
	}
	if !isDraining(live, "b") || isDraining(live, "a") {
		t.Error("isDraining does not read the member's flag")
	}
	all := members("a", "b")
	all[0].Draining, all[1].Draining = true, true
	if a, b := fairShare(16, all, "a"), fairShare(16, all, "b"); a+b != 16 {
		t.Errorf("every node draining: shares %d + %d, want all 16 held", a, b)
	}
}

func TestNextExpiryOnlyWhenItComesBeforeTheHeartbeat(t *testing.T) {
	t.Parallel()
	live := []Member{{NodeID: "a", ExpiresIn: 300 * time.Millisecond}, {NodeID: "b", ExpiresIn: 9 * time.Second},
		{NodeID: "me", ExpiresIn: 10 * time.Millisecond}}
	if d, ok := nextExpiry(live, "me", 2*time.Second); !ok || d != 300*time.Millisecond {
		t.Errorf("next expiry = %s %v, want a's 300ms (its own never counts)", d, ok)
	}
	if _, ok := nextExpiry(live[1:], "me", 2*time.Second); ok {
		t.Error("an expiry after the next heartbeat needs no early round")
	}
}

// A lease is held, by the node's own clock, for half a lease after the
// heartbeat that renewed it was sent, and never once it ended or is being
// handed over.
func TestLeaseHeldForHalfALeaseByTheNodesClock(t *testing.T) {
	t.Parallel()
	sent := time.Now()
	l := newLease(t.Context(), Claim{ID: 3, Generation: 7}, 4*time.Second, sent)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {1999 * time.Millisecond, true}, {2 * time.Second, false}, {time.Hour, false}} {
		if got := l.Held(sent.Add(tc.at)); got != tc.want {
			t.Errorf("held %s after the heartbeat was sent = %v, want %v", tc.at, got, tc.want)
		}
	}
	l.renew(sent.Add(3 * time.Second))
	if !l.Held(sent.Add(4 * time.Second)) {
		t.Error("a renewal moves the deadline")
	}
	l.handingOver.Store(true)
	if l.Held(sent.Add(3 * time.Second)) {
		t.Error("held while being handed over")
	}
	l.handingOver.Store(false)
	l.cancel()
	if l.Held(sent.Add(3 * time.Second)) {
		t.Error("held after the lease ended")
	}
}

func TestInflightWaitsForTheLastCall(t *testing.T) {
	t.Parallel()
	var c inflight
	if !c.waitFor(time.Millisecond) {
		t.Fatal("no call in flight, yet the wait timed out")
	}
	c.Add(2)
	if c.waitFor(20 * time.Millisecond) {
		t.Fatal("two calls in flight, yet the wait returned")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.Add(-1)
		c.Add(-1)
	}()
	if !c.waitFor(5 * time.Second) {
		t.Fatal("the wait outlived the calls")
	}
	if c.count() != 0 {
		t.Fatalf("count = %d after both calls ended", c.count())
	}
}
