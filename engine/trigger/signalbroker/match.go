package signalbroker

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// Matching, inside the transaction that stored the new signals (or
// claimed them from signal_pending), with their names locked:
//
//  1. lock the workflows of the triggers subscribed to the new signals'
//     names (id order, as a start), and read those subscriptions again
//     under the locks: a trigger changes only under its workflow's lock;
//  2. each new signal, in seq order, that satisfies a subscribed trigger's
//     definition of its name (every match param, every join key present)
//     completes a set with the oldest signal held for each other name of
//     the trigger under the same join key values, or, when one is
//     missing, is held itself (signal_trigger_pending);
//  3. each complete set consumes what it used, evaluates the trigger's
//     params, condition and dedup_expr, and starts its run through
//     execution.StartBatchTx with a request id derived from the trigger and
//     the set (or the dedup_expr), all in this transaction.
//
// So every signal instance is matched once per trigger, exactly once:
// the set's consumption, the run and the lineage commit together, or none
// of them.

// member is one signal instance of a set.
type member struct {
	seq    int64
	params map[string]any
	// held: the instance was held in the database before this batch.
	held bool
}

// completeSet is a set of signal instances that satisfies a trigger.
type completeSet struct {
	workflowID string
	trig       *compiled
	members    map[string]*member
}

// matchOutcome is what matching a batch did.
type matchOutcome struct {
	matched, started int
	results          []execution.BatchResult
}

