// Package signalbroker announces signals and acts on them, exactly once:
// it stores each signal instance (deduplicated by name and instance id),
// wakes the step attempts waiting for its name through the outbox, and
// starts one run per set of signal instances that satisfies a workflow's
// signal trigger (match params, join keys, condition, dedup_expr, params),
// through the batch start path (execution.StartBatchTx). The REST API, the
// signals Lambda and `maestro dev` announce through Broker.Announce, in
// one transaction per batch; a step's output signals are stored with its
// terminal state by the engine and matched afterwards by ProcessPending,
// which the engine's Sweeper runs at once and again after a crash.
// docs/signals.md draws the data flow.
package signalbroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/ops"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// Broker announces signals and matches them.
type Broker struct {
	db       *pgxpool.Pool
	runs     *execution.Service
	log      *slog.Logger
	triggers *triggerCache
	now      func() time.Time
	// reader and manifests, when set, give incremental runs the files
	// their range added (SetTableReader).
	reader    tablechange.Reader
	manifests ManifestWriter
	// testPause, when set, runs inside ProcessPending's transaction once
	// it has claimed its signals (Sweeper.TestPause).
	testPause func()
}

// New returns a broker over db that starts runs with runs.
func New(db *pgxpool.Pool, runs *execution.Service, logger *slog.Logger) *Broker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Broker{db: db, runs: runs, log: logger, triggers: newTriggerCache(), now: time.Now}
}

// Result is what became of one announced request.
type Result struct {
	// Signal is the stored signal: the new one, or for a duplicate the one
	// stored before. Nil when Err is set.
	Signal *signal.Signal
	// Duplicate: the signal's name and instance id were stored before (or
	// earlier in the batch); nothing was written or matched for it.
	Duplicate bool
	// Err is why the request was refused (signal.ErrInvalid); the other
	// requests of the batch are not affected.
	Err error
}

// Stats counts what a batch did.
type Stats struct {
	// Stored counts the new signal instances.
	Stored int
	// Woken counts the step attempts told to look at their dependencies
	// again.
	Woken int
	// Matched counts the sets of signal instances that satisfied a signal
	// trigger; Started the runs they started (fewer when a condition was
	// false, a dedup_expr repeated a run's request id, or a start was
	// refused).
	Matched int
	Started int
	// Deferred counts the signals kept for the signal triggers while an
	// operator has paused every trigger (maestro ops triggers pause).
	Deferred int
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Deferred += o.Deferred
	s.Stored += o.Stored
	s.Woken += o.Woken
	s.Matched += o.Matched
	s.Started += o.Started
}

// maxAttempts bounds how often a batch is tried again after a deadlock or
// a serialization failure (two batches locking the same names or
// workflows in another order can only meet on a hash collision).
const maxAttempts = 3

// Announce stores the requests and acts on the new signals in one
// transaction: the steps waiting for their names are woken, and every set
// of signal instances that now satisfies a signal trigger starts its run.
// A request that fails its checks gets its Err and is left out; an error
// returned means nothing was written.
func (b *Broker) Announce(ctx context.Context, reqs []signal.Request) ([]Result, Stats, error) {
	out := make([]Result, len(reqs))
	var (
		valid []signal.Request
		index []int
	)
	for i := range reqs {
		if err := reqs[i].Check(); err != nil {
			out[i].Err = err
			continue
		}
		valid, index = append(valid, reqs[i]), append(index, i)
	}
	if len(valid) == 0 {
		return out, Stats{}, nil
	}
	var (
		ins     []signal.Inserted
		stats   Stats
		started []execution.BatchResult
	)
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, b.db, func(tx pgx.Tx) error {
			names := namesOf(valid)
			var (
				waiters signal.Waiters
				subs    []trigger.Subscription
			)
			batch := &pgx.Batch{}
			signal.QueueLockNames(batch, names, true)
			insertion := signal.QueueInsert(batch, valid)
			signal.QueueWaiters(batch, names, &waiters)
			trigger.QueueSubscriptions(batch, names, nil, &subs)
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return fmt.Errorf("store %d signals: %w", len(valid), err)
			}
			var err error
			if ins, err = insertion.Finish(ctx, tx); err != nil {
				return err
			}
			var fresh []*signal.Signal
			for _, in := range ins {
				if !in.Duplicate {
					fresh = append(fresh, in.Signal)
				}
			}
			stats, started, err = b.act(ctx, tx, fresh, waiters, subs)
			return err
		})
	})
	if err != nil {
		return nil, Stats{}, err
	}
	b.runs.AfterBatch(ctx, started)
	for k, in := range ins {
		out[index[k]] = Result{Signal: in.Signal, Duplicate: in.Duplicate}
	}
	return out, stats, nil
}

// ProcessPending matches up to limit signals stored without having been
// matched (a step's output signals, signal_pending), oldest first, in one
// transaction that deletes their pending rows, and returns what it did and
// how many it processed. Rows another process is matching are skipped.
func (b *Broker) ProcessPending(ctx context.Context, limit int) (Stats, int, error) {
	var (
		stats   Stats
		started []execution.BatchResult
		n       int
	)
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, b.db, func(tx pgx.Tx) error {
			seqs, err := signal.ClaimPending(ctx, tx, limit, 0)
			if err != nil || len(seqs) == 0 {
				n = 0
				return err
			}
			n = len(seqs)
			if b.testPause != nil {
				b.testPause()
			}
			bySeq, err := signal.BySeq(ctx, tx, seqs)
			if err != nil {
				return err
			}
			sigs := make([]*signal.Signal, 0, len(bySeq))
			for _, s := range bySeq {
				sigs = append(sigs, s)
			}
			slices.SortFunc(sigs, func(a, b *signal.Signal) int { return cmp.Compare(a.Seq, b.Seq) })
			names := make([]string, 0, len(sigs))
			for _, s := range sigs {
				names = append(names, s.Name)
			}
			var (
				waiters signal.Waiters
				subs    []trigger.Subscription
			)
			batch := &pgx.Batch{}
			signal.QueueLockNames(batch, names, true)
			signal.QueueWaiters(batch, names, &waiters)
			trigger.QueueSubscriptions(batch, names, nil, &subs)
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return fmt.Errorf("match %d pending signals: %w", len(sigs), err)
			}
			stats, started, err = b.act(ctx, tx, sigs, waiters, subs)
			stats.Stored = 0
			return err
		})
	})
	if err != nil {
		return Stats{}, 0, err
	}
	b.runs.AfterBatch(ctx, started)
	return stats, n, nil
}

