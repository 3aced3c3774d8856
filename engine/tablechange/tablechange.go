// Package tablechange names a change to an Apache Iceberg table and the
// range of snapshots one incremental run processes. It is the contract
// between three parts that never import each other: the signal ingestion
// that normalises Glue Data Catalog, S3 Tables and API-announced commits
// into one Change, the incremental trigger that keeps a watermark per
// (workflow, table) and hands each run a Range, and the Iceberg reader
// that lists what a Range added (docs/incremental.md).
package tablechange

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Operation is the kind of an Iceberg snapshot (its summary's
// "operation"): append, overwrite, delete or replace.
type Operation string

// The Iceberg snapshot operations.
const (
	Append    Operation = "append"
	Overwrite Operation = "overwrite"
	Delete    Operation = "delete"
	Replace   Operation = "replace"
)

// Valid reports whether o is one of the Iceberg snapshot operations.
func (o Operation) Valid() bool {
	switch o {
	case Append, Overwrite, Delete, Replace:
		return true
	}
	return false
}

// RewritesData reports whether a snapshot of kind o may have removed or
// replaced rows, so a job processing its range should fall back to a
// full recompute. A replace (compaction) keeps the rows, so it does not.
func (o Operation) RewritesData() bool { return o == Overwrite || o == Delete }

// TableRef names an Iceberg table: the catalog (empty for the default
// one, such as the account's Glue Data Catalog or an S3 Tables bucket
// ARN), the namespace (database) and the table.
type TableRef struct {
	Catalog   string `json:"catalog,omitempty"`
	Namespace string `json:"namespace"`
	Table     string `json:"table"`
}

// String renders the reference as namespace.table, prefixed by catalog
// and a slash when the catalog is set: "arn:…:bucket/b/sales.orders".
func (t TableRef) String() string {
	if t.Catalog == "" {
		return t.Namespace + "." + t.Table
	}
	return t.Catalog + "/" + t.Namespace + "." + t.Table
}

// ParseTableRef reads what String renders.
func ParseTableRef(s string) (TableRef, error) {
	var t TableRef
	rest := s
	if i := strings.LastIndex(s, "/"); i >= 0 {
		t.Catalog, rest = s[:i], s[i+1:]
	}
	ns, table, ok := strings.Cut(rest, ".")
	if !ok || ns == "" || table == "" || strings.Contains(table, ".") {
		return TableRef{}, fmt.Errorf("table %q: want [catalog/]namespace.table", s)
	}
	t.Namespace, t.Table = ns, table
	return t, nil
}

// Change is one commit to a table, as a table-change signal carries it.
type Change struct {
	Table TableRef `json:"table"`
	// SnapshotID is the snapshot the commit made.
	SnapshotID int64 `json:"snapshot_id"`
	// ParentSnapshotID is the snapshot it was made on; 0 for a table's
	// first snapshot.
	ParentSnapshotID int64 `json:"parent_snapshot_id,omitempty"`
	// CommitTime is when the snapshot was committed.
	CommitTime time.Time `json:"commit_time"`
	// Operation is the snapshot's kind.
	Operation Operation `json:"operation"`
}

// Range is what one incremental run processes: the snapshots after
// FromSnapshotID (exclusive; 0 means from the table's beginning) up to
// and including ToSnapshotID.
type Range struct {
	Table          TableRef  `json:"table"`
	FromSnapshotID int64     `json:"from_snapshot_id"`
	ToSnapshotID   int64     `json:"to_snapshot_id"`
	FromCommitTime time.Time `json:"from_commit_time"`
	ToCommitTime   time.Time `json:"to_commit_time"`
}

// DataFile is one data file a snapshot added.
type DataFile struct {
	// Path is the file's location (s3://bucket/key).
	Path string `json:"path"`
	// Records is its row count.
	Records int64 `json:"records"`
	// SizeBytes is its size.
	SizeBytes int64 `json:"size_bytes"`
	// SnapshotID is the snapshot that added it.
	SnapshotID int64 `json:"snapshot_id"`
}

// Changes is what a Range holds, read from the table's metadata.
type Changes struct {
	// Snapshots are the range's snapshots, oldest first.
	Snapshots []Change `json:"snapshots"`
	// AddedFiles are the data files the range's snapshots added.
	AddedFiles []DataFile `json:"added_files"`
	// HasOverwrite and HasDelete say whether a snapshot of the range
	// overwrote or deleted rows (Operation.RewritesData).
	HasOverwrite bool `json:"has_overwrite"`
	HasDelete    bool `json:"has_delete"`
}

// Reader reads a table's metadata to list what a range changed.
type Reader interface {
	Changes(ctx context.Context, r Range) (Changes, error)
}
