package run

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A round of Create is inserted by insertRunsSQL in chunks of at most
// roundChunk runs. A round that fits one chunk (a start, a restart, a
// child, a small batch) is built and sent as before, in this goroutine. A
// bigger one (a burst of time triggers, a backfill's batch, a signal's
// fan-out) is a pipeline: a goroutine builds the next chunk's columns (the
// runs' uuids, timelines, admission checks) while PostgreSQL executes the
// statement of the one before, so that the Go side of a batch and its
// statements' execution overlap instead of adding up. The chunks are
// statements of the caller's transaction, sent in order, so the batch
// stays atomic, and each statement sees the runs the earlier ones
// inserted: a run's admission (insertRunsSQL's room check) counts the
// live and queued runs of its workflow that an earlier chunk created as
// stored runs, exactly as the k-th run of a workflow counts the k before
// it within one statement.

// roundChunk is the most runs one INSERT of a round carries. 250 keeps
// four statements in a batch of 1,000 (BenchmarkBatchStarts measured 125,
// 250 and 500; docs/performance.md).
var roundChunk = 250

// chunk is one INSERT's worth of a round: the runs' indexes and their
// columns, built ahead of the statement.
type chunk struct {
	idx     []int
	c       columns
	dropped []int
	err     error
}

// createRound admits and inserts one round of runs.
func createRound(ctx context.Context, tx Tx, runs []New, round []int, props map[string][]byte, opt Options, out []Created) error {
	adm, err := admit(ctx, tx, runs, round, props)
	if err != nil {
		return err
	}
	var dropped []int
	if len(round) <= roundChunk {
		ch := prepareChunk(runs, round, adm, out)
		if ch.err != nil {
			return ch.err
		}
		if err := insertChunk(ctx, tx, runs, ch, opt, out); err != nil {
			return err
		}
		dropped = ch.dropped
	} else {
		if dropped, err = insertChunks(ctx, tx, runs, round, adm, opt, out); err != nil {
			return err
		}
	}
	if len(dropped) > 0 {
		// The dropped runs end as they are created: their events.
		var evs []event.Record
		for _, i := range dropped {
			if out[i].Inserted {
				evs = append(evs, droppedEvent(&runs[i], out[i]))
			}
		}
		if err := event.Insert(ctx, tx, evs...); err != nil {
			return err
		}
	}
	return nil
}

// insertChunks inserts a round bigger than one chunk: a goroutine
// prepares the chunks in order, one ahead of the statement in flight,
// and this one sends them. It returns the dropped runs of every chunk.
// The preparing goroutine writes only its chunk's entries of out, which
// this goroutine reads only once it has received the chunk; it has ended
// when insertChunks returns.
func insertChunks(ctx context.Context, tx Tx, runs []New, round []int, adm admission, opt Options, out []Created) ([]int, error) {
	ready := make(chan *chunk, 1)
	stop := make(chan struct{})
	go func() {
		defer close(ready)
		for part := range slices.Chunk(round, roundChunk) {
			ch := prepareChunk(runs, part, adm, out)
			failed := ch.err != nil // ch is the receiver's once sent
			select {
			case ready <- ch:
			case <-stop:
				return
			}
			if failed {
				return
			}
		}
	}()
	finish := func() {
		close(stop)
		for range ready { // until the goroutine has ended
		}
	}
	var dropped []int
	for ch := range ready {
		if ch.err == nil {
			ch.err = insertChunk(ctx, tx, runs, ch, opt, out)
		}
		if ch.err != nil {
			finish()
			return nil, ch.err
		}
		dropped = append(dropped, ch.dropped...)
	}
	return dropped, nil
}

