package membership

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/groupcount"
)

// Every heartbeat and lease watch loop must be gone once the nodes the
// tests started have stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

const (
	testGroups    = 16
	testLease     = 2 * time.Second
	testHeartbeat = 400 * time.Millisecond
)

// host is an in-memory Host: it records what the node tells it and
// reports the flows a test gives a group.
type host struct {
	mu      sync.Mutex
	leases  map[int32]*Lease // adopted and not lost
	lost    []Claim
	flows   map[int32]int
	claimed []int32
}

func newHost() *host { return &host{leases: map[int32]*Lease{}, flows: map[int32]int{}} }

func (h *host) Adopt(_ context.Context, l *Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leases[l.Group] = l
}

func (h *host) Lost(l *Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leases[l.Group] == l {
		delete(h.leases, l.Group)
	}
	h.lost = append(h.lost, l.claim())
}

func (h *host) Flows(id int32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.flows[id]
}

func (h *host) Claimed(_ context.Context, ids []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claimed = append(h.claimed, ids...)
}

// held are the groups the host runs, sorted.
func (h *host) held() []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]int32, 0, len(h.leases))
	for id := range h.leases {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (h *host) lease(id int32) *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leases[id]
}

func logger() *slog.Logger {
	if os.Getenv("MAESTRO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start starts a node with the test's lease, stopped when the test ends.
func start(t *testing.T, db *pgxpool.Pool, cfg Config) (*Node, *host) {
	t.Helper()
	cfg.Logger = logger()
	if cfg.GroupCount == 0 {
		cfg.GroupCount = testGroups
	}
	if cfg.Lease == 0 {
		cfg.Lease, cfg.HeartbeatInterval = testLease, testHeartbeat
	}
	h := newHost()
	n, err := New(db, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n, h
}

// owners counts the groups each node holds under a live lease.
func owners(t *testing.T, db *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT owner, count(*)::int FROM flow_group WHERE owner IS NOT NULL AND expires_at > now() GROUP BY owner`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var o string
		var c int
		if err := rows.Scan(&o, &c); err != nil {
			t.Fatal(err)
		}
		out[o] = c
	}
	return out
}

// waitOwners waits until the database shows exactly want and returns how
// long that took.
func waitOwners(t *testing.T, db *pgxpool.Pool, want map[string]int, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for {
		got := owners(t, db)
		if equal(got, want) {
			return time.Since(begin)
		}
		if time.Since(begin) > within {
			t.Fatalf("owners %v after %s, want %v", got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func generations(t *testing.T, db *pgxpool.Pool) map[int32]int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT group_id, generation FROM flow_group`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var id int32
		var gen int64
		if err := rows.Scan(&id, &gen); err != nil {
			t.Fatal(err)
		}
		out[id] = gen
	}
	return out
}

// Three live nodes split 16 groups 6/5/5, each group held by exactly one of
// them, in the database and in what their hosts run.
func TestLiveNodesSplitTheGroupsFairly(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	_, ha := start(t, db, Config{NodeID: "a"})
	if got := len(ha.held()); got != testGroups {
		t.Fatalf("a lone node runs %d groups after Start, want all %d", got, testGroups)
	}
	_, hb := start(t, db, Config{NodeID: "b"})
	_, hc := start(t, db, Config{NodeID: "c"})
	waitOwners(t, db, map[string]int{"a": 6, "b": 5, "c": 5}, 15*time.Second)
	// The hosts follow the database within a round.
	deadline := time.Now().Add(5 * time.Second)
	for {
		a, b, c := ha.held(), hb.held(), hc.held()
		all := slices.Concat(a, b, c)
		slices.Sort(all)
		if len(a) == 6 && len(b) == 5 && len(c) == 5 && len(slices.Compact(all)) == testGroups {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hosts run a=%v b=%v c=%v", a, b, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A node that stops lets its runtime calls return first, then releases its
// groups: the other node holds them all within a heartbeat or so, well
// before their leases would have run out.
func TestStoppedNodeHandsItsGroupsOverAtOnce(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	const lease = 6 * time.Second
	a, ha := start(t, db, Config{NodeID: "a", Lease: lease, HeartbeatInterval: 300 * time.Millisecond})
	start(t, db, Config{NodeID: "b", Lease: lease, HeartbeatInterval: 300 * time.Millisecond})
	waitOwners(t, db, map[string]int{"a": 8, "b": 8}, 15*time.Second)
	busy := ha.lease(ha.held()[0])
	busy.CallStarted()

	stopped := make(chan struct{})
	go func() {
		a.Stop()
		close(stopped)
	}()
	select {
	case <-busy.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end the leases")
	}
	time.Sleep(300 * time.Millisecond)
	if got := owners(t, db)["a"]; got != 8 {
		t.Fatalf("a released its groups (holds %d) while a runtime call was still running", got)
	}
	busy.CallDone()
	<-stopped
	if took := waitOwners(t, db, map[string]int{"b": testGroups}, lease); took > lease/2 {
		t.Errorf("b took the released groups %s after the stop, want within half a lease", took)
	}
	if held := ha.held(); len(held) != 0 {
		t.Errorf("a's host still runs %v after Stop", held)
	}
}

// A node that dies keeps its groups until their leases run out; then the
// survivor takes them over with a new generation.
func TestSurvivorTakesOverOnceTheLeasesRunOut(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	a, ha := start(t, db, Config{NodeID: "a"})
	_, hb := start(t, db, Config{NodeID: "b"})
	waitOwners(t, db, map[string]int{"a": 8, "b": 8}, 15*time.Second)
	aHeld := ha.held()
	before := generations(t, db)
	a.Abandon() // a crash: nothing released, the membership row stays
	died := time.Now()

	time.Sleep(testLease / 2)
	if got := owners(t, db)["a"]; got != 8 {
		t.Fatalf("a's groups were taken (a holds %d) before their leases ran out", got)
	}
	took := waitOwners(t, db, map[string]int{"b": testGroups}, 3*testLease)
	if since := time.Since(died); since < testLease-testHeartbeat {
		t.Errorf("b took a's groups %s after a died, before the lease of %s could run out", since, testLease)
	}
	t.Logf("takeover %s after a died", took+testLease/2)
	after := generations(t, db)
	for _, id := range aHeld {
		if after[id] <= before[id] {
			t.Errorf("group %d taken over at generation %d, not after a's %d", id, after[id], before[id])
		}
		if l := hb.lease(id); l == nil || l.Generation != after[id] {
			t.Errorf("b's host runs group %d as %+v, want generation %d", id, l, after[id])
		}
	}
}

// A node whose database stops answering gives its groups up by its own
// clock, half a lease after its last heartbeat was sent, before any answer
// (or the lease's end in the database) could tell it so.
func TestNodeFencesItselfByItsOwnClock(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	a, ha := start(t, pool, Config{NodeID: "a"})
	leases := make([]*Lease, 0, testGroups)
	for _, id := range ha.held() {
		leases = append(leases, ha.lease(id))
	}
	if len(leases) != testGroups || !leases[0].HeldNow() {
		t.Fatalf("a runs %d groups before the database goes", len(leases))
	}
	pool.Close()
	cut := time.Now()
	for _, l := range leases {
		select {
		case <-l.Context().Done():
		case <-time.After(testLease):
			t.Fatalf("group %d still held %s after the database went", l.Group, testLease)
		}
	}
	// The last heartbeat was sent at most a heartbeat before the cut; the
	// watch ticks every quarter heartbeat.
	if took := time.Since(cut); took > testLease/2+testHeartbeat/4+200*time.Millisecond {
		t.Errorf("groups given up %s after the database went, later than half a lease", took)
	}
	for _, l := range leases {
		if l.HeldNow() {
			t.Errorf("group %d still reports its lease held", l.Group)
		}
	}
	if got := a.Owned(); len(got) != 0 {
		t.Errorf("a still owns %v", got)
	}
	// The host hears of it right after the contexts ended.
	for deadline := time.Now().Add(time.Second); len(ha.held()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a's host still runs %v", ha.held())
		}
	}
}

// An engine restarted under its node id takes back at once, with a new
// generation, the groups its earlier process left leased.
func TestRestartedNodeTakesBackItsGroupsAtOnce(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	a, _ := start(t, db, Config{NodeID: "a", Lease: time.Minute})
	before := generations(t, db)
	a.Abandon()
	_, ha := start(t, db, Config{NodeID: "a", Lease: time.Minute})
	if got := len(ha.held()); got != testGroups { // Start returns once its first claims are adopted
		t.Fatalf("the restarted node runs %d groups after Start, want all %d at once", got, testGroups)
	}
	after := generations(t, db)
	for id, gen := range before {
		if after[id] != gen+1 {
			t.Errorf("group %d at generation %d, want %d", id, after[id], gen+1)
		}
	}
}

// A node over its share hands over the groups with the least work first.
func TestSurplusGoesLeastBusyFirst(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	a, ha := start(t, db, Config{NodeID: "a", GroupCount: 4})
	ha.mu.Lock()
	ha.flows[0], ha.flows[1] = 3, 1
	ha.mu.Unlock()
	ha.lease(2).CallStarted() // a call in flight weighs more than flows
	start(t, db, Config{NodeID: "b", GroupCount: 4})
	waitOwners(t, db, map[string]int{"a": 2, "b": 2}, 15*time.Second)
	if got := a.Owned(); !slices.Contains(got, 0) || !slices.Contains(got, 2) {
		t.Errorf("a kept %v, want the busiest groups 0 (3 flows) and 2 (a call)", got)
	}
	ha.lease(2).CallDone()
}

// A raised group count is followed at the next heartbeat round: the new
// groups are created and claimed.
func TestNodeFollowsARaisedGroupCount(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	ctx := context.Background()
	if _, err := groupcount.Agree(ctx, db, 4, "test"); err != nil {
		t.Fatal(err)
	}
	a, _ := start(t, db, Config{NodeID: "a", GroupCount: 4})
	waitOwners(t, db, map[string]int{"a": 4}, 5*time.Second)
	if _, err := groupcount.Raise(ctx, db, 8, "test"); err != nil {
		t.Fatal(err)
	}
	waitOwners(t, db, map[string]int{"a": 8}, 10*time.Second)
	if a.GroupCount() != 8 {
		t.Errorf("group count %d, want the raised 8", a.GroupCount())
	}
}
