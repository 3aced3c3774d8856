// Package signalsenv builds the signals Lambda's handler at cold start:
// the signal broker over the database, MAESTRO_S3_SIGNAL_RULES (a
// malformed value fails the cold start) and metrics on stdout.
package signalsenv

import (
	"context"
	"log/slog"
	"os"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
	"github.com/maestro-aws/maestro/functions/internal/coldstart"
	"github.com/maestro-aws/maestro/functions/internal/signals"
)

// Handler builds the signals handler from the environment.
func Handler(ctx context.Context, logger *slog.Logger) (*signals.Handler, error) {
	rules, err := signalmsg.ParseRules(os.Getenv("MAESTRO_S3_SIGNAL_RULES"))
	if err != nil {
		return nil, err
	}
	pool, groups, err := coldstart.PoolAndGroups(ctx, "signals")
	if err != nil {
		return nil, err
	}
	runs := execution.New(pool, definition.NewStore(pool), groups)
	return signals.New(signals.Config{Broker: signalbroker.New(pool, runs, logger), Rules: rules,
		Metrics: metrics.New(os.Stdout, metrics.ServiceSignals), Logger: logger})
}
