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

// Sink receives events in position order. Publish returns nil once the
// sink has accepted every event; on an error the forwarder offers them
// again (at least once), so a sink may see an event twice.
type Sink interface {
	Publish(ctx context.Context, events []Event) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, events []Event) error

// Publish calls f.
func (f SinkFunc) Publish(ctx context.Context, events []Event) error { return f(ctx, events) }

// ForwarderConfig configures a Forwarder.
type ForwarderConfig struct {
	// Name names the forwarder's cursor and its lock: one forwarder of a
	// name runs at a time across all processes (the others wait to take
	// over). Required.
	Name string
	// Sink receives the events. Required.
	Sink Sink
	// Batch is how many events are read and published at once (default
	// 500).
	Batch int
	// PollInterval is how often the outbox is read when it had nothing new
	// (default 100ms); Wake reads it sooner.
	PollInterval time.Duration
	// MinInterval is the least time between two reads that are not full
	// batches (default 10ms): under load, wake-ups after every write then
	// cost one read per interval rather than one per write.
	MinInterval time.Duration
	// TakeOverInterval is how often a forwarder that is not the leader
	// tries to become it (default 2s). The lock goes with the leader's
	// database session, so a leader that dies frees it at once.
	TakeOverInterval time.Duration
	// MaxBackoff caps the wait between retries of a failing sink (default
	// 5s).
	MaxBackoff time.Duration
	// Logger is required.
	Logger *slog.Logger
	// Private makes a forwarder feed this process only (the live hub of
	// maestro dev): every process runs its own, from the outbox's end when
	// it starts, without the shared lock or a stored cursor. Without it a
	// second process's hub waited forever for the first's lock (issue 27
	// N4). Name then only names it in logs.
	Private bool
}

func (c *ForwarderConfig) defaults() error {
	if c.Name == "" || c.Sink == nil || c.Logger == nil {
		return errors.New("event: ForwarderConfig.Name, Sink and Logger are required")
	}
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.MinInterval <= 0 {
		c.MinInterval = min(10*time.Millisecond, c.PollInterval)
	}
	if c.TakeOverInterval <= 0 {
		c.TakeOverInterval = 2 * time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Second
	}
	return nil
}

// cursorTouchInterval is how often a leader marks its cursor alive while it
// does not move, so that the cleaner keeps waiting for it (see Cleaner).
const cursorTouchInterval = time.Minute

// cursorMoveInterval is how often a leader writes its position while
// events keep coming.
const cursorMoveInterval = 250 * time.Millisecond

// Forwarder moves events from the outbox to a sink in position order. It
// moves its cursor past events only once the sink has accepted them, so a
// crash repeats a batch rather than losing it.
type Forwarder struct {
	db     *pgxpool.Pool
	cfg    ForwarderConfig
	wake   chan struct{}
	runner startstop.Runner
}

