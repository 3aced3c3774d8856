package signalbroker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/startstop"
)

// Sweeper matches the signals the engine stored without matching them (a
// step's output signals, written with its terminal state): at once when
// Kick says some were committed, and every Interval, which catches up with
// those a crash left between the commit and the match. It runs in every
// engine process (and in `maestro dev`); any of them may match any pending
// signal, exactly once (ProcessPending).
type Sweeper struct {
	// Broker matches the signals. Required before Start.
	Broker *Broker
	// Logger receives a line per failed sweep. Required before Start.
	Logger *slog.Logger
	// Interval is the time between sweeps without a kick (2 s when zero).
	Interval time.Duration
	// Batch is how many signals one transaction matches (100 when zero).
	Batch int
	// Swept, when set, is told what each sweep that matched something did
	// (metrics, tests).
	Swept func(Stats)
	// TestPause, tests only, holds each sweep's transaction open this long
	// once it has claimed its signals (EnvTestPause).
	TestPause time.Duration

	once   sync.Once
	kick   chan struct{}
	runner startstop.Runner
}

// Defaults of a Sweeper.
const (
	DefaultSweepInterval = 2 * time.Second
	DefaultSweepBatch    = 100
)

func (s *Sweeper) init() {
	s.once.Do(func() { s.kick = make(chan struct{}, 1) })
}

// Kick asks for a sweep now: signals were committed. It never blocks, and
// may be called before Start.
func (s *Sweeper) Kick() {
	s.init()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Start begins sweeping and returns at once.
func (s *Sweeper) Start(ctx context.Context) error {
	if s.Broker == nil || s.Logger == nil {
		return errors.New("signalbroker: Sweeper.Broker and Sweeper.Logger are required")
	}
	s.init()
	if s.Interval <= 0 {
		s.Interval = DefaultSweepInterval
	}
	if s.Batch <= 0 {
		s.Batch = DefaultSweepBatch
	}
	if s.TestPause > 0 {
		s.Broker.testPause = func() {
			s.Logger.Warn("test pause inside a signal sweep", "pause", s.TestPause.String())
			time.Sleep(s.TestPause)
		}
	}
	return s.runner.Start(ctx, s.loop)
}

// Stop ends the sweeps and waits for the one in progress; idempotent.
func (s *Sweeper) Stop() { s.runner.Stop() }

func (s *Sweeper) loop(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// Sweep matches pending signals until none is left (or an error, left to
// the next sweep), starts the runs incremental triggers owe (changes
// received while a run of their table was in flight; docs/incremental.md),
// then matches the signals deferred while triggers were paused, once they
// are resumed.
func (s *Sweeper) Sweep(ctx context.Context) {
	s.sweepPending(ctx)
	s.sweepIncremental(ctx)
	for ctx.Err() == nil {
		stats, n, err := s.Broker.ProcessDeferred(ctx, s.Batch)
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("matching signals deferred by a trigger pause failed; the next sweep retries", "error", err.Error())
			}
			return
		}
		if n > 0 && s.Swept != nil {
			s.Swept(stats)
		}
		if n < s.Batch {
			return
		}
	}
}

func (s *Sweeper) sweepPending(ctx context.Context) {
	for ctx.Err() == nil {
		stats, n, err := s.Broker.ProcessPending(ctx, s.Batch)
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("matching pending signals failed; the next sweep retries", "error", err.Error())
			}
			return
		}
		if n > 0 && s.Swept != nil {
			s.Swept(stats)
		}
		if n < s.Batch {
			return
		}
	}
}

func (s *Sweeper) sweepIncremental(ctx context.Context) {
	for ctx.Err() == nil {
		started, n, err := s.Broker.ProcessIncremental(ctx, s.Batch)
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("starting the runs incremental triggers owe failed; the next sweep retries", "error", err.Error())
			}
			return
		}
		if started > 0 && s.Swept != nil {
			s.Swept(Stats{Started: started})
		}
		if n < s.Batch || started == 0 {
			return
		}
	}
}
