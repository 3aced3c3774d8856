package iceberg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/tablechange"
)

// EnvManifestLocation is where the JSON manifests of ranges that added
// more than MaxListedFiles files are written: s3://bucket/prefix/.
const EnvManifestLocation = "MAESTRO_ICEBERG_MANIFEST_LOCATION"

// FromEnv builds the Reader of MAESTRO_ICEBERG_CATALOG_URI and
// MAESTRO_ICEBERG_WAREHOUSE, and the Manifests of
// MAESTRO_ICEBERG_MANIFEST_LOCATION (nil when unset). Both are nil when no
// catalog is configured. s3Opts configure the manifests' S3 client (path
// style in the emulator).
func FromEnv(awsCfg aws.Config, log *slog.Logger, s3Opts ...func(*s3.Options)) (*Reader, *Manifests, error) {
	cfg, ok, err := ConfigFromEnv()
	if err != nil || !ok {
		if err == nil && os.Getenv(EnvManifestLocation) != "" {
			err = fmt.Errorf("%s is set but %s is not", EnvManifestLocation, EnvCatalogURI)
		}
		return nil, nil, err
	}
	r, err := NewReader(cfg, awsCfg, log)
	if err != nil {
		return nil, nil, err
	}
	loc := strings.TrimSpace(os.Getenv(EnvManifestLocation))
	if loc == "" {
		return r, nil, nil
	}
	m, err := ParseManifestLocation(loc)
	if err != nil {
		return nil, nil, err
	}
	m.S3 = s3.NewFromConfig(awsCfg, s3Opts...)
	return r, &m, nil
}

// ParseManifestLocation reads s3://bucket/prefix/ (the prefix may be
// empty; a missing final slash is added).
func ParseManifestLocation(loc string) (Manifests, error) {
	rest, ok := strings.CutPrefix(loc, "s3://")
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return Manifests{}, fmt.Errorf("%s %q: want s3://bucket/prefix/", EnvManifestLocation, loc)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return Manifests{Bucket: bucket, Prefix: prefix}, nil
}

// Write is Put with the signature of the signal broker's manifest writer
// (the range is in the key already).
func (m Manifests) Write(ctx context.Context, key string, _ tablechange.Range, files []tablechange.DataFile) (string, error) {
	return m.Put(ctx, key, files)
}

// WriterFunc is m.Write, or nil when m is nil (no manifest location): the
// signal broker's manifest writer.
func (m *Manifests) WriterFunc() func(context.Context, string, tablechange.Range, []tablechange.DataFile) (string, error) {
	if m == nil {
		return nil
	}
	return m.Write
}