// prepareChunk builds the columns of the runs idx of a round: it gives
// each run its group, uuid and status in out and decides which runs its
// strategy drops (adm) or checks for room. It touches no connection.
func prepareChunk(runs []New, idx []int, adm admission, out []Created) *chunk {
	ch := &chunk{idx: idx}
	c := &ch.c
	c.init(len(idx))
	defs := map[*byte]int32{}
	// Runs that share their timeline (a batch's runs of one trigger) or
	// their queued event (one per strategy) share its JSON.
	timelines := map[timelineKey][]byte{}
	queuedEvents := map[Strategy][]byte{}
	for _, i := range idx {
		r := &runs[i]
		res := &out[i]
		res.GroupID = instance.GroupFor(r.Ref.WorkflowID, r.Ref.InstanceID, r.GroupCount)
		var id uuid.UUID
		if r.UUID == "" {
			id = uuid.New()
			res.UUID = id.String()
		} else {
			var err error
			if id, err = uuid.Parse(r.UUID); err != nil {
				ch.err = fmt.Errorf("the uuid of %s: %w", res.Ref, err)
				return ch
			}
			res.UUID = r.UUID
		}
		res.Status = instance.WorkflowCreated
		timeline := r.Timeline
		var queuedEvent []byte
		limit, strict := noLimit, false
		if r.Admission == ByStrategy {
			s := adm.strategies[r.Ref.WorkflowID]
			if reason, drop := adm.drops[r.Ref.WorkflowID]; drop {
				res.Status = instance.WorkflowStopped
				timeline = append(slices.Clone(r.Timeline), instance.StatusChange(string(instance.WorkflowStopped), reason)...)
				ch.dropped = append(ch.dropped, i)
			} else {
				limit, strict = s.Concurrency, s.Rule == workflow.RunStrategyStrictSequential
				var ok bool
				if queuedEvent, ok = queuedEvents[s]; !ok {
					ev := instance.LogEvent("INFO", fmt.Sprintf("queued by the %s run strategy", s.Rule))
					var err error
					if queuedEvent, err = json.Marshal([]instance.TimelineEvent{ev}); err != nil {
						ch.err = fmt.Errorf("encode the timeline of %s: %w", res.Ref, err)
						return ch
					}
					queuedEvents[s] = queuedEvent
				}
			}
		}
		tl, err := timelineJSON(timeline, res.Status == instance.WorkflowStopped, timelines)
		if err != nil {
			ch.err = fmt.Errorf("encode the timeline of %s: %w", res.Ref, err)
			return ch
		}
		def := int32(0)
		if len(r.Definition) > 0 {
			if d, ok := defs[&r.Definition[0]]; ok {
				def = d
			} else {
				c.defs = append(c.defs, r.Definition)
				def = int32(len(c.defs))
				defs[&r.Definition[0]] = def
			}
		}
		c.add(r, res, id, def, tl, limit, strict, queuedEvent)
	}
	return ch
}

// noLimit is a run's limit when it is admitted at once (no room check).
const noLimit = int64(-1)

// timelineJSON is the JSON of a run's first timeline events; a timeline
// shared by several runs (the same backing array and length) is encoded
// once, unless it is a dropped run's own.
func timelineJSON(timeline []instance.TimelineEvent, own bool, seen map[timelineKey][]byte) ([]byte, error) {
	if own || len(timeline) == 0 {
		return json.Marshal(timeline)
	}
	key := timelineKey{&timeline[0], len(timeline)}
	if b, ok := seen[key]; ok {
		return b, nil
	}
	b, err := json.Marshal(timeline)
	if err != nil {
		return nil, err
	}
	seen[key] = b
	return b, nil
}

// timelineKey names a timeline slice by its first element and length.
type timelineKey struct {
	first *instance.TimelineEvent
	n     int
}

// insertChunk sends one chunk's INSERT and reads what it created into out.
func insertChunk(ctx context.Context, tx Tx, runs []New, ch *chunk, opt Options, out []Created) error {
	c := &ch.c
	node := ""
	if c.anyLocal {
		node = opt.Node
	}
	rows, err := tx.Query(ctx, insertRunsStatement(opt.SkipExisting), node, c.defs, opt.PickedUp,
		c.workflowIDs, c.instanceIDs, c.runIDs, c.versions, c.groups, c.uuids, c.requestIDs, c.groupCounts,
		c.statuses, c.defIdx, c.runParams, c.initiators, c.timelines, c.timeouts, c.limits, c.gens, c.params,
		c.runConfigs, c.parents, c.parentKeys, c.depths, c.correlations, c.events, InstanceStatusKind, tracing.Traceparent(ctx),
		c.stricts, c.queuedEvents)
	if err != nil {
		return fmt.Errorf("insert %d runs: %w", len(ch.idx), err)
	}
	byRef := make(map[Ref]int, len(ch.idx))
	for _, i := range ch.idx {
		byRef[out[i].Ref] = i
	}
	n := 0
	for rows.Next() {
		var ref Ref
		var status instance.WorkflowStatus
		var start *time.Time
		var queued bool
		var notified int64
		if err := rows.Scan(&ref.WorkflowID, &ref.InstanceID, &ref.RunID, &status, &start, &queued, &notified); err != nil {
			rows.Close()
			return fmt.Errorf("insert %d runs: %w", len(ch.idx), err)
		}
		i := byRef[ref]
		out[i].Inserted, out[i].Status, out[i].StartTime, out[i].Queued = true, status, start, queued
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert %d runs: %w", len(ch.idx), err)
	}
	if n != len(ch.idx) && !opt.SkipExisting {
		return fmt.Errorf("insert %d runs: %d inserted", len(ch.idx), n)
	}
	return nil
}
