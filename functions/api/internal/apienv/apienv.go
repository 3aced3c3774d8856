// Package apienv builds the API Lambda's handler at cold start: the REST
// API over the database, without the web UI (`maestro ui` serves it next
// to a deployment, docs/ui.md).
package apienv

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/iceberg"
	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/functions/internal/coldstart"
)

// Handler builds the REST API handler from the environment.
func Handler(ctx context.Context, logger *slog.Logger) (*api.Server, error) {
	pool, groups, err := coldstart.PoolAndGroups(ctx, "api")
	if err != nil {
		return nil, err
	}
	defs := definition.NewStore(pool)
	// Archived runs answer from the archive bucket (MAESTRO_ARCHIVE_BUCKET).
	store, err := archive.FromEnv(ctx, os.Getenv, "")
	if err != nil {
		return nil, err
	}
	var archived *retention.Reader
	if store != nil {
		archived = retention.NewReader(pool, store)
	}
	// The Iceberg catalog, when MAESTRO_ICEBERG_CATALOG_URI is set
	// (docs/incremental.md).
	var reader *iceberg.Reader
	var manifests *iceberg.Manifests
	if os.Getenv(iceberg.EnvCatalogURI) != "" || os.Getenv(iceberg.EnvManifestLocation) != "" {
		awsCfg, err := awsconf.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("load the AWS configuration for the Iceberg catalog: %w", err)
		}
		if reader, manifests, err = iceberg.FromEnv(awsCfg, logger); err != nil {
			return nil, err
		}
	}
	return api.New(api.Config{
		DB: pool, Logger: logger, Definitions: defs, Runs: execution.New(pool, defs, groups),
		Admins:  authz.ParsePrincipals(os.Getenv("MAESTRO_ADMINS")),
		Events:  event.NewFeed(pool, nil, os.Getenv("MAESTRO_CLUSTER_NAME")),
		Archive: archived, Iceberg: reader, IcebergManifests: manifests,
	})
}
