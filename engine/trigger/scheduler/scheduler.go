// Package scheduler fires time triggers exactly once per fire time. One
// transaction per batch claims due triggers (FOR UPDATE SKIP LOCKED, with
// their workflows' rows), starts one run per fire time through execution's
// batch start path with a request id derived from the workflow, the trigger
// and the fire time, and advances each trigger to its next fire time in its
// time zone. A scheduler killed mid-batch rolls all of it back; two
// schedulers claim disjoint triggers; a repeated fire time is a duplicate
// start. maestro dev runs it in a loop (Service); the time-trigger Lambda
// calls HandleScheduled once a minute. See docs/triggers.md.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/ops"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Defaults of Config.
const (
	DefaultBatchSize       = 1000
	DefaultCatchUp         = 5 * time.Minute
	DefaultMaxFiresPerTick = 10
	DefaultTick            = 2 * time.Second
	DefaultDeadlineMargin  = 10 * time.Second
	DefaultWorkers         = 2
)

// Config configures a Scheduler. Zero fields take the defaults.
type Config struct {
	// BatchSize is how many triggers one transaction claims.
	BatchSize int
	// Workers is how many batches FireDue runs at once, each on its own
	// connection; they claim disjoint triggers (SKIP LOCKED), and two
	// overlap the scheduler's work with the database's.
	Workers int
	// CatchUp is the missed-fire window: due fire times later than this
	// are missed (see plan).
	CatchUp time.Duration
	// MaxFiresPerTrigger bounds the fire times of one trigger a batch
	// starts; a trigger with more due fires again in the next batch.
	MaxFiresPerTrigger int
	// Tick is how often Service looks for due triggers.
	Tick time.Duration
	// DeadlineMargin: FireDue starts no batch when its context's deadline
	// is closer than this (a Lambda stops before it is killed).
	DeadlineMargin time.Duration
	// Clock is the current time; time.Now when nil. Tests speed it up.
	Clock func() time.Time
	// Logger is required.
	Logger *slog.Logger
	// Metrics, when set, receives the TriggerLag of each HandleScheduled
	// invocation that started runs (the time-trigger Lambda's stdout).
	Metrics *metrics.Emitter
}

