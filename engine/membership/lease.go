package membership

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Lease is one flow group this node holds at a generation. Its context
// ends when the node stops acting for the group (lost, expired by the
// node's own clock, released, or the node stopping); everything the host
// runs for the group runs under it.
type Lease struct {
	// Group is the flow group's id.
	Group int32
	// Generation is the group's generation under this lease: every write
	// for the group carries it, and a write at an older one is refused.
	Generation int64

	ctx    context.Context
	cancel context.CancelFunc
	// margin is half the lease: the node stops acting that long after its
	// last successful heartbeat was sent.
	margin time.Duration

	mu      sync.Mutex
	renewed time.Time // when the last successful heartbeat (or the claim) was sent
	// handingOver is set while the node gives the group up to another
	// (share.go): no step work starts, the work under way finishes.
	handingOver atomic.Bool
	// calls counts runtime calls in flight for the group. A lost group is
	// not adopted again on this node until they have returned, so an
	// attempt never has two calls running here.
	calls inflight
}

func newLease(parent context.Context, c Claim, lease time.Duration, claimedAt time.Time) *Lease {
	ctx, cancel := context.WithCancel(parent)
	return &Lease{Group: c.ID, Generation: c.Generation, ctx: ctx, cancel: cancel, margin: lease / 2, renewed: claimedAt}
}

// Context ends when the node stops acting for the group.
func (l *Lease) Context() context.Context { return l.ctx }

// HandingOver reports whether the node is giving the group up to another
// node: no new work may start in it.
func (l *Lease) HandingOver() bool { return l.handingOver.Load() }

// Held reports whether this node may still act for the group at now, by
// its own monotonic clock: the lease is live here, not being handed over,
// and was renewed within the last half lease, the point at which the node
// gives a group up when heartbeats fail. Before starting a side effect (an
// HTTP call, a Lambda invocation, an ECS task) a step checks it, so that a
// paused or partitioned node whose lease may have passed to another node
// starts nothing: the new owner could be starting the same effect.
func (l *Lease) Held(now time.Time) bool {
	if l.ctx.Err() != nil || l.handingOver.Load() {
		return false
	}
	return now.Sub(l.renewedAt()) < l.margin
}

// HeldNow is Held at this moment (stepruntime.Attempt.LeaseHeld).
func (l *Lease) HeldNow() bool { return l.Held(time.Now()) }

// CallStarted counts a runtime call for the group that has started;
// CallDone ends it. A lease released or lost waits (up to half a lease)
// for its calls before the group may run anywhere else or here again.
func (l *Lease) CallStarted() { l.calls.Add(1) }

// CallDone ends a call counted by CallStarted.
func (l *Lease) CallDone() { l.calls.Add(-1) }

// Calls is how many runtime calls for the group are in flight.
func (l *Lease) Calls() int { return l.calls.count() }

func (l *Lease) renewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

func (l *Lease) renew(t time.Time) {
	l.mu.Lock()
	l.renewed = t
	l.mu.Unlock()
}

func (l *Lease) claim() Claim { return Claim{ID: l.Group, Generation: l.Generation} }

// inflight counts calls in flight. Unlike sync.WaitGroup it allows Add
// from zero while another goroutine waits (an actor of a lost group may
// still start a call while the group is drained): wait returns once the
// count is zero.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero; nil while nobody waits
}

// Add changes the count by d.
func (c *inflight) Add(d int) {
	c.mu.Lock()
	c.n += d
	if c.n <= 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// count is how many calls are in flight.
func (c *inflight) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// waitFor waits, up to d, until no call is in flight; false when calls
// were still in flight.
func (c *inflight) waitFor(d time.Duration) bool {
	c.mu.Lock()
	if c.n <= 0 {
		c.mu.Unlock()
		return true
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
