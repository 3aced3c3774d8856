// Package alert raises alerts from workflows' alerting properties
// (Maestro's alerting block: STEP_FAILURE, TCT_VIOLATION, LONG_RUNNING,
// BREAKPOINT_HIT, DEFINITION_CHANGE, RUN_SUCCESS, SUCCESS_WITHIN,
// DEPENDENCY_LATE). It is a consumer of the event outbox: it reads the
// events in order, exactly once (event.Consume), and writes each alert as
// an event of type ALERT, which the publisher sends to the alert topic.
// Alerts that fire on time rather than on an event (a TCT passing, a run
// running long) are timers it arms from events and fires when due. A run
// gets at most one alert of each type. See docs/events.md.
package alert

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/startstop"
)

// Reader is the alerting service's cursor in the outbox.
const Reader = "alerting"

// Config configures a Service.
type Config struct {
	// Logger is required.
	Logger *slog.Logger
	// LinkBase prefixes the run links of alerts (the API's base URL, e.g.
	// http://127.0.0.1:8080); empty leaves the links as paths.
	LinkBase string
	// PollInterval is how often new events are read when there were none
	// (default 500ms).
	PollInterval time.Duration
	// TimerInterval is how often due timers are fired (default 1s).
	TimerInterval time.Duration
	// Batch is how many events one transaction evaluates (default 500).
	Batch int
}

// Service evaluates alerting. Several engine nodes may run one: one of them
// reads the events at a time, and timers are fired with SKIP LOCKED.
type Service struct {
	db     *pgxpool.Pool
	cfg    Config
	runner startstop.Runner
}

// New builds the service over db.
func New(db *pgxpool.Pool, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		return nil, errors.New("alert: Config.Logger is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.TimerInterval <= 0 {
		cfg.TimerInterval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	return &Service{db: db, cfg: cfg}, nil
}

// Start runs the service until Stop; it does not block.
func (s *Service) Start(ctx context.Context) error {
	return s.runner.Start(ctx, s.consumeLoop, s.timerLoop)
}

// Stop stops the service and waits for it. Idempotent.
func (s *Service) Stop() { s.runner.Stop() }

func (s *Service) consumeLoop(ctx context.Context) {
	ready := false
	for ctx.Err() == nil {
		wait := s.cfg.PollInterval
		if !ready {
			if err := eventEnsureReader(ctx, s.db); err != nil {
				s.warn(ctx, "create the alerting cursor", err)
				wait = time.Second
			} else {
				ready = true
			}
		}
		if ready {
			n, err := s.ConsumeOnce(ctx)
			switch {
			case err != nil:
				s.warn(ctx, "evaluate alerting", err)
				wait = time.Second
			case n == s.cfg.Batch:
				wait = 0
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// AlertRetention is how long the record of an alert is kept: a run alive
// longer than this could be alerted again of the same type.
const AlertRetention = 90 * 24 * time.Hour

func (s *Service) timerLoop(ctx context.Context) {
	var cleaned time.Time
	for ctx.Err() == nil {
		if time.Since(cleaned) > time.Hour {
			if _, err := s.db.Exec(ctx, sqlForgetAlerts, AlertRetention); err != nil {
				s.warn(ctx, "forget old alerts", err)
			}
			cleaned = time.Now()
		}
		wait := s.cfg.TimerInterval
		n, err := s.FireDue(ctx)
		if err != nil {
			s.warn(ctx, "fire alert timers", err)
		} else if n == timerBatch {
			wait = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func (s *Service) warn(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		s.cfg.Logger.Warn(what, "error", err.Error())
	}
}
