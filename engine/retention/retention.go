// Package retention archives and deletes old runs (docs/operations.md,
// "Retention and archival"). An Archiver pass takes terminal runs past
// their retention, oldest first, in small batches: it reads a batch with
// its steps, timelines, signal waits, lineage, signals, output data and
// completions, writes it to the archive (engine/archive) as gzip JSON lines
// partitioned by workflow and date, then deletes the batch in one short
// transaction that skips rows anyone holds (SKIP LOCKED) and gives up
// rather than wait (lock_timeout), recording each run's object in
// run_archive. Runs that are not terminal, the latest run of each instance
// of an active workflow and the child runs of a live root run are never
// taken. Lookup reads an archived run back for the API.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/startstop"
)

// PropertyRetentionDays is the workflow property that sets how many days
// the workflow's ended runs are kept in the database before they are
// archived (an integer from 1 to MaxRetentionDays). It is not a property
// of Netflix Maestro's; the name is chosen so that it cannot clash with
// one.
const PropertyRetentionDays = "run_retention_days"

// MaxRetentionDays bounds run_retention_days (100 years).
const MaxRetentionDays = 36500

// Config configures an Archiver.
type Config struct {
	// Retention is how long the runs of a workflow without
	// run_retention_days are kept after they ended (MAESTRO_RETENTION).
	// Required; at least MinRetention.
	Retention time.Duration
	// BatchSize is how many runs one batch archives and deletes (default
	// 500): one short transaction deletes them with their steps.
	BatchSize int
	// MaxRuns bounds the runs one pass archives (default 100,000), so a
	// pass that catches up with a long backlog still ends.
	MaxRuns int
	// Pause is the wait between two batches (default 50ms), leaving the
	// database to the engine.
	Pause time.Duration
	// LockTimeout bounds how long the delete waits for a lock it needs
	// (default 1s); past it the batch is left for the next pass.
	LockTimeout time.Duration
	// Interval is how often Start runs a pass (default 10 minutes).
	Interval time.Duration
	// Logger is required.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// deadlineMargin is the time a pass leaves before its context's deadline
// (a Lambda invocation's): it starts no batch later than that.
const deadlineMargin = 30 * time.Second

// MinRetention is the shortest deployment retention accepted: events and
// everything else read from a run soon after it ends must be done with it.
const MinRetention = time.Hour

// Archiver archives and deletes old runs.
type Archiver struct {
	db     *pgxpool.Pool
	store  archive.Store
	cfg    Config
	runner startstop.Runner
}

// New builds an archiver over db writing to store.
func New(db *pgxpool.Pool, store archive.Store, cfg Config) (*Archiver, error) {
	if db == nil || store == nil {
		return nil, errors.New("retention: a database and an archive store are required")
	}
	if cfg.Logger == nil {
		return nil, errors.New("retention: Config.Logger is required")
	}
	if cfg.Retention < MinRetention {
		return nil, fmt.Errorf("retention: the retention %s is shorter than %s", cfg.Retention, MinRetention)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 100_000
	}
	if cfg.Pause < 0 {
		cfg.Pause = 0
	} else if cfg.Pause == 0 {
		cfg.Pause = 50 * time.Millisecond
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Archiver{db: db, store: store, cfg: cfg}, nil
}

// Result is what a pass did.
type Result struct {
	// Runs and Steps are the runs and step attempts archived and deleted.
	Runs  int64 `json:"runs"`
	Steps int64 `json:"steps"`
	// Skipped counts runs archived but left in the database because
	// someone held them (they are taken again by a later pass).
	Skipped int64 `json:"skipped"`
	// Batches and Objects count the batches and the archive objects
	// written.
	Batches int `json:"batches"`
	Objects int `json:"objects"`
	// Bytes is the compressed size written.
	Bytes int64 `json:"bytes"`
	// Lag is how long past its cutoff the oldest archivable run still in
	// the database ended (0 when none is left).
	Lag time.Duration `json:"lag_ns"`
	// More is true when the pass stopped at MaxRuns or its deadline with
	// runs left to archive.
	More bool `json:"more"`
}

// Start runs a pass every Interval until Stop; it does not block.
func (a *Archiver) Start(ctx context.Context) error { return a.runner.Start(ctx, a.loop) }

// Stop ends the loop and waits for it; it is idempotent.
func (a *Archiver) Stop() { a.runner.Stop() }

func (a *Archiver) loop(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		res, err := a.Run(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			a.cfg.Logger.Warn("archive old runs", "error", err.Error())
		case res.Runs > 0:
			a.cfg.Logger.Info("archived old runs", "runs", res.Runs, "steps", res.Steps, "objects", res.Objects,
				"bytes", res.Bytes, "skipped", res.Skipped, "more", res.More)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Run is one pass: batches until no archivable run is left, MaxRuns are
// done or ctx ends (a deadline stops it between batches, 30 s before it,
// with what was done). An error stops the pass; what earlier batches did stands.
func (a *Archiver) Run(ctx context.Context) (Result, error) {
	var res Result
	now := a.cfg.Now()
	retention := int64(a.cfg.Retention / time.Second)
	earliest, err := a.earliestCutoff(ctx, now, retention)
	if err != nil {
		return res, err
	}
	skipped := map[runKey]bool{}
	for res.Runs+res.Skipped < int64(a.cfg.MaxRuns) {
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < deadlineMargin {
			res.More = true
			break
		}
		found, tried, err := a.batch(ctx, now, retention, earliest, &res, skipped)
		if err != nil {
			return res, err
		}
		// Done when the candidates ran out, or when every candidate left
		// at the head of the queue is one this pass skipped already.
		if found < a.cfg.BatchSize || tried == 0 {
			break
		}
		if a.cfg.Pause > 0 {
			select {
			case <-ctx.Done():
				return res, nil
			case <-time.After(a.cfg.Pause):
			}
		}
	}
	var oldest *time.Time
	if err := a.db.QueryRow(ctx, sqlOldestArchivable, now, retention, earliest).Scan(&oldest); err != nil {
		return res, fmt.Errorf("retention: read the oldest archivable run: %w", err)
	}
	if oldest != nil {
		res.More = true
		res.Lag = max(0, now.Sub(*oldest)-a.cfg.Retention)
	}
	return res, nil
}

// earliestCutoff is the end time before which a run may be archivable
// under the shortest retention any workflow has.
func (a *Archiver) earliestCutoff(ctx context.Context, now time.Time, retention int64) (time.Time, error) {
	var shortest *int64
	if err := a.db.QueryRow(ctx, sqlShortestRetention).Scan(&shortest); err != nil {
		return time.Time{}, fmt.Errorf("retention: read workflows' retention: %w", err)
	}
	if shortest != nil && *shortest < retention {
		retention = *shortest
	}
	return now.Add(-time.Duration(retention) * time.Second), nil
}

func renumber(sql string, to map[string]string) string {
	pairs := make([]string, 0, 2*len(to))
	for from, with := range to {
		pairs = append(pairs, from, with)
	}
	return strings.NewReplacer(pairs...).Replace(sql)
}
