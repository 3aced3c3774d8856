package iceberg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/tablechange"
)

// MaxListedFiles is how many added files a run's added_files param lists;
// a range that added more hands the run a manifest object instead.
const MaxListedFiles = 1000

// ManifestDoc is the JSON manifest object of a range's added files.
type ManifestDoc struct {
	// Files are the data files, in the range's snapshot order.
	Files []tablechange.DataFile `json:"files"`
	// Count and Records are their number and total rows.
	Count   int   `json:"count"`
	Records int64 `json:"records"`
}

// Manifests writes JSON manifests of added files to
// s3://Bucket/Prefix<key>.json.
type Manifests struct {
	S3     *s3.Client
	Bucket string
	Prefix string
}

// Put writes the manifest of files under runKey (for example
// "<workflow>/<table>/<from>-<to>"; a key is the same for a retried run,
// so a retry overwrites it with the same content) and returns its s3://
// URI.
func (m Manifests) Put(ctx context.Context, runKey string, files []tablechange.DataFile) (string, error) {
	if m.S3 == nil || m.Bucket == "" {
		return "", errors.New("iceberg manifests: no bucket configured")
	}
	if runKey == "" || strings.Contains(runKey, "..") {
		return "", fmt.Errorf("iceberg manifests: bad key %q", runKey)
	}
	doc := ManifestDoc{Files: files, Count: len(files)}
	if doc.Files == nil {
		doc.Files = []tablechange.DataFile{}
	}
	for _, f := range files {
		doc.Records += f.Records
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encode the manifest of %d files: %w", len(files), err)
	}
	key := path.Clean(m.Prefix + runKey + ".json")
	if _, err := m.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(m.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json")}); err != nil {
		return "", fmt.Errorf("write the manifest of %d files to s3://%s/%s: %w", len(files), m.Bucket, key, err)
	}
	return "s3://" + m.Bucket + "/" + key, nil
}
