// Package backfill runs the backfill driver in an engine process
// (`maestro engine`, `maestro dev`): every Interval, and at once when
// kicked, it makes one pass over the live backfills (backfill.Store.Drive).
// Every engine process runs one; a backfill's row lock keeps two from
// driving the same backfill at once, and a pass that dies with its
// process leaves nothing half done (docs/backfill.md).
package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/startstop"
)

// Environment variables of FromEnv.
const (
	// EnvInterval sets Driver.Interval (a Go duration).
	EnvInterval = "MAESTRO_BACKFILL_INTERVAL"
	// EnvTestPause, tests only, holds each pass that starts runs open this
	// long before its commit, logging "test pause inside a backfill pass".
	EnvTestPause = "MAESTRO_BACKFILL_TEST_PAUSE"
)

// DefaultInterval is the time between passes without a kick.
const DefaultInterval = 2 * time.Second

// Driver drives backfills in the background.
type Driver struct {
	// Store is the backfill store. Required.
	Store *backfill.Store
	// Logger receives a line per failed pass. Required.
	Logger *slog.Logger
	// Interval is the time between passes (DefaultInterval when zero).
	Interval time.Duration
	// TestPause, tests only, holds each pass that starts runs open this
	// long before its commit (EnvTestPause).
	TestPause time.Duration
	// Passed, when set, is told what each pass that did something did
	// (tests, metrics).
	Passed func(backfill.DriveStats)

	once   sync.Once
	kick   chan struct{}
	runner startstop.Runner
}

// FromEnv builds a Driver with its interval from the environment.
func FromEnv(getenv func(string) string, store *backfill.Store, logger *slog.Logger) (*Driver, error) {
	d := &Driver{Store: store, Logger: logger}
	for name, dst := range map[string]*time.Duration{EnvInterval: &d.Interval, EnvTestPause: &d.TestPause} {
		if v := getenv(name); v != "" {
			iv, err := time.ParseDuration(v)
			if err != nil || iv <= 0 {
				return nil, fmt.Errorf("%s=%q: want a duration such as 2s", name, v)
			}
			*dst = iv
		}
	}
	return d, nil
}

func (d *Driver) init() { d.once.Do(func() { d.kick = make(chan struct{}, 1) }) }

// Kick asks for a pass now; it never blocks.
func (d *Driver) Kick() {
	d.init()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Start begins driving and returns at once.
func (d *Driver) Start(ctx context.Context) error {
	if d.Store == nil || d.Logger == nil {
		return errors.New("backfill: Driver.Store and Driver.Logger are required")
	}
	d.init()
	if d.Interval <= 0 {
		d.Interval = DefaultInterval
	}
	if d.TestPause > 0 {
		d.Store.SetTestPause(func() {
			d.Logger.Warn("test pause inside a backfill pass", "pause", d.TestPause.String())
			time.Sleep(d.TestPause)
		})
	}
	return d.runner.Start(ctx, d.loop)
}

// Stop ends the passes and waits for the one in progress; idempotent.
func (d *Driver) Stop() { d.runner.Stop() }

func (d *Driver) loop(ctx context.Context) {
	t := time.NewTicker(d.Interval)
	defer t.Stop()
	for {
		st, err := d.Store.Drive(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			d.Logger.Warn("backfill pass failed; the next pass retries", "error", err.Error())
		case err == nil && d.Passed != nil && (st.Started > 0 || st.Skipped > 0 || st.Ended > 0):
			d.Passed(st)
		}
		if st.Started > 0 || st.Ended > 0 {
			d.Logger.Info("backfill pass", "backfills", st.Backfills, "started", st.Started, "skipped", st.Skipped, "ended", st.Ended)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.kick:
		}
	}
}
