// Package iceberg reads Apache Iceberg table metadata through an Iceberg
// REST catalog (S3 Tables' or the Glue Data Catalog's, both SigV4-signed)
// with github.com/apache/iceberg-go, to list what a range of snapshots
// changed: each snapshot's operation and commit time, and the data files
// each one added (docs/incremental.md, "What a run reads"). It implements
// tablechange.Reader for the incremental trigger, and writes the JSON
// manifest of a range too large to hand a run as a param (Manifests).
package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"

	// The s3:// FileIO the catalog's tables read their metadata with.
	_ "github.com/apache/iceberg-go/io/gocloud/s3"

	"github.com/maestro-aws/maestro/engine/tablechange"
)

// The environment variables that configure the catalog (docs/incremental.md).
const (
	// EnvCatalogURI is the Iceberg REST catalog's URI:
	// https://s3tables.<region>.amazonaws.com/iceberg for S3 Tables,
	// https://glue.<region>.amazonaws.com/iceberg for the Glue Data Catalog.
	EnvCatalogURI = "MAESTRO_ICEBERG_CATALOG_URI"
	// EnvWarehouse is the catalog's warehouse: the S3 Tables table bucket
	// ARN, or the account id (Glue).
	EnvWarehouse = "MAESTRO_ICEBERG_WAREHOUSE"
)

// Config is where the catalog is.
type Config struct {
	// CatalogURI is the REST catalog's base URI (without /v1).
	CatalogURI string
	// Warehouse is the default warehouse; a table whose TableRef names a
	// catalog (an S3 Tables table bucket ARN) is read from that one.
	Warehouse string
}

// ConfigFromEnv reads MAESTRO_ICEBERG_CATALOG_URI and
// MAESTRO_ICEBERG_WAREHOUSE; ok is false when the URI is not set (no
// reader is configured).
func ConfigFromEnv() (cfg Config, ok bool, err error) {
	cfg = Config{CatalogURI: strings.TrimSpace(os.Getenv(EnvCatalogURI)), Warehouse: strings.TrimSpace(os.Getenv(EnvWarehouse))}
	if cfg.CatalogURI == "" {
		if cfg.Warehouse != "" {
			return Config{}, false, fmt.Errorf("%s is set but %s is not", EnvWarehouse, EnvCatalogURI)
		}
		return Config{}, false, nil
	}
	if err := cfg.check(); err != nil {
		return Config{}, false, err
	}
	return cfg, true, nil
}

func (c Config) check() error {
	u, err := url.Parse(c.CatalogURI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: want an http(s) URL", EnvCatalogURI, c.CatalogURI)
	}
	return nil
}

// signingName is the SigV4 service a warehouse's catalog signs for: an S3
// Tables table bucket ARN is s3tables, anything else (an account id) is
// the Glue Data Catalog.
func signingName(warehouse string) string {
	if strings.HasPrefix(warehouse, "arn:") && strings.Contains(warehouse, ":s3tables:") {
		return "s3tables"
	}
	return "glue"
}

// Reader lists what ranges of snapshots changed. It is safe for
// concurrent use; it opens one REST catalog per warehouse, on first use.
type Reader struct {
	cfg Config
	aws aws.Config
	log *slog.Logger

	mu       sync.Mutex
	catalogs map[string]*rest.Catalog
}

var _ tablechange.Reader = (*Reader)(nil)

// NewReader returns a Reader of the catalog cfg names that signs its
// calls with awsCfg's credentials and region (the SDK's standard
// configuration; the data files' S3 client takes the same, or what the
// catalog vends).
func NewReader(cfg Config, awsCfg aws.Config, log *slog.Logger) (*Reader, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{cfg: cfg, aws: awsCfg, log: log, catalogs: map[string]*rest.Catalog{}}, nil
}

// warehouse is the warehouse a table is read from.
func (r *Reader) warehouse(t tablechange.TableRef) (string, error) {
	if t.Catalog != "" {
		return t.Catalog, nil
	}
	if r.cfg.Warehouse == "" {
		return "", fmt.Errorf("table %s names no catalog and %s is not set", t, EnvWarehouse)
	}
	return r.cfg.Warehouse, nil
}

// Catalog returns the REST catalog of a warehouse, opening it on first use.
func (r *Reader) Catalog(ctx context.Context, warehouse string) (*rest.Catalog, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.catalogs[warehouse]; ok {
		return c, nil
	}
	c, err := rest.NewCatalog(ctx, "maestro", r.cfg.CatalogURI,
		rest.WithWarehouseLocation(warehouse),
		rest.WithAwsConfig(r.aws),
		rest.WithSigV4RegionSvc(r.aws.Region, signingName(warehouse)))
	if err != nil {
		return nil, fmt.Errorf("open the Iceberg REST catalog %s (warehouse %s): %w", r.cfg.CatalogURI, warehouse, err)
	}
	r.catalogs[warehouse] = c
	return c, nil
}

