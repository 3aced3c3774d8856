package scheduler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/execution"
)

// Environment variables FromEnv reads; all optional.
const (
	// EnvTick is how often maestro dev's loop looks for due triggers.
	EnvTick = "MAESTRO_TRIGGER_TICK"
	// EnvBatch is how many triggers one transaction claims.
	EnvBatch = "MAESTRO_TRIGGER_BATCH"
	// EnvWorkers is how many batches run at once.
	EnvWorkers = "MAESTRO_TRIGGER_WORKERS"
	// EnvCatchUp is the missed-fire window (Go duration).
	EnvCatchUp = "MAESTRO_TRIGGER_CATCHUP"
	// EnvTestClock makes the scheduler's clock run fast, for tests:
	// "<anchor, epoch ms>,<speed>" reads anchor + (now - anchor) * speed.
	EnvTestClock = "MAESTRO_TEST_TRIGGER_CLOCK"
	// EnvTestPause holds every batch's transaction open this long before
	// its commit, for the kill test (a Go duration).
	EnvTestPause = "MAESTRO_TEST_TRIGGER_PAUSE"
)

// FromEnv builds a scheduler configured by base (its Logger, Metrics) and
// the environment (getenv), for maestro dev and the time-trigger Lambda. A
// malformed value is an error.
func FromEnv(db *pgxpool.Pool, runs *execution.Service, base Config, getenv func(string) string) (*Scheduler, error) {
	cfg := base
	logger := cfg.Logger
	if logger == nil {
		return nil, errors.New("scheduler: Config.Logger is required")
	}
	for name, dst := range map[string]*time.Duration{EnvTick: &cfg.Tick, EnvCatchUp: &cfg.CatchUp} {
		d, err := envDuration(getenv, name)
		if err != nil {
			return nil, err
		}
		if d > 0 {
			*dst = d
		}
	}
	var err error
	if v := getenv(EnvBatch); v != "" {
		if cfg.BatchSize, err = strconv.Atoi(v); err != nil || cfg.BatchSize <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive number", EnvBatch, v)
		}
	}
	if v := getenv(EnvWorkers); v != "" {
		if cfg.Workers, err = strconv.Atoi(v); err != nil || cfg.Workers <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive number", EnvWorkers, v)
		}
	}
	if v := getenv(EnvTestClock); v != "" {
		if cfg.Clock, err = fastClock(v); err != nil {
			return nil, err
		}
	}
	pause, err := envDuration(getenv, EnvTestPause)
	if err != nil {
		return nil, err
	}
	s, err := New(db, runs, cfg)
	if err != nil {
		return nil, err
	}
	if pause > 0 {
		s.testHookInTx = func(claimed int) {
			logger.Info("test pause inside a batch", "claimed", claimed, "pause_ms", pause.Milliseconds())
			time.Sleep(pause)
		}
	}
	return s, nil
}

func envDuration(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 2s", name, v)
	}
	return d, nil
}

// fastClock parses EnvTestClock.
func fastClock(v string) (func() time.Time, error) {
	a, s, ok := strings.Cut(v, ",")
	anchorMs, err1 := strconv.ParseInt(a, 10, 64)
	speed, err2 := strconv.ParseFloat(s, 64)
	if !ok || err1 != nil || err2 != nil || speed <= 0 {
		return nil, fmt.Errorf("%s=%q: want \"<anchor epoch ms>,<speed>\"", EnvTestClock, v)
	}
	anchor := time.UnixMilli(anchorMs)
	return func() time.Time {
		return anchor.Add(time.Duration(float64(time.Since(anchor)) * speed))
	}, nil
}
