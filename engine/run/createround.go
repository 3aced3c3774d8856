package run

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/pgparam"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A round of Create is one INSERT (insertRunsSQL). Its columns are built
// first (prepareRound: the runs' groups, uuids, timelines and admission
// checks, touching no connection), then sent (insertRound). A pipeline
// that split a big round into chunks of 250 and built the next chunk
// while the statement of the one before ran measured slower, in both
// rate and CPU, on the 2-core bench machine: PostgreSQL's side of the
// statement is two thirds of a batch, the part of the Go side that could
// overlap it (building the columns) a small share of the rest, and four
// statements cost more than one (docs/performance.md, "Starts, third
// pass").

// preparedRound is a round's runs (their indexes), columns and dropped runs.
type preparedRound struct {
	idx     []int
	c       columns
	dropped []int
}

// createRound admits and inserts one round of runs.
func createRound(ctx context.Context, tx Tx, runs []New, idx []int, props map[string][]byte, opt Options, out []Created) error {
	adm, err := admit(ctx, tx, runs, idx, props)
	if err != nil {
		return err
	}
	rd, err := prepareRound(runs, idx, adm, out)
	if err != nil {
		return err
	}
	if err := insertRound(ctx, tx, rd, opt, out); err != nil {
		return err
	}
	if len(rd.dropped) > 0 {
		// The dropped runs end as they are created: their events.
		var evs []event.Record
		for _, i := range rd.dropped {
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

// prepareRound builds the columns of the runs idx of a round: it gives
// each run its group, uuid and status in out and decides which runs its
// strategy drops (adm) or checks for room. It touches no connection.
func prepareRound(runs []New, idx []int, adm admission, out []Created) (*preparedRound, error) {
	rd := &preparedRound{idx: idx}
	c := &rd.c
	c.init(len(idx))
	defs := map[*byte]int32{}
	// Runs that share their timeline (a batch's runs of one trigger)
	// share its JSON; queuedFirst holds the workflows whose first run
	// under a limit carries the queued event.
	timelines := map[timelineKey][]byte{}
	sharable := 0 // runs whose timeline may be another's: more than len(timelines) when one is
	queuedFirst := map[string]struct{}{}
	// The queued events, one per rule: encoded once per round, not once
	// per workflow (a batch of 1,000 workflows' first runs: a millisecond).
	queuedEvents := map[workflow.RunStrategyRule][]byte{}
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
				return nil, fmt.Errorf("the uuid of %s: %w", res.Ref, err)
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
				rd.dropped = append(rd.dropped, i)
			} else {
				limit, strict = s.Concurrency, s.Rule == workflow.RunStrategyStrictSequential
				// The statement gives every run of a workflow the event
				// of its first (insertRunsSQL).
				if _, seen := queuedFirst[r.Ref.WorkflowID]; !seen {
					queuedFirst[r.Ref.WorkflowID] = struct{}{}
					var ok bool
					if queuedEvent, ok = queuedEvents[s.Rule]; !ok {
						ev := instance.LogEvent("INFO", fmt.Sprintf("queued by the %s run strategy", s.Rule))
						var err error
						if queuedEvent, err = json.Marshal([]instance.TimelineEvent{ev}); err != nil {
							return nil, fmt.Errorf("encode the timeline of %s: %w", res.Ref, err)
						}
						queuedEvents[s.Rule] = queuedEvent
					}
				}
			}
		}
		if own := res.Status == instance.WorkflowStopped; !own && len(timeline) > 0 {
			sharable++
		}
		tl, err := timelineJSON(timeline, res.Status == instance.WorkflowStopped, timelines)
		if err != nil {
			return nil, fmt.Errorf("encode the timeline of %s: %w", res.Ref, err)
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
	if sharable > len(timelines) {
		c.shareTimelines()
	}
	return rd, nil
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

// shareTimelines moves the timelines two or more runs share (the same
// JSON slice, timelineJSON) into c.bases, each run naming its entry in
// c.tlBase, so that the statement carries and parses each once; the
// others stay the runs' own (tlBase 0).
func (c *columns) shareTimelines() {
	uses := make(map[*byte]int, 4)
	for _, t := range c.timelines {
		if len(t) > 0 {
			uses[&t[0]]++
		}
	}
	for i, t := range c.timelines {
		if len(t) > 0 && uses[&t[0]] > 1 {
			c.tlBase[i], c.timelines[i] = c.base(t), nil
		}
	}
}

// timelineKey names a timeline slice by its first element and length.
type timelineKey struct {
	first *instance.TimelineEvent
	n     int
}

// insertRound sends a round's INSERT and reads what it created into out.
func insertRound(ctx context.Context, tx Tx, rd *preparedRound, opt Options, out []Created) error {
	c := &rd.c
	node := ""
	if c.anyLocal {
		node = opt.Node
	}
	// The JSON columns go as FlatArrays: pgx encodes a [][]byte by
	// reflection, element by element.
	j := func(v [][]byte) pgtype.FlatArray[[]byte] { return v }
	args := []any{node, j(c.defs), opt.PickedUp,
		c.workflowIDs, c.instanceIDs, c.runIDs, c.versions, c.groups, c.uuids, c.requestIDs, c.groupCounts,
		c.statuses, c.defIdx, j(c.runParams), j(c.initiators), j(c.timelines), c.timeouts, c.limits, c.gens, j(c.params),
		j(c.runConfigs), j(c.parents), c.parentKeys, c.depths, c.correlations, j(c.events), InstanceStatusKind, tracing.Traceparent(ctx),
		c.stricts, j(c.queuedEvents), j(c.bases), c.rpBase, c.pBase, c.tlBase}
	// pgx's buffers sized once for the round's arrays (pgparam).
	if c, ok := tx.(interface{ Conn() *pgx.Conn }); ok {
		pgparam.Reserve(c.Conn().PgConn(), 64+pgparam.Estimate(args))
	}
	pgparam.Sized[string](args)
	rows, err := tx.Query(ctx, insertRunsStatement(opt.SkipExisting, len(rd.idx) <= maxNotedStarts), args...)
	if err != nil {
		return fmt.Errorf("insert %d runs: %w", len(rd.idx), err)
	}
	byRef := make(map[Ref]int, len(rd.idx))
	for _, i := range rd.idx {
		byRef[out[i].Ref] = i
	}
	n := 0
	// Declared once: Scan's pointers would move per-row variables to the
	// heap, five allocations per run.
	var (
		ref      Ref
		status   instance.WorkflowStatus
		start    *time.Time
		queued   bool
		notified int64
	)
	for rows.Next() {
		start = nil
		if err := rows.Scan(&ref.WorkflowID, &ref.InstanceID, &ref.RunID, &status, &start, &queued, &notified); err != nil {
			rows.Close()
			return fmt.Errorf("insert %d runs: %w", len(rd.idx), err)
		}
		i := byRef[ref]
		out[i].Inserted, out[i].Status, out[i].StartTime, out[i].Queued = true, status, start, queued
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert %d runs: %w", len(rd.idx), err)
	}
	if n != len(rd.idx) && !opt.SkipExisting {
		return fmt.Errorf("insert %d runs: %d inserted", len(rd.idx), n)
	}
	return nil
}