// LoadTable loads a table's current metadata.
func (r *Reader) LoadTable(ctx context.Context, t tablechange.TableRef) (*table.Table, error) {
	wh, err := r.warehouse(t)
	if err != nil {
		return nil, err
	}
	c, err := r.Catalog(ctx, wh)
	if err != nil {
		return nil, err
	}
	tbl, err := c.LoadTable(ctx, table.Identifier{t.Namespace, t.Table})
	if err != nil {
		return nil, fmt.Errorf("load Iceberg table %s: %w", t, err)
	}
	return tbl, nil
}

// ErrNotInHistory reports a range the table's metadata cannot account
// for: a snapshot that is unknown (expired, or never committed) or a from
// snapshot that is not an ancestor of the to snapshot (a rollback).
var ErrNotInHistory = errors.New("snapshot range not in the table's history")

// Changes lists the range's snapshots, oldest first, by following the to
// snapshot's parent links back to (not including) the from snapshot, and
// the data files each of them added.
func (r *Reader) Changes(ctx context.Context, rg tablechange.Range) (tablechange.Changes, error) {
	if rg.ToSnapshotID == 0 {
		return tablechange.Changes{}, errors.New("iceberg: range without a to snapshot")
	}
	if rg.FromSnapshotID == rg.ToSnapshotID {
		return tablechange.Changes{}, nil
	}
	tbl, err := r.LoadTable(ctx, rg.Table)
	if err != nil {
		return tablechange.Changes{}, err
	}
	snaps, err := walk(tbl.Metadata(), rg)
	if err != nil {
		return tablechange.Changes{}, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return tablechange.Changes{}, fmt.Errorf("open the file IO of %s: %w", rg.Table, err)
	}
	var out tablechange.Changes
	for _, s := range snaps {
		c := snapshotChange(rg.Table, s)
		out.Snapshots = append(out.Snapshots, c)
		out.HasOverwrite = out.HasOverwrite || c.Operation == tablechange.Overwrite
		out.HasDelete = out.HasDelete || c.Operation == tablechange.Delete
		files, err := addedFiles(s, fs)
		if err != nil {
			return tablechange.Changes{}, fmt.Errorf("list the files snapshot %d of %s added: %w", s.SnapshotID, rg.Table, err)
		}
		out.AddedFiles = append(out.AddedFiles, files...)
	}
	r.log.DebugContext(ctx, "read an Iceberg range", "table", rg.Table.String(), "from_snapshot_id", rg.FromSnapshotID,
		"to_snapshot_id", rg.ToSnapshotID, "snapshots", len(out.Snapshots), "added_files", len(out.AddedFiles))
	return out, nil
}

// walk returns the snapshots after rg.FromSnapshotID up to
// rg.ToSnapshotID, oldest first.
func walk(md table.Metadata, rg tablechange.Range) ([]table.Snapshot, error) {
	var snaps []table.Snapshot
	id := rg.ToSnapshotID
	seen := map[int64]bool{}
	for {
		s := md.SnapshotByID(id)
		if s == nil {
			return nil, fmt.Errorf("%w: %s has no snapshot %d", ErrNotInHistory, rg.Table, id)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: %s: snapshot %d is its own ancestor", ErrNotInHistory, rg.Table, id)
		}
		seen[id] = true
		snaps = append(snaps, *s)
		if s.ParentSnapshotID == nil {
			if rg.FromSnapshotID != 0 {
				return nil, fmt.Errorf("%w: %s: snapshot %d is not an ancestor of snapshot %d",
					ErrNotInHistory, rg.Table, rg.FromSnapshotID, rg.ToSnapshotID)
			}
			break
		}
		if *s.ParentSnapshotID == rg.FromSnapshotID {
			break
		}
		id = *s.ParentSnapshotID
	}
	slices.Reverse(snaps)
	return snaps, nil
}

// snapshotChange describes a snapshot as a Change.
func snapshotChange(t tablechange.TableRef, s table.Snapshot) tablechange.Change {
	c := tablechange.Change{Table: t, SnapshotID: s.SnapshotID, CommitTime: time.UnixMilli(s.TimestampMs).UTC()}
	if s.ParentSnapshotID != nil {
		c.ParentSnapshotID = *s.ParentSnapshotID
	}
	c.Operation = tablechange.Append
	if s.Summary != nil && s.Summary.Operation != "" {
		c.Operation = tablechange.Operation(s.Summary.Operation)
	}
	return c
}

// addedFiles lists the data files snapshot s added: the entries of its
// data manifests with status ADDED and its snapshot id. Only manifests s
// wrote can hold them.
func addedFiles(s table.Snapshot, fs iceio.IO) ([]tablechange.DataFile, error) {
	manifests, err := s.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read the manifest list %s: %w", s.ManifestList, err)
	}
	var out []tablechange.DataFile
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData || m.SnapshotID() != s.SnapshotID || !m.HasAddedFiles() {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read the manifest %s: %w", m.FilePath(), err)
			}
			if e.Status() != iceberg.EntryStatusADDED || e.SnapshotID() != s.SnapshotID {
				continue
			}
			df := e.DataFile()
			if df.ContentType() != iceberg.EntryContentData {
				continue
			}
			out = append(out, tablechange.DataFile{Path: df.FilePath(), Records: df.Count(),
				SizeBytes: df.FileSizeBytes(), SnapshotID: s.SnapshotID})
		}
	}
	return out, nil
}