// ProcessDeferred matches up to limit signals kept for the signal triggers
// while triggers were paused against the triggers subscribed now, oldest
// first, in one transaction that deletes their deferred rows (the steps
// waiting for them were woken when they arrived), and returns what it did
// and how many it processed. While triggers are still paused it does
// nothing.
func (b *Broker) ProcessDeferred(ctx context.Context, limit int) (Stats, int, error) {
	var (
		stats   Stats
		started []execution.BatchResult
		n       int
	)
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, b.db, func(tx pgx.Tx) error {
			n, stats, started = 0, Stats{}, nil
			paused, err := ops.TriggersPausedLocked(ctx, tx)
			if err != nil || paused {
				return err
			}
			seqs, err := signal.ClaimDeferred(ctx, tx, limit)
			if err != nil || len(seqs) == 0 {
				return err
			}
			n = len(seqs)
			bySeq, err := signal.BySeq(ctx, tx, seqs)
			if err != nil {
				return err
			}
			sigs := make([]*signal.Signal, 0, len(bySeq))
			names := make([]string, 0, len(bySeq))
			for _, s := range bySeq {
				sigs = append(sigs, s)
			}
			slices.SortFunc(sigs, func(a, b *signal.Signal) int { return cmp.Compare(a.Seq, b.Seq) })
			for _, s := range sigs {
				names = append(names, s.Name)
			}
			var subs []trigger.Subscription
			batch := &pgx.Batch{}
			signal.QueueLockNames(batch, names, true)
			trigger.QueueSubscriptions(batch, names, nil, &subs)
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return fmt.Errorf("match %d deferred signals: %w", len(sigs), err)
			}
			if len(subs) == 0 {
				return nil
			}
			m, err := b.match(ctx, tx, sigs, subs)
			if err != nil {
				return err
			}
			stats.Matched, stats.Started, started = m.matched, m.started, m.results
			return nil
		})
	})
	if err != nil {
		return Stats{}, 0, err
	}
	b.runs.AfterBatch(ctx, started)
	return stats, n, nil
}

// act wakes the waiters of the new signals' names and matches the new
// signals against the subscribed triggers, inside tx, which holds the
// names' exclusive locks.
func (b *Broker) act(ctx context.Context, tx pgx.Tx, fresh []*signal.Signal, waiters signal.Waiters,
	subs []trigger.Subscription) (Stats, []execution.BatchResult, error) {
	stats := Stats{Stored: len(fresh)}
	if len(fresh) == 0 {
		return stats, nil, nil
	}
	names := make(map[string]bool, len(fresh))
	for _, s := range fresh {
		names[s.Name] = true
	}
	if ws := waiters.For(names); len(ws) > 0 {
		groups := make([]int32, len(ws))
		msgs := make([]run.StepUpdateMessage, len(ws))
		for i, w := range ws {
			groups[i] = w.Group
			msgs[i] = run.StepUpdateMessage{Ref: run.Ref{WorkflowID: w.WorkflowID, InstanceID: w.InstanceID, RunID: w.RunID},
				Group: w.Group, StepID: w.StepID}
		}
		if err := queue.EnqueueBatch(ctx, tx, queue.StepUpdate, groups, msgs); err != nil {
			return Stats{}, nil, err
		}
		stats.Woken = len(ws)
	}
	var relevant []trigger.Subscription
	for _, s := range subs {
		if names[s.SignalName] {
			relevant = append(relevant, s)
		}
	}
	if len(relevant) == 0 {
		return stats, nil, nil
	}
	// While triggers are paused the signals are kept for the triggers,
	// matched when they resume (ProcessDeferred); the waiting steps above
	// are woken regardless.
	paused, err := ops.TriggersPausedLocked(ctx, tx)
	if err != nil {
		return Stats{}, nil, err
	}
	if paused {
		subscribed := make(map[string]bool, len(relevant))
		for _, sub := range relevant {
			subscribed[sub.SignalName] = true
		}
		var seqs []int64
		for _, sg := range fresh {
			if subscribed[sg.Name] {
				seqs = append(seqs, sg.Seq)
			}
		}
		if err := signal.DeferTriggers(ctx, tx, seqs); err != nil {
			return Stats{}, nil, err
		}
		stats.Deferred = len(seqs)
		return stats, nil, nil
	}
	m, err := b.match(ctx, tx, fresh, relevant)
	if err != nil {
		return Stats{}, nil, err
	}
	stats.Matched, stats.Started = m.matched, m.started
	return stats, m.results, nil
}

// retry runs fn again after a deadlock or a serialization failure.
func retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		var pg *pgconn.PgError
		if err == nil || attempt == maxAttempts || !errors.As(err, &pg) || (pg.Code != "40P01" && pg.Code != "40001") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

func namesOf(reqs []signal.Request) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