func (c *Config) defaults() error {
	if c.Logger == nil {
		return errors.New("scheduler: Config.Logger is required")
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.CatchUp <= 0 {
		c.CatchUp = DefaultCatchUp
	}
	if c.MaxFiresPerTrigger <= 0 {
		c.MaxFiresPerTrigger = DefaultMaxFiresPerTick
	}
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.DeadlineMargin <= 0 {
		c.DeadlineMargin = DefaultDeadlineMargin
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return nil
}

// Scheduler fires due time triggers.
type Scheduler struct {
	db   *pgxpool.Pool
	runs *execution.Service
	cfg  Config

	mu       sync.Mutex
	compiled map[string]*schedule.Compiled // by trigger key

	// testHookInTx runs inside a batch's transaction, after the runs were
	// created and the triggers advanced, before the commit.
	testHookInTx func(claimed int)
}

// New builds a scheduler that starts runs through runs.
func New(db *pgxpool.Pool, runs *execution.Service, cfg Config) (*Scheduler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if db == nil || runs == nil {
		return nil, errors.New("scheduler: a database pool and an execution service are required")
	}
	return &Scheduler{db: db, runs: runs, cfg: cfg, compiled: map[string]*schedule.Compiled{}}, nil
}

// Stats is what firing did.
type Stats struct {
	Batches int `json:"batches"`
	// Claimed counts claimed triggers, Started the runs they started,
	// Duplicated the fire times that found their run already there,
	// Refused the starts refused (run params the workflow forbids), Missed
	// the fire times the missed-fire policy skipped.
	Claimed    int   `json:"claimed"`
	Started    int   `json:"started"`
	Duplicated int   `json:"duplicated"`
	Refused    int   `json:"refused"`
	Missed     int64 `json:"missed"`
	// Pending counts workflows whose trigger rows were built first.
	Pending int `json:"pending_synced"`
	// Paused: an operator paused every trigger (maestro ops triggers
	// pause); nothing was claimed.
	Paused bool `json:"paused,omitempty"`
	// MaxLag is how late the latest started run was started: the
	// longest time between a started run's fire time (its trigger's
	// delay included) and the commit that created it.
	// The invocation logs it as max_lag_ms and emits it as TriggerLag.
	MaxLag time.Duration `json:"-"`
}

func (s *Stats) add(o Stats) {
	s.Batches += o.Batches
	s.Claimed += o.Claimed
	s.Started += o.Started
	s.Duplicated += o.Duplicated
	s.Refused += o.Refused
	s.Paused = s.Paused || o.Paused
	s.Missed += o.Missed
	s.Pending += o.Pending
	s.MaxLag = max(s.MaxLag, o.MaxLag)
}

// FireDue fires batches, Workers at a time, until no trigger is due, or
// until ctx's deadline is closer than the margin.
func (s *Scheduler) FireDue(ctx context.Context) (Stats, error) {
	var total Stats
	start := time.Now()
	defer func() {
		if total.Paused {
			s.cfg.Logger.Info("time triggers paused by an operator (maestro ops triggers resume)")
		}
		if total.Claimed > 0 || total.Pending > 0 {
			s.cfg.Logger.Info("time triggers fired", "batches", total.Batches, "claimed", total.Claimed,
				"started", total.Started, "duplicated", total.Duplicated, "refused", total.Refused, "missed", total.Missed,
				"pending_synced", total.Pending, "duration_ms", time.Since(start).Milliseconds())
		}
	}()
	for {
		if s.nearDeadline(ctx) {
			return total, nil
		}
		n, err := trigger.SyncPending(ctx, s.db, s.cfg.Clock(), 100)
		total.Pending += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !s.nearDeadline(ctx) {
				st, err := s.FireBatch(ctx)
				mu.Lock()
				total.add(st)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				stop := err != nil || firstErr != nil
				mu.Unlock()
				if stop || st.Claimed == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	return total, firstErr
}

func (s *Scheduler) nearDeadline(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < s.cfg.DeadlineMargin
}

// fired is what a batch did with one claimed trigger.
type fired struct {
	row    trigger.Trigger
	items  []int // indexes of its starts in the batch
	next   time.Time
	missed int64
	err    string // why it cannot be scheduled
}

// FireBatch claims one batch of due triggers and fires them in one
// transaction.
func (s *Scheduler) FireBatch(ctx context.Context) (Stats, error) {
	var st Stats
	var results []execution.BatchResult
	var earliest time.Time // the earliest fire time of a started run
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// Under the pause lock, shared: a pause waits for the batches
		// under way, and none starts a run after it.
		paused, err := ops.TriggersPausedLocked(ctx, tx)
		if err != nil || paused {
			st.Paused = paused
			return err
		}
		now := s.cfg.Clock()
		rows, err := trigger.Claim(ctx, tx, now, s.cfg.BatchSize)
		if err != nil || len(rows) == 0 {
			return err
		}
		st = Stats{Batches: 1, Claimed: len(rows)}
		var starts []execution.BatchStart
		fs := make([]fired, len(rows))
		for i, row := range rows {
			f := &fs[i]
			f.row = row
			c, err := s.compile(row)
			if err != nil {
				f.err = err.Error()
				continue
			}
			delay := time.Duration(row.DelaySeconds) * time.Second
			next := row.NextFire.Add(-delay) // an ACTIVE row has both times
			if row.NextSchedule != nil {
				next = *row.NextSchedule
			}
			var times []time.Time
			times, f.next, f.missed = plan(c, next, delay, now, s.cfg.CatchUp, s.cfg.MaxFiresPerTrigger)
			st.Missed += f.missed
			for _, t := range times {
				f.items = append(f.items, len(starts))
				starts = append(starts, triggerStart(row, t.Add(delay)))
			}
		}
		results, err = s.runs.StartBatchTx(ctx, tx, starts)
		if err != nil {
			return err
		}
		adv := make([]trigger.Advance, len(fs))
		for i, f := range fs {
			a := trigger.Advance{WorkflowID: f.row.WorkflowID, Index: f.row.Index, Missed: f.missed, Error: f.err, Invalid: f.err != ""}
			if !f.next.IsZero() {
				next := f.next
				a.Next = &next
			}
			for _, k := range f.items {
				r := results[k]
				switch {
				case r.Err != nil:
					st.Refused++
					a.Error = r.Err.Error()
					s.cfg.Logger.Warn("time trigger start refused", "workflow_id", f.row.WorkflowID,
						"trigger_index", f.row.Index, "error", r.Err.Error())
					continue
				case r.Duplicated:
					st.Duplicated++
				default:
					st.Started++
				}
				fire := fireTime(starts[k])
				if earliest.IsZero() || fire.Before(earliest) {
					earliest = fire
				}
				a.Fire, a.InstanceID = &fire, r.InstanceID
			}
			adv[i] = a
		}
		if err := trigger.AdvanceAll(ctx, tx, now, adv); err != nil {
			return err
		}
		if s.testHookInTx != nil {
			s.testHookInTx(len(rows))
		}
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("fire time triggers: %w", err)
	}
	if !earliest.IsZero() {
		st.MaxLag = max(0, s.cfg.Clock().Sub(earliest))
	}
	s.runs.AfterBatch(ctx, results)
	return st, nil
}

// compile returns the trigger's schedule, compiled once per key.
func (s *Scheduler) compile(row trigger.Trigger) (*schedule.Compiled, error) {
	s.mu.Lock()
	c, ok := s.compiled[row.Key]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	var tt workflow.TimeTrigger
	if err := json.Unmarshal(row.Definition, &tt); err != nil {
		return nil, fmt.Errorf("decode time trigger: %w", err)
	}
	c, err := schedule.Compile(tt.ScheduleTrigger())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.compiled) > 100_000 {
		s.compiled = map[string]*schedule.Compiled{}
	}
	s.compiled[row.Key] = c
	s.mu.Unlock()
	return c, nil
}

// triggerStart is the start of a trigger's run for a fire time: the
// active version, a request id from the workflow, the trigger and the fire
// time, a TIME initiator and RUN_TS, as Maestro's time trigger starts one.
func triggerStart(row trigger.Trigger, fire time.Time) execution.BatchStart {
	ms := fire.UnixMilli()
	return execution.BatchStart{
		WorkflowID: row.WorkflowID,
		Version:    row.Version,
		RequestID:  schedule.RequestID(row.WorkflowID, row.Key, fire),
		Initiator: map[string]any{"type": "TIME", "trigger_uuid": row.UUID, "trigger_time": ms,
			"timezone": row.Timezone, "depth": 0},
		RunParams: workflow.Params{"RUN_TS": {Type: workflow.ParamTypeLong, Value: ms}},
	}
}

func fireTime(st execution.BatchStart) time.Time {
	return time.UnixMilli(st.Initiator["trigger_time"].(int64))
}