// NewForwarder builds a forwarder over db.
func NewForwarder(db *pgxpool.Pool, cfg ForwarderConfig) (*Forwarder, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Forwarder{db: db, cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Start runs the forwarder until Stop; it does not block.
func (f *Forwarder) Start(ctx context.Context) error { return f.runner.Start(ctx, f.run) }

// Stop stops the forwarder and waits for it. Idempotent.
func (f *Forwarder) Stop() { f.runner.Stop() }

// Wake makes the forwarder read the outbox now, for a process that has
// just written events.
func (f *Forwarder) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *Forwarder) run(ctx context.Context) {
	log := f.cfg.Logger.With("forwarder", f.cfg.Name)
	if f.cfg.Private {
		f.tail(ctx, log)
		return
	}
	for ctx.Err() == nil {
		led, err := f.lead(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("event forwarder interrupted; retrying", "error", err.Error())
		}
		wait := f.cfg.TakeOverInterval
		if led {
			wait = f.cfg.PollInterval
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// lead takes the forwarder's lock and, while it holds it, forwards events.
// led reports whether it got the lock.
func (f *Forwarder) lead(ctx context.Context) (led bool, err error) {
	conn, err := f.db.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, lockCursorSQL, f.cfg.Name).Scan(&led); err != nil {
		return false, fmt.Errorf("lock event cursor %s: %w", f.cfg.Name, err)
	}
	if !led {
		return false, nil
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, uerr := conn.Exec(unlockCtx, unlockCursorSQL, f.cfg.Name)
		if uerr == nil {
			_, uerr = conn.Exec(unlockCtx, `RESET synchronous_commit`)
		}
		if uerr != nil {
			// A session whose unlock failed cannot be trusted with the lock
			// state: close it so the lock goes with it.
			_ = conn.Conn().Close(unlockCtx)
		}
	}()
	// Cursor moves need not wait for the WAL flush: one lost in a crash
	// sends its events again, which consumers deduplicate.
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		return true, fmt.Errorf("configure the forwarder's session: %w", err)
	}
	pos, err := readCursor(ctx, conn, f.cfg.Name)
	if err != nil {
		return true, err
	}
	// The cursor is moved at most every cursorMoveInterval while events
	// flow, and whenever they stop: a crash sends at most that much again.
	moved, movedAt, touched := pos, time.Now(), time.Now()
	defer func() {
		if moved == pos {
			return
		}
		// A stop (or a failure) hands over where this leader got to; the
		// session may have gone with a cancelled query, so another one is
		// tried. The cursor only moves forward, whoever leads by then.
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := moveCursor(saveCtx, conn, f.cfg.Name, pos); err != nil {
			_ = moveCursor(saveCtx, f.db, f.cfg.Name, pos)
		}
	}()
	for {
		read := time.Now()
		evs, err := ReadAfter(ctx, conn, pos, f.cfg.Batch)
		if err != nil {
			return true, err
		}
		if len(evs) > 0 {
			if err := f.publish(ctx, evs); err != nil {
				return true, err
			}
			pos = evs[len(evs)-1].Position
		}
		if pos != moved && (len(evs) == 0 || time.Since(movedAt) >= cursorMoveInterval) {
			if err := moveCursor(ctx, conn, f.cfg.Name, pos); err != nil {
				return true, err
			}
			moved, movedAt, touched = pos, time.Now(), time.Now()
		}
		if len(evs) == f.cfg.Batch {
			continue
		}
		if time.Since(touched) > cursorTouchInterval {
			if _, err := conn.Exec(ctx, touchCursorSQL, f.cfg.Name); err != nil {
				return true, fmt.Errorf("touch event cursor %s: %w", f.cfg.Name, err)
			}
			touched = time.Now()
		}
		select {
		case <-ctx.Done():
			return true, nil
		case <-f.wake:
			if wait := f.cfg.MinInterval - time.Since(read); wait > 0 {
				select {
				case <-ctx.Done():
					return true, nil
				case <-time.After(wait):
				}
			}
		case <-time.After(f.cfg.PollInterval):
		}
	}
}

// tail forwards the events written after it started, in position order,
// until ctx ends (a Private forwarder). Its position lives in memory only.
func (f *Forwarder) tail(ctx context.Context, log *slog.Logger) {
	var pos Position
	for {
		err := f.db.QueryRow(ctx, endSQL).Scan(&pos.TX, &pos.ID)
		if err == nil || errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("event forwarder: read the outbox's end; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.cfg.PollInterval):
		}
	}
	for ctx.Err() == nil {
		read := time.Now()
		evs, err := ReadAfter(ctx, f.db, pos, f.cfg.Batch)
		if err != nil && ctx.Err() == nil {
			log.Warn("event forwarder interrupted; retrying", "error", err.Error())
		}
		if len(evs) > 0 {
			if err := f.publish(ctx, evs); err != nil {
				continue // ctx ended
			}
			pos = evs[len(evs)-1].Position
			if len(evs) == f.cfg.Batch {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
			if wait := f.cfg.MinInterval - time.Since(read); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		case <-time.After(f.cfg.PollInterval):
		}
	}
}

// publish hands events to the sink until it accepts them or ctx ends.
func (f *Forwarder) publish(ctx context.Context, evs []Event) error {
	backoff := 100 * time.Millisecond
	for {
		err := f.cfg.Sink.Publish(ctx, evs)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.cfg.Logger.Warn("event sink refused a batch; retrying", "forwarder", f.cfg.Name,
			"first_event_id", evs[0].EventID(), "events", len(evs), "retry_in", backoff.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, f.cfg.MaxBackoff)
	}
}
