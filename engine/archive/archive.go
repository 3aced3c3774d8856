// Package archive keeps the objects of the run archive (docs/operations.md,
// "Retention and archival"): gzip-compressed JSON lines, one object per
// batch of archived runs, under keys partitioned by workflow and date. A
// Store is S3 in AWS (S3) and a directory locally (Dir); both are written
// once per key and read back whole.
package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// ErrNotFound reports a key the store does not hold.
var ErrNotFound = errors.New("archive object not found")

// Store holds archive objects by key.
type Store interface {
	// Put writes body under key, replacing an object of that key.
	Put(ctx context.Context, key string, body []byte) error
	// Get reads the object of key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
}

// ContentType is every object's type: the gzip file of the JSON lines
// (stored as it is, not as a Content-Encoding that HTTP clients would undo).
const ContentType = "application/gzip"

// Key names an object of runs of one workflow that ended on one day (UTC):
// runs/workflow_id=<id>/date=<YYYY-MM-DD>/<batch>.jsonl.gz. The workflow id
// is path-escaped, so an id never adds a level; Hive-style partitions let
// Athena or Spark read the archive as a table partitioned by both.
func Key(workflowID string, ended time.Time, batch string) string {
	return fmt.Sprintf("runs/workflow_id=%s/date=%s/%s.jsonl.gz",
		url.PathEscape(workflowID), ended.UTC().Format(time.DateOnly), batch)
}

// Encode writes records as gzip-compressed JSON lines, one record a line.
// Each record is encoded once, compact: a json.RawMessage inside a record
// is checked and compacted in that same pass, so callers hand over their
// values rather than lines they marshalled first.
func Encode[T any](records []T) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("archive: gzip writer: %w", err)
	}
	// The Encoder ends each value with a newline, which makes it a line.
	enc := json.NewEncoder(zw)
	for i, r := range records {
		if err := enc.Encode(r); err != nil {
			return nil, fmt.Errorf("archive: record %d: %w", i, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("archive: finish gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// MaxLine bounds one record's line when decoding (a run with its steps).
const MaxLine = 256 << 20

// Decode reads what Encode wrote, calling each with every line in order
// until it returns false.
func Decode(body []byte, each func(json.RawMessage) bool) error {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("archive: not gzip: %w", err)
	}
	defer zr.Close()
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !each(json.RawMessage(bytes.Clone(line))) {
			return nil
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("archive: read lines: %w", err)
	}
	return nil
}

// validKey refuses keys that could leave a directory store's root or that
// S3 would read differently.
func validKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return fmt.Errorf("archive: bad key %q", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("archive: bad key %q", key)
		}
	}
	return nil
}
