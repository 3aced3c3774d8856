package archive

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/awsconf"
)

// The environment that chooses a process's archive store (FromEnv).
const (
	// EnvBucket names the S3 bucket of the archive (the CDK app sets it).
	EnvBucket = "MAESTRO_ARCHIVE_BUCKET"
	// EnvPrefix is the key prefix inside the bucket (optional).
	EnvPrefix = "MAESTRO_ARCHIVE_PREFIX"
	// EnvDir is a local directory archive (maestro dev, make run).
	EnvDir = "MAESTRO_ARCHIVE_DIR"
)

// FromEnv builds the store the environment names: S3 when EnvBucket is set
// (with the process's AWS configuration, engine/awsconf), else a directory
// when EnvDir is, else defaultDir when not empty; nil when none is.
func FromEnv(ctx context.Context, getenv func(string) string, defaultDir string) (Store, error) {
	if bucket := getenv(EnvBucket); bucket != "" {
		cfg, err := awsconf.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("archive: aws config: %w", err)
		}
		return NewS3(s3.NewFromConfig(cfg), bucket, getenv(EnvPrefix))
	}
	dir := getenv(EnvDir)
	if dir == "" {
		dir = defaultDir
	}
	if dir == "" {
		return nil, nil
	}
	return NewDir(dir)
}
