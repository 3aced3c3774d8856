package flow

import (
	"container/heap"
	"time"

	"github.com/maestro-aws/maestro/engine/run"
)

// passiveIndex is what a group keeps of its passivated runs
// (passivate.go): each run's key and when it is due at the latest, in a
// map by key (a wake-up for a run finds it) and in a min-heap by wake time
// (one timer, armed for the earliest, brings runs back when they are due).
// It holds a few dozen bytes per run; workflow ids are interned, since
// the runs of one workflow share theirs. The group's mutex guards it.
type passiveIndex struct {
	byRef map[run.Ref]*passiveEntry
	due   passiveHeap
	names map[string]string
	// timer fires at timerAt (unix nanoseconds), the earliest wake time
	// when it was armed; firing is set while due runs are being brought
	// back, which re-arms the timer when it is done.
	timer   *time.Timer
	timerAt int64
	firing  bool
	// workers bounds the activations the timer has in flight
	// (wakeWorkers).
	workers chan struct{}
}

// passiveEntry is one passivated run.
type passiveEntry struct {
	ref  run.Ref
	wake int64 // unix nanoseconds
	pos  int
}

// add records a run as passivated, due at wake; a run already there takes
// the new time.
func (x *passiveIndex) add(ref run.Ref, wake time.Time) {
	if x.byRef == nil {
		x.byRef, x.names = map[run.Ref]*passiveEntry{}, map[string]string{}
	}
	if e := x.byRef[ref]; e != nil {
		e.wake = wake.UnixNano()
		heap.Fix(&x.due, e.pos)
		return
	}
	name, ok := x.names[ref.WorkflowID]
	if !ok {
		name = ref.WorkflowID
		x.names[name] = name
	}
	ref.WorkflowID = name
	e := &passiveEntry{ref: ref, wake: wake.UnixNano()}
	x.byRef[ref] = e
	heap.Push(&x.due, e)
}

// take removes a run, reporting whether it was there.
func (x *passiveIndex) take(ref run.Ref) bool {
	e := x.byRef[ref]
	if e == nil {
		return false
	}
	delete(x.byRef, ref)
	heap.Remove(&x.due, e.pos)
	return true
}

// has reports whether the run is passivated here.
func (x *passiveIndex) has(ref run.Ref) bool { return x.byRef[ref] != nil }

// popDue removes and returns up to limit runs due at now.
func (x *passiveIndex) popDue(now time.Time, limit int) []run.Ref {
	var out []run.Ref
	for len(x.due) > 0 && len(out) < limit && x.due[0].wake <= now.UnixNano() {
		e := heap.Pop(&x.due).(*passiveEntry)
		delete(x.byRef, e.ref)
		out = append(out, e.ref)
	}
	return out
}

// next is the earliest wake time (ok false when empty).
func (x *passiveIndex) next() (int64, bool) {
	if len(x.due) == 0 {
		return 0, false
	}
	return x.due[0].wake, true
}

func (x *passiveIndex) len() int { return len(x.byRef) }

// passiveHeap orders entries by wake time.
type passiveHeap []*passiveEntry

func (h passiveHeap) Len() int           { return len(h) }
func (h passiveHeap) Less(i, j int) bool { return h[i].wake < h[j].wake }
func (h passiveHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *passiveHeap) Push(v any) {
	e := v.(*passiveEntry)
	e.pos = len(*h)
	*h = append(*h, e)
}
func (h *passiveHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// passivated records a run of the group as passivated, due at wake, and
// re-arms the group's wake timer.
func (g *group) passivated(ref run.Ref, wake time.Time) {
	g.mu.Lock()
	g.passive.add(ref, wake)
	g.armPassive()
	g.mu.Unlock()
}

// takePassive removes a run from the group's passivated runs, reporting
// whether it was one; the caller brings it back (Engine.activate), which
// ends with activated.
func (g *group) takePassive(ref run.Ref) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.passive.take(ref) {
		return false
	}
	g.markActivating(ref)
	return true
}

// markActivating records that a run taken from the index is being brought
// back. g.mu is held.
func (g *group) markActivating(ref run.Ref) {
	if g.activating == nil {
		g.activating = map[run.Ref]chan struct{}{}
	}
	if g.activating[ref] == nil {
		g.activating[ref] = make(chan struct{})
	}
}

// activated records that bringing a run back is over (done or failed).
func (g *group) activated(ref run.Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch := g.activating[ref]; ch != nil {
		close(ch)
		delete(g.activating, ref)
	}
}

// activation returns the channel closed once the run's activation in
// progress is over; nil when none is.
func (g *group) activation(ref run.Ref) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch := g.activating[ref]; ch != nil {
		return ch
	}
	return nil
}

// passiveCount is how many passivated runs the group holds.
func (g *group) passiveCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passive.len()
}

// armPassive arms the wake timer for the earliest passivated run. g.mu is
// held.
func (g *group) armPassive() {
	x := &g.passive
	if x.firing {
		return // the firing loop re-arms when it is done
	}
	at, ok := x.next()
	if !ok {
		if x.timer != nil {
			x.timer.Stop()
			x.timerAt = 0
		}
		return
	}
	if x.timer != nil && x.timerAt == at {
		return
	}
	d := time.Until(time.Unix(0, at).Add(-wakeLead))
	x.timerAt = at
	if x.timer == nil {
		x.timer = time.AfterFunc(d, g.firePassive)
		return
	}
	x.timer.Reset(d)
}

// stopPassive stops the group's wake timer (the group is lost: its next
// owner enumerates the runs from the database).
func (g *group) stopPassive() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.passive.timer != nil {
		g.passive.timer.Stop()
	}
}

// wakeWorkers is how many due runs of a group are brought back at once.
const wakeWorkers = 16

// wakeLead is how long before its wake time a passivated run is brought
// back. Its activation (a round trip) and its rebuild then happen before
// it is due, and what decides when it goes on is its own attempt's timer
// (a sleep's end, the next poll, a timeout), rebuilt from the stored
// state, as for a run held in memory: a run comes back on time even when
// the activation queues behind other work (docs/performance.md). An
// attempt brought back early looks once more and waits the rest.
const wakeLead = 50 * time.Millisecond

// firePassive brings back every passivated run that is due (within
// wakeLead), each as soon as one of the group's wakeWorkers is free, then
// re-arms the timer. It does not wait for the activations it started: a
// run due while they are in flight is taken as soon as a worker frees, or
// by the timer once the loop is over.
func (g *group) firePassive() {
	e := g.eng
	g.mu.Lock()
	if g.passive.firing || g.ctx.Err() != nil || e.ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	g.passive.firing = true
	g.passive.timerAt = 0
	if g.passive.workers == nil {
		g.passive.workers = make(chan struct{}, wakeWorkers)
	}
	workers := g.passive.workers
	g.mu.Unlock()
	e.wg.Add(1)
	defer e.wg.Done()
	for {
		held := false
		select {
		case workers <- struct{}{}:
			held = true
		case <-g.ctx.Done():
		}
		g.mu.Lock()
		var refs []run.Ref
		if held && g.ctx.Err() == nil && e.ctx.Err() == nil {
			refs = g.passive.popDue(time.Now().Add(wakeLead), 1)
		}
		if len(refs) == 0 {
			g.passive.firing = false
			if g.ctx.Err() == nil {
				g.armPassive()
			}
			g.mu.Unlock()
			if held {
				<-workers
			}
			return
		}
		ref := refs[0]
		g.markActivating(ref)
		g.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() { <-workers }()
			_ = e.activate(g, ref, "due")
		}()
	}
}
