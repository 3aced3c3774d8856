package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/iceberg"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
)

// icebergFromEnv is the Iceberg catalog of MAESTRO_ICEBERG_CATALOG_URI
// and the manifests of MAESTRO_ICEBERG_MANIFEST_LOCATION (nil, nil when
// unset; docs/incremental.md).
func icebergFromEnv(ctx context.Context, logger *slog.Logger) (*iceberg.Reader, *iceberg.Manifests, error) {
	if os.Getenv(iceberg.EnvCatalogURI) == "" && os.Getenv(iceberg.EnvManifestLocation) == "" {
		return nil, nil, nil
	}
	awsCfg, err := awsconf.Load(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load the AWS configuration for the Iceberg catalog: %w", err)
	}
	return iceberg.FromEnv(awsCfg, logger)
}

// withIceberg gives a broker the Iceberg catalog of the environment, so
// that incremental runs get the files their range added.
func withIceberg(ctx context.Context, b *signalbroker.Broker, logger *slog.Logger) error {
	reader, manifests, err := icebergFromEnv(ctx, logger)
	if err != nil || reader == nil {
		return err
	}
	b.SetTableReader(reader, manifests.WriterFunc())
	return nil
}