func (b *Broker) match(ctx context.Context, tx pgx.Tx, fresh []*signal.Signal, subs []trigger.Subscription) (matchOutcome, error) {
	var wfs, names []string
	for _, s := range subs {
		wfs, names = append(wfs, s.WorkflowID), append(names, s.SignalName)
	}
	slices.Sort(wfs)
	wfs = slices.Compact(wfs)
	slices.Sort(names)
	names = slices.Compact(names)
	versions, err := trigger.LockWorkflows(ctx, tx, wfs)
	if err != nil {
		return matchOutcome{}, err
	}
	if subs, err = trigger.Subscriptions(ctx, tx, names, wfs); err != nil {
		return matchOutcome{}, err
	}
	byName := map[string][]trigger.Subscription{}
	for _, s := range subs {
		if _, ok := versions[s.WorkflowID]; ok {
			byName[s.SignalName] = append(byName[s.SignalName], s)
		}
	}
	for _, ss := range byName {
		slices.SortFunc(ss, func(a, b trigger.Subscription) int {
			return cmp.Or(cmp.Compare(a.WorkflowID, b.WorkflowID), cmp.Compare(a.UUID, b.UUID))
		})
	}

	// The candidates: each new signal with each trigger whose definition
	// of its name it satisfies.
	type candidate struct {
		sig  *signal.Signal
		sub  trigger.Subscription
		trig *compiled
		key  trigger.JoinKey
	}
	var (
		cands []candidate
		keys  []trigger.JoinKey
		seen  = map[trigger.JoinKey]bool{}
	)
	sigs := slices.Clone(fresh)
	slices.SortFunc(sigs, func(a, b *signal.Signal) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, sig := range sigs {
		for _, sub := range byName[sig.Name] {
			c := b.triggers.get(sub.UUID, sub.Definition)
			if c.err != nil {
				b.log.Warn("signal trigger cannot be used", "workflow_id", sub.WorkflowID, "trigger_uuid", sub.UUID,
					"error", c.err.Error())
				continue
			}
			e, ok := c.entries[sig.Name]
			if !ok || !(signal.Dependency{Matches: e.matches}).Satisfied(sig.Params) {
				continue
			}
			jk, ok := e.joinKey(sig.Params)
			if !ok {
				continue
			}
			k := trigger.JoinKey{WorkflowID: sub.WorkflowID, UUID: sub.UUID, Key: jk}
			cands = append(cands, candidate{sig: sig, sub: sub, trig: c, key: k})
			if len(c.names) > 1 && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if len(cands) == 0 {
		return matchOutcome{}, nil
	}

	// What the triggers hold for those join keys, oldest first.
	held := map[trigger.JoinKey]map[string][]*member{}
	stored, err := trigger.Pending(ctx, tx, keys)
	if err != nil {
		return matchOutcome{}, err
	}
	for _, p := range stored {
		ps, err := signal.DecodeParams(p.Params)
		if err != nil {
			return matchOutcome{}, fmt.Errorf("decode params of signal %d: %w", p.Seq, err)
		}
		if held[p.JoinKey] == nil {
			held[p.JoinKey] = map[string][]*member{}
		}
		held[p.JoinKey][p.Name] = append(held[p.JoinKey][p.Name], &member{seq: p.Seq, params: ps, held: true})
	}

	var (
		sets    []completeSet
		consume []trigger.PendingSignal
	)
	for _, c := range cands {
		m := &member{seq: c.sig.Seq, params: c.sig.Params}
		set := map[string]*member{c.sig.Name: m}
		complete := true
		for _, n := range c.trig.names {
			if n != c.sig.Name && len(held[c.key][n]) == 0 {
				complete = false
			}
		}
		if !complete {
			if held[c.key] == nil {
				held[c.key] = map[string][]*member{}
			}
			held[c.key][c.sig.Name] = append(held[c.key][c.sig.Name], m)
			continue
		}
		for _, n := range c.trig.names {
			if n == c.sig.Name {
				continue
			}
			first := held[c.key][n][0]
			held[c.key][n] = held[c.key][n][1:]
			set[n] = first
			if first.held {
				consume = append(consume, trigger.PendingSignal{JoinKey: c.key, Name: n, Seq: first.seq})
			}
		}
		sets = append(sets, completeSet{workflowID: c.sub.WorkflowID, trig: c.trig, members: set})
	}
	// Signals this batch held and no set consumed are held from now on.
	var add []trigger.PendingSignal
	for k, byName := range held {
		for n, ms := range byName {
			for _, m := range ms {
				if !m.held {
					add = append(add, trigger.PendingSignal{JoinKey: k, Name: n, Seq: m.seq})
				}
			}
		}
	}

	out, records, err := b.startSets(ctx, tx, sets, versions)
	if err != nil {
		return matchOutcome{}, err
	}
	batch := &pgx.Batch{}
	trigger.QueuePendingChanges(batch, add, consume)
	trigger.QueueRecordMatched(batch, records)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return matchOutcome{}, fmt.Errorf("record what %d signal trigger matches did: %w", len(sets), err)
	}
	return out, nil
}

// startSets evaluates each complete set and starts the runs of those that
// should run, in one batch, and records the STARTED lineage of the new
// runs. It returns what the triggers should record.
func (b *Broker) startSets(ctx context.Context, tx pgx.Tx, sets []completeSet, versions map[string]int64) (matchOutcome, []trigger.Matched, error) {
	now := b.now()
	var (
		starts  []execution.BatchStart
		startOf []int // set index of each start
		evals   = make([]evaluation, len(sets))
	)
	for i, s := range sets {
		evals[i] = s.trig.evaluate(ctx, s.workflowID, s.members, now)
	}
	if err := applyBackfills(ctx, tx, sets, evals); err != nil {
		return matchOutcome{}, nil, err
	}
	var incr []int
	for i, s := range sets {
		if s.trig.incremental {
			incr = append(incr, i)
			continue
		}
		if !evals[i].run {
			continue
		}
		starts = append(starts, execution.BatchStart{WorkflowID: s.workflowID, Version: versions[s.workflowID],
			RequestID: evals[i].requestID, Initiator: evals[i].initiator})
		startOf = append(startOf, i)
	}
	results, err := b.runs.StartBatchTx(ctx, tx, starts)
	if err != nil {
		return matchOutcome{}, nil, err
	}
	incrOut, incrResults, err := b.startIncremental(ctx, tx, sets, incr, evals, versions)
	if err != nil {
		return matchOutcome{}, nil, err
	}
	runOf := make([]*execution.BatchResult, len(sets))
	for k, i := range startOf {
		runOf[i] = &results[k]
	}
	type key struct{ wf, uuid string }
	records := map[key]*trigger.Matched{}
	var order []key
	var lineage []signal.StartedRun
	out := matchOutcome{matched: len(sets), results: append(results, incrResults...)}
	for i, s := range sets {
		k := key{s.workflowID, s.trig.uuid}
		r := records[k]
		if r == nil {
			r = &trigger.Matched{WorkflowID: s.workflowID, UUID: s.trig.uuid}
			records[k] = r
			order = append(order, k)
		}
		r.Matches++
		r.SignalIDs = make(map[string]int64, len(s.members))
		refs := make([]signal.Ref, 0, len(s.members))
		for n, m := range s.members {
			r.SignalIDs[n] = m.seq
			refs = append(refs, signal.Ref{Name: n, Seq: m.seq})
		}
		r.InstanceID, r.Error = 0, ""
		switch res := runOf[i]; {
		case s.trig.incremental:
			o := incrOut[i]
			if o == nil {
				o = &setOutcome{}
			}
			r.InstanceID, r.Error = o.InstanceID, o.Error
			if o.started {
				r.Starts++
				out.started++
			}
		case res == nil:
			r.Error = evals[i].err.Error()
			b.log.Info("signal trigger matched but started no run", "workflow_id", s.workflowID,
				"trigger_uuid", s.trig.uuid, "signal_id_map", r.SignalIDs, "reason", r.Error)
		case res.Err != nil:
			r.Error = "start refused: " + res.Err.Error()
			b.log.Warn("signal trigger start refused", "workflow_id", s.workflowID, "trigger_uuid", s.trig.uuid,
				"error", res.Err.Error())
		case res.Duplicated:
			r.InstanceID = res.InstanceID
			r.Error = fmt.Sprintf("deduplicated: run %d was started with the same request id", res.InstanceID)
		default:
			r.InstanceID = res.InstanceID
			r.Starts++
			out.started++
			slices.SortFunc(refs, func(a, b signal.Ref) int { return cmp.Compare(a.Name, b.Name) })
			lineage = append(lineage, signal.StartedRun{WorkflowID: s.workflowID, InstanceID: res.InstanceID,
				TriggerUUID: s.trig.uuid, Signals: refs})
		}
	}
	if err := signal.RecordStarted(ctx, tx, lineage); err != nil {
		return matchOutcome{}, nil, err
	}
	recs := make([]trigger.Matched, 0, len(order))
	for _, k := range order {
		recs = append(recs, *records[k])
	}
	return out, recs, nil
}
