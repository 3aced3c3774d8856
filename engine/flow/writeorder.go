package flow

import (
	"context"
	"errors"
	"sync"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
)

// The order of a run's writes. Every write of a run goes to the node's
// writer ordered after the run's previous write (flowstore.Op.After), so a
// run's writes commit in the order they were made: in one transaction or
// in later ones, never before a write made earlier. That lets an attempt's
// terminal write be written behind (writeBehind): the flow acts on it in
// memory at once (it starts the next step) while the write is in flight,
// and nothing outside the engine learns of it, or of anything that follows
// it, before it is durable:
//
//   - a later write is durable only once this one is (the order), and a
//     step's side effect waits for its own write (STARTING, the recorded
//     intent), so it waits for this one too;
//   - the run's end is a write of the run, waited for, so a parent, a
//     waiting API caller or the next queued run learns of the end only
//     once every step write before it is durable;
//   - events and output signals are rows of the same statement as the
//     state they announce.
//
// A write behind that fails drops the flow from memory (flowLost), as a
// failed write always has, and every later write of the run fails
// unwritten (flowstore.ErrPredecessorFailed): the database holds a prefix
// of the run's writes, and the flow is rebuilt from it, here or on the
// group's next owner. A write behind is given up only with its group (the lease's
// context: lost, or the node dying), not with its flow, and a flow that
// ends waits for its last write (awaitWrites) before its group stops
// counting it: a group handed over carries its writes to the next owner.
// A node that dies with writes behind in flight leaves a prefix too: the
// attempts whose terminal writes did not commit run again, exactly as
// after a crash just before those writes (TestCrashWithWritesBehindInFlight).

// writeOrder is a run's last write handed to the writer.
type writeOrder struct {
	mu   sync.Mutex
	last *flowstore.Op
}

// submit hands op to the node's writer, ordered after the run's previous
// write (or its start, when it has none).
func (f *flowActor) submit(op *flowstore.Op) {
	f.order.mu.Lock()
	defer f.order.mu.Unlock()
	prev := f.order.last
	if err := prev.Failed(); prev == nil || (err != nil && !prev.IsBehind() && !errors.Is(err, flowstore.ErrPredecessorFailed)) {
		// A write waited for failed on its own: its writer was told and
		// may write again. Every write before it is finished (it would
		// have failed with them), so nothing is left to order after but
		// the start. A write behind that failed, or one failed by a write
		// before it, stays last: the flow is being dropped, and every
		// write it still makes fails unwritten (ErrPredecessorFailed), so
		// that nothing is written past the one that failed.
		prev = f.start
	}
	op.After(prev)
	f.order.last = op
	f.eng.writer.Submit(op)
}

// write submits op in the run's order and waits for its outcome.
func (f *flowActor) write(ctx context.Context, op *flowstore.Op) error {
	f.submit(op)
	return op.Wait(ctx)
}

// lastWrite is the run's last write handed to the writer, nil for none.
func (f *flowActor) lastWrite() *flowstore.Op {
	f.order.mu.Lock()
	defer f.order.mu.Unlock()
	return f.order.last
}

// writesInFlight reports whether a write of the run is not finished yet.
// A run parks only with every write done (passivate.go): it is brought
// back from the database, which must then hold all it did.
func (f *flowActor) writesInFlight() bool {
	last := f.lastWrite()
	if last == nil {
		return false
	}
	select {
	case <-last.Done():
		return false
	default:
		return true
	}
}

// awaitWrites waits, as the flow ends, until its last write is finished
// (so every write before it is), or the group is gone: a flow the group
// still counts is not adopted again, here or elsewhere, while its writes
// are in flight.
func (f *flowActor) awaitWrites() {
	last := f.lastWrite()
	if last == nil {
		return
	}
	select {
	case <-last.Done():
	case <-f.grp.ctx.Done():
	}
}
