// Package signalsenv builds the signals Lambda's handler at cold start:
// the signal broker over the database, MAESTRO_S3_SIGNAL_RULES (a
// malformed value fails the cold start), the Iceberg catalog of
// MAESTRO_ICEBERG_CATALOG_URI / MAESTRO_ICEBERG_WAREHOUSE (optional) and
// metrics on stdout.
package signalsenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/iceberg"
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
	broker := signalbroker.New(pool, runs, logger)
	cfg := signals.Config{Broker: broker, Rules: rules, Metrics: metrics.New(os.Stdout, metrics.ServiceSignals), Logger: logger}
	// The Iceberg catalog that Glue Data Catalog and S3 Tables events'
	// snapshots are read from, and incremental runs' added files, when
	// MAESTRO_ICEBERG_CATALOG_URI is set (docs/incremental.md); without it
	// those events are unreadable and runs get no added_* params.
	if os.Getenv(iceberg.EnvCatalogURI) != "" || os.Getenv(iceberg.EnvManifestLocation) != "" {
		awsCfg, err := awsconf.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("load the AWS configuration for the Iceberg catalog: %w", err)
		}
		reader, manifests, err := iceberg.FromEnv(awsCfg, logger)
		if err != nil {
			return nil, err
		}
		broker.SetTableReader(reader, manifests.WriterFunc())
		cfg.Tables = reader
	}
	return signals.New(cfg)
}
