package signalbroker

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// applyBackfills applies the backfill lineage rules (docs/backfill.md) to
// the sets about to start runs: when a step of a run that belongs to a
// backfill produced one of a set's signals, the run the set starts
// belongs to that backfill too (its initiator carries the backfill id),
// unless the backfill does not propagate downstream or was cancelled:
// then the set starts nothing (its signals stay recorded, the set is
// consumed). Of several such signals in a set, the first by name decides.
func applyBackfills(ctx context.Context, tx pgx.Tx, sets []completeSet, evals []evaluation) error {
	var seqs []int64
	for i, s := range sets {
		if evals[i].run {
			for _, m := range s.members {
				seqs = append(seqs, m.seq)
			}
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	producers, err := signal.Producers(ctx, tx, seqs)
	if err != nil {
		return err
	}
	if len(producers) == 0 {
		return nil
	}
	var keys []backfill.RunKey
	for _, p := range producers {
		keys = append(keys, backfill.RunKey{WorkflowID: p.WorkflowID, InstanceID: p.InstanceID, RunID: p.RunID})
	}
	origins, err := backfill.Origins(ctx, tx, keys)
	if err != nil {
		return err
	}
	if len(origins) == 0 {
		return nil
	}
	for i, s := range sets {
		if !evals[i].run {
			continue
		}
		names := make([]string, 0, len(s.members))
		for n := range s.members {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			p, ok := producers[s.members[n].seq]
			if !ok {
				continue
			}
			o, ok := origins[backfill.RunKey{WorkflowID: p.WorkflowID, InstanceID: p.InstanceID, RunID: p.RunID}]
			if !ok {
				continue
			}
			switch {
			case !o.Downstream:
				evals[i] = evaluation{err: fmt.Errorf("signal %s comes from backfill %s, which does not start downstream runs", n, o.BackfillID)}
			case o.Status == backfill.Cancelled:
				evals[i] = evaluation{err: fmt.Errorf("signal %s comes from backfill %s, which was cancelled", n, o.BackfillID)}
			default:
				evals[i].initiator["backfill_id"] = o.BackfillID
			}
			break
		}
	}
	return nil
}
