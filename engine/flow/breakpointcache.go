package flow

import (
	"context"
	"sync"
)

// BreakpointChannel is the pg_notify channel on which the database announces
// a change to a workflow's breakpoints (migration 00005).
const BreakpointChannel = "maestro_breakpoint"

// breakpointCache remembers, per pushed workflow, whether it has any
// breakpoint, so that steps of workflows without one (nearly all) skip the
// breakpoint query. Inline runs (foreach and while iterations) share the
// entry of their root workflow (instance.RootWorkflowID): the database announces
// changes by the breakpoint's workflow id, which is always a pushed one.
// It is trusted only while the queue listener receives the database's
// change notifications: a change forgets the workflow, and a lost
// connection forgets everything. A breakpoint thus takes effect once
// its notification arrives, a few milliseconds after it is set.
type breakpointCache struct {
	mu        sync.Mutex
	listening bool
	version   uint64
	has       map[string]bool // workflow id -> has breakpoints; absent: unknown
}

func newBreakpointCache() *breakpointCache {
	return &breakpointCache{has: map[string]bool{}}
}

// mayHave reports whether a step of the workflow must check breakpoints.
func (c *breakpointCache) mayHave(workflowID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	has, known := c.has[workflowID]
	return !c.listening || !known || has
}

// known reports whether the workflow's state is cached.
func (c *breakpointCache) known(workflowID string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.has[workflowID]
	return c.version, ok || !c.listening
}

// learn records what a query found, unless a notification arrived (or the
// listener stopped) since version was read.
func (c *breakpointCache) learn(workflowID string, version uint64, has bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listening && c.version == version {
		c.has[workflowID] = has
	}
}

// changed forgets a workflow whose breakpoints changed.
func (c *breakpointCache) changed(workflowID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.has, workflowID)
	c.version++
}

// setListening forgets everything when notifications start or stop.
func (c *breakpointCache) setListening(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listening = on
	clear(c.has)
	c.version++
}

// refreshBreakpoints caches whether the workflow has breakpoints, if that
// is not known yet.
func (e *Engine) refreshBreakpoints(ctx context.Context, workflowID string) error {
	version, known := e.breakpoints.known(workflowID)
	if known {
		return nil
	}
	has, err := e.store.HasBreakpoints(ctx, workflowID)
	if err != nil {
		return err
	}
	e.breakpoints.learn(workflowID, version, has)
	return nil
}
