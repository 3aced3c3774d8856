package flowstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/pgparam"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// How a batch of ops becomes statements: one per kind of write, in
// waves that keep each run's order, sent in one round trip.

// Write writes one op on its own, without a Writer: run.ErrFenced when its
// fence or guard refused it.
func (s *Store) Write(ctx context.Context, op *Op) error {
	written, err := execBatch(ctx, s.db, []*Op{op})
	if err != nil {
		return err
	}
	if !written[op] {
		return run.ErrFenced
	}
	return nil
}

// execBatch writes ops in one transaction and reports which ops' rows
// were written.
func execBatch(ctx context.Context, db *pgxpool.Pool, batch []*Op) (map[*Op]bool, error) {
	needTx := false
	for _, op := range batch {
		needTx = needTx || len(op.then) > 0
	}
	b := &pgx.Batch{}
	var reads []func(pgx.Rows, map[*Op]bool) error
	gids, gens := batchGroups(batch)
	b.Queue(lockGroupsSQL, gids, gens)
	reads = append(reads, func(rows pgx.Rows, _ map[*Op]bool) error {
		rows.Close()
		return rows.Err()
	})
	in := afterStartInBatch(batch)
	for _, w := range statementWaves(batch) {
		// Within a wave: runs' starts before steps (a step write checks
		// that its run's start was written, startedFence), inserts before
		// updates, and runs' ends last, so that each run's rows, and the
		// events written with them, follow the order of its writes.
		if len(w[slotStart]) > 0 {
			b.Queue(updateInstancesSQL, instanceArgs(w[slotStart])...)
			reads = append(reads, readInstanceKeys(w[slotStart]))
		}
		if ins := w[slotInsert]; len(ins) > 0 {
			args, afterStart := stepArgs(run.StepStatusKind, ins, true, in)
			b.Queue(pick(afterStart, insertStepsAfterStartSQL, insertStepsSQL), args...)
			reads = append(reads, readStepKeys(ins))
		}
		if upd := w[slotUpdate]; len(upd) > 0 {
			args, afterStart := stepArgs(run.StepStatusKind, upd, false, in)
			b.Queue(pick(afterStart, updateStepsAfterStartSQL, updateStepsSQL), args...)
			reads = append(reads, readStepKeys(upd))
		}
		if len(w[slotEnd]) > 0 {
			b.Queue(updateInstancesSQL, instanceArgs(w[slotEnd])...)
			reads = append(reads, readInstanceKeys(w[slotEnd]))
		}
	}
	if args := ackArgs(batch); args != nil {
		// Last: the messages the batch's starts handle, deleted in its
		// transaction.
		b.Queue(queue.AckSQL, args...)
		reads = append(reads, func(rows pgx.Rows, _ map[*Op]bool) error {
			rows.Close()
			return rows.Err()
		})
	}
	written := make(map[*Op]bool, len(batch))
	send := func(br pgx.BatchResults) error {
		for _, read := range reads {
			rows, err := br.Query()
			if err != nil {
				_ = br.Close()
				return err
			}
			if err := read(rows, written); err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
	}
	// The batch's messages are encoded into one buffer of their size
	// (pgparam.Reserve).
	size := 0
	for _, q := range b.QueuedQueries {
		size += 64 + pgparam.Estimate(q.Arguments)
	}
	if !needTx {
		// One round trip: the statements of a batch run in one implicit
		// transaction, committed before the results are answered.
		c, err := db.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("acquire a connection for %d writes: %w", len(batch), err)
		}
		defer c.Release()
		pgparam.Reserve(c.Conn().PgConn(), size)
		if err := send(c.SendBatch(ctx, b)); err != nil {
			return nil, err
		}
		return written, nil
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		pgparam.Reserve(tx.Conn().PgConn(), size)
		if err := send(tx.SendBatch(ctx, b)); err != nil {
			return err
		}
		for _, op := range batch {
			if !written[op] {
				continue
			}
			for _, f := range op.then {
				if err := f(ctx, tx); err != nil {
					return fmt.Errorf("%w: %w", errThen, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return written, nil
}

// ackArgs are queue.AckSQL's arrays for the messages a batch's ops
// acknowledge (Op.Acks); nil for none.
func ackArgs(batch []*Op) []any {
	var qs []int16
	var ids, gens []int64
	var nodes []string
	var groups []int32
	for _, op := range batch {
		if a := op.ack; a != nil {
			qs, ids, nodes = append(qs, int16(a.queue)), append(ids, a.id), append(nodes, a.node)
			groups, gens = append(groups, op.group), append(gens, op.gen)
		}
	}
	if qs == nil {
		return nil
	}
	return []any{qs, ids, nodes, groups, gens}
}

// The statements of a wave, in the order they run.
const (
	slotStart  = iota // runs' rows, but for their ends
	slotInsert        // step attempts inserted
	slotUpdate        // step attempts updated
	slotEnd           // runs' ends
	slots
)

func slotOf(op *Op) int {
	switch {
	case op.kind == opStepInsert:
		return slotInsert
	case op.kind == opStepUpdate:
		return slotUpdate
	case op.inst.End:
		return slotEnd
	}
	return slotStart
}

// statementWaves splits a batch into waves of multi-row statements so
// that an op runs after the op it is ordered after (Op.After) when both
// are in the batch: in the same statement after it (a statement writes
// its rows, and their events, in the order of its arrays, which is the
// batch's), in a later statement of the same wave, or in a later wave. A
// batch lists an op after its predecessor, and most batches are one wave:
// a chain of NoOp steps, each written once, is one insert statement. A
// run's chain that goes back to an earlier statement (a step's end
// written behind, then the next step's insert) starts another wave.
func statementWaves(batch []*Op) [][slots][]*Op {
	waves := make([][slots][]*Op, 1)
	pos := make(map[*Op][2]int, len(batch))
	for _, op := range batch {
		wave, slot := 0, slotOf(op)
		if p, ok := pos[op.after]; ok && op.after != nil {
			wave = p[0]
			if slot < p[1] {
				wave++
			}
		}
		if wave == len(waves) {
			waves = append(waves, [slots][]*Op{})
		}
		waves[wave][slot] = append(waves[wave][slot], op)
		pos[op] = [2]int{wave, slot}
	}
	return waves
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

// afterStartInBatch marks the ops of a batch ordered after a write of
// their run's own row in the same batch (its start), directly or through
// other ops of the batch (a run's writes form a chain: writeorder.go in
// engine/flow). A batch lists an op after its predecessor when both are in
// it (take).
func afterStartInBatch(batch []*Op) map[*Op]bool {
	in := make(map[*Op]bool)
	var after map[*Op]bool
	for _, op := range batch {
		if op.kind == opInstanceUpdate {
			in[op] = true
		}
		if p := op.after; p != nil && (in[p] || after[p]) && op.kind != opInstanceUpdate {
			if after == nil {
				after = make(map[*Op]bool)
			}
			after[op] = true
		}
	}
	return after
}

// stepArgs are the column arrays of a multi-row step statement.
// An op that follows its run's start in the same batch (in, directly or
// through other ops) is flagged live, and the flags are added (afterStart)
// for the statements that check them (startedFence).
func stepArgs(kind event.Kind, ops []*Op, insert bool, in map[*Op]bool) (args []any, afterStart bool) {
	n := len(ops)
	live := make([]bool, n)
	wf := make([]string, n)
	iid, rid, gen, att, seq := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	grp := make([]int32, n)
	step, status := make([]string, n), make([]string, n)
	// The JSON columns go as FlatArrays: pgx encodes a [][]byte by
	// reflection, element by element.
	params, outputs, rt, tl := make(jsonArray, n), make(jsonArray, n), make(jsonArray, n), make(jsonArray, n)
	// The retry policies go as their distinct values, each encoded once,
	// and each row's 1-based index into them (stepSource).
	var retryVals jsonArray
	retryIdx, retrySeen := make([]int32, n), make(map[instance.RetryInfo]int32, 2)
	start, fin := make([]bool, n), make([]bool, n)
	ev, sig := make(jsonArray, n), make(jsonArray, n)
	var uuids, types []string
	var patch jsonArray
	if insert {
		uuids, types = make([]string, n), make([]string, n)
	} else {
		patch = make(jsonArray, n)
	}
	for i, op := range ops {
		s := &op.step
		wf[i], iid[i], rid[i], grp[i], gen[i] = op.ref.WorkflowID, op.ref.InstanceID, op.ref.RunID, op.group, op.gen
		step[i], att[i], status[i], seq[i] = op.stepID, op.attempt, string(s.Status), s.Seq
		params[i], outputs[i] = s.Params, s.Outputs
		if insert {
			params[i], outputs[i] = jsonOr(s.Params), jsonOr(s.Outputs)
			uuids[i], types[i] = op.uuid, op.typ
		} else if s.Params == nil {
			patch[i] = s.ParamsPatch
		}
		rt[i], _ = json.Marshal(s.Runtime)
		k, ok := retrySeen[s.Retry]
		if !ok {
			b, _ := json.Marshal(s.Retry)
			retryVals = append(retryVals, b)
			k = int32(len(retryVals))
			retrySeen[s.Retry] = k
		}
		retryIdx[i] = k
		tl[i], _ = json.Marshal(orEmpty(s.Timeline))
		start[i], fin[i] = s.Start, s.End
		ev[i], sig[i] = s.Event, s.Signals
		live[i] = in[op]
		afterStart = afterStart || live[i]
	}
	tlVals, tlIdx := distinctJSON(tl)
	args = []any{kind, wf, iid, rid, grp, gen, step, att, status, seq, params, outputs, rt, retryVals, tlVals, start, fin, ev, sig}
	if insert {
		args = append(args, uuids, types)
	} else {
		args = append(args, patch)
	}
	args = append(args, retryIdx, tlIdx)
	if afterStart {
		args = append(args, live)
	}
	pgparam.Sized[event.Kind](args)
	return args, afterStart
}

// jsonArray is a column of JSON values.
type jsonArray = pgtype.FlatArray[[]byte]

// distinctJSON is column col as its distinct values, each once in the
// order of its first row, and each row's 1-based index into them: what a
// statement parses once per value rather than once per row (stepSource).
// Values are compared byte for byte; a nil value (NULL) is a value too.
func distinctJSON(col jsonArray) (vals jsonArray, idx []int32) {
	idx = make([]int32, len(col))
	seen := make(map[string]int32, 4)
	nullAt := int32(0)
	for i, v := range col {
		if v == nil {
			if nullAt == 0 {
				vals = append(vals, nil)
				nullAt = int32(len(vals))
			}
			idx[i] = nullAt
			continue
		}
		k, ok := seen[string(v)]
		if !ok {
			vals = append(vals, v)
			k = int32(len(vals))
			seen[string(v)] = k
		}
		idx[i] = k
	}
	return vals, idx
}

func instanceArgs(ops []*Op) []any {
	n := len(ops)
	wf := make([]string, n)
	iid, rid, gen := make([]int64, n), make([]int64, n), make([]int64, n)
	grp := make([]int32, n)
	from, status := make([]string, n), make([]string, n)
	params, tl, ev := make(jsonArray, n), make(jsonArray, n), make(jsonArray, n)
	fin := make([]bool, n)
	for i, op := range ops {
		u := &op.inst
		wf[i], iid[i], rid[i], grp[i], gen[i] = op.ref.WorkflowID, op.ref.InstanceID, op.ref.RunID, op.group, op.gen
		from[i], status[i], params[i], fin[i], ev[i] = string(u.From), string(u.Status), u.Params, u.End, u.Event
		tl[i], _ = json.Marshal(orEmpty(u.Timeline))
	}
	tlVals, tlIdx := distinctJSON(tl)
	args := []any{run.InstanceStatusKind, wf, iid, rid, grp, gen, from, status, params, tlVals, fin, ev, tlIdx}
	pgparam.Sized[event.Kind](args)
	return args
}

func readStepKeys(ops []*Op) func(pgx.Rows, map[*Op]bool) error {
	return func(rows pgx.Rows, written map[*Op]bool) error {
		byKey := make(map[rowKey]*Op, len(ops))
		for _, op := range ops {
			byKey[op.row()] = op
		}
		var k rowKey
		_, err := pgx.ForEachRow(rows, []any{&k.ref.WorkflowID, &k.ref.InstanceID, &k.ref.RunID, &k.stepID, &k.attempt}, func() error {
			if op := byKey[k]; op != nil {
				written[op] = true
			}
			return nil
		})
		return err
	}
}

func readInstanceKeys(ops []*Op) func(pgx.Rows, map[*Op]bool) error {
	return func(rows pgx.Rows, written map[*Op]bool) error {
		byKey := make(map[run.Ref]*Op, len(ops))
		for _, op := range ops {
			byKey[op.ref] = op
		}
		var r run.Ref
		_, err := pgx.ForEachRow(rows, []any{&r.WorkflowID, &r.InstanceID, &r.RunID}, func() error {
			if op := byKey[r]; op != nil {
				written[op] = true
			}
			return nil
		})
		return err
	}
}

// batchGroups lists the distinct (group, generation) pairs of a batch.
func batchGroups(batch []*Op) (gids []int32, gens []int64) {
	type gg struct {
		id  int32
		gen int64
	}
	seen := make(map[gg]bool, 4)
	for _, op := range batch {
		k := gg{op.group, op.gen}
		if !seen[k] {
			seen[k] = true
			gids, gens = append(gids, op.group), append(gens, op.gen)
		}
	}
	return gids, gens
}
