package event

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/startstop"
)

// CleanerConfig configures a Cleaner.
type CleanerConfig struct {
	// Retention is how long events are kept after they were written, so
	// that the feed can replay them (default 1h).
	Retention time.Duration
	// StaleCursor is how long a cursor may go unmoved and untouched before
	// the cleaner stops waiting for its reader (default 24h): a forwarder
	// that was removed must not keep every event for ever, while one that
	// runs touches its cursor every minute however long its sink refuses.
	StaleCursor time.Duration
	// Interval is how often old events are deleted (default 10s).
	Interval time.Duration
	// Batch is how many events one statement deletes at most (default
	// 5,000).
	Batch int
	// Logger is required.
	Logger *slog.Logger
}

// Cleaner deletes events past their retention that every live reader has
// passed. Several processes may run one: their deletes do not conflict.
type Cleaner struct {
	db     *pgxpool.Pool
	cfg    CleanerConfig
	runner startstop.Runner
}

// NewCleaner builds a cleaner over db.
func NewCleaner(db *pgxpool.Pool, cfg CleanerConfig) (*Cleaner, error) {
	if cfg.Logger == nil {
		return nil, errors.New("event: CleanerConfig.Logger is required")
	}
	if cfg.Retention <= 0 {
		cfg.Retention = time.Hour
	}
	if cfg.StaleCursor <= 0 {
		cfg.StaleCursor = 24 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	return &Cleaner{db: db, cfg: cfg}, nil
}

// Start runs the cleaner until Stop; it does not block.
func (c *Cleaner) Start(ctx context.Context) error { return c.runner.Start(ctx, c.run) }

func (c *Cleaner) run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := c.Clean(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("clean old events", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop stops the cleaner and waits for it. Idempotent.
func (c *Cleaner) Stop() { c.runner.Stop() }

// Clean deletes what is due now and returns how many events it deleted.
func (c *Cleaner) Clean(ctx context.Context) (int64, error) {
	// Most of the time the oldest event is younger than the retention:
	// one index probe says so.
	var due bool
	err := c.db.QueryRow(ctx, dueSQL, c.cfg.Retention).Scan(&due)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !due) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the oldest event: %w", err)
	}
	var total int64
	for {
		tag, err := c.db.Exec(ctx, cleanSQL, c.cfg.Retention, c.cfg.Batch, c.cfg.StaleCursor)
		if err != nil {
			return total, fmt.Errorf("delete old events: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(c.cfg.Batch) {
			return total, nil
		}
	}
}
