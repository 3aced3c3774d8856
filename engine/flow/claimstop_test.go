package flow_test

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/flow"
)

// An engine stopped while the answer to its group claim is still on its way
// releases the groups the database gave it, so that another node takes them
// at once rather than when their lease runs out.
//
// The claim's answer is held back on the connection (the statement has
// committed: the groups are the node's in the database). Stop is called
// meanwhile, and the answer is let through 200 ms later. Before the fix the
// cancelled claim gave up on its answer, the engine never learned which
// groups it held, and Stop left them owned until their lease ran out (the
// failure TestEnginesShareGroupsAndTakeOverAtOnce hit now and then in CI).
func TestEngineStoppedDuringItsClaimReleasesWhatItClaimed(t *testing.T) {
	e := newEnv(t)
	const lease = 10 * time.Second
	e.engine(flow.Config{NodeID: "node-a", Lease: lease})
	e.waitOwners(map[string]int{"node-a": testGroups}, 30*time.Second)

	stall := &claimStall{free: func() int {
		var n int
		_ = e.pool.QueryRow(context.Background(), `SELECT count(*) FROM flow_group WHERE owner IS NULL`).Scan(&n)
		return n
	}}
	cfg, err := pgxpool.ParseConfig(e.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, changed: make(chan struct{})}, nil
	}
	cfg.ConnConfig.Tracer = stall
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := flow.New(pool, flow.Config{NodeID: "node-b", Lease: lease, GroupCount: testGroups, Logger: testLogger(),
		Runtimes: testRuntimes()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil { // claims nothing: node-a holds every group
		t.Fatal(err)
	}
	stall.armed.Store(true) // the answer to the claim that finds free groups is held back
	// node-a hands over half the groups; node-b's claim of them commits.
	e.waitOwners(map[string]int{"node-a": testGroups / 2, "node-b": testGroups / 2}, 30*time.Second)
	conn := stall.stalledConn()
	if conn == nil {
		t.Fatal("node-b claimed its groups without the claim's answer being held back")
	}

	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	time.Sleep(200 * time.Millisecond)
	conn.release()
	select {
	case <-stopped:
	case <-time.After(lease):
		t.Fatal("Stop did not return")
	}
	var owned int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM flow_group WHERE owner = 'node-b'`).Scan(&owned); err != nil {
		t.Fatal(err)
	}
	if owned != 0 {
		t.Fatalf("node-b stopped and still owns %d groups: they wait for their lease to run out", owned)
	}
}

// claimStall is a query tracer that, once armed, holds back the answer to
// the first group claim that has free groups to take, on the connection
// that sends it. (Groups, once released, stay free until that claim.)
type claimStall struct {
	free  func() int // how many groups are free now
	armed atomic.Bool
	mu    sync.Mutex
	conn  *stallConn
}

func (s *claimStall) TraceQueryStart(ctx context.Context, c *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(data.SQL, "UPDATE flow_group SET owner = $1") || !s.armed.Load() || s.free() == 0 {
		return ctx
	}
	if s.armed.CompareAndSwap(true, false) {
		sc := c.PgConn().Conn().(*stallConn)
		sc.hold()
		s.mu.Lock()
		s.conn = sc
		s.mu.Unlock()
	}
	return ctx
}

func (s *claimStall) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *claimStall) stalledConn() *stallConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// stallConn is a connection whose reads can be held back. A held read
// still honours the read deadline, as pgx uses it to cancel a read when
// the query's context ends.
type stallConn struct {
	net.Conn
	mu       sync.Mutex
	held     bool
	deadline time.Time
	changed  chan struct{} // closed and replaced on every change
}

func (c *stallConn) hold()    { c.update(func() { c.held = true }) }
func (c *stallConn) release() { c.update(func() { c.held = false }) }

func (c *stallConn) update(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *stallConn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if !c.held {
			c.mu.Unlock()
			return c.Conn.Read(p)
		}
		if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		changed, deadline := c.changed, c.deadline
		c.mu.Unlock()
		wait := time.Hour
		if !deadline.IsZero() {
			wait = time.Until(deadline)
		}
		timer := time.NewTimer(wait)
		select {
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.update(func() { c.deadline = t })
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetReadDeadline(t time.Time) error {
	c.update(func() { c.deadline = t })
	return c.Conn.SetReadDeadline(t)
}
