// Package migrations holds the numbered SQL migrations of the Maestro schema
// and applies them with goose.
//
// goose was chosen over tern and golang-migrate because it runs each
// migration in its own transaction together with its version row, takes a
// PostgreSQL session advisory lock so that several engine tasks starting at
// once apply the schema exactly once, and reads migrations from an embed.FS.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// versionTable is goose's bookkeeping table.
const versionTable = "maestro_schema_version"

// Apply brings the database at dsn up to the newest migration. It is safe to
// call from many processes at once and is a no-op when nothing is pending.
// It returns the versions it applied.
func Apply(ctx context.Context, dsn string, logger *slog.Logger) ([]int64, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	return ApplyConfig(ctx, cfg, logger)
}

// ApplyConfig is Apply with a parsed connection configuration (its TLS
// roots set by the caller, engine/dbconn).
func ApplyConfig(ctx context.Context, cfg *pgx.ConnConfig, logger *slog.Logger) ([]int64, error) {
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return ApplyDB(ctx, db, logger)
}

// ApplyTo is Apply up to and including version only: tests build the
// schema of an earlier release with it.
func ApplyTo(ctx context.Context, dsn string, version int64, logger *slog.Logger) ([]int64, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return apply(ctx, db, version, logger)
}

// ApplyDB is Apply over an open database handle.
func ApplyDB(ctx context.Context, db *sql.DB, logger *slog.Logger) ([]int64, error) {
	return apply(ctx, db, 0, logger)
}

// apply applies what is pending up to version (0: all).
func apply(ctx context.Context, db *sql.DB, version int64, logger *slog.Logger) ([]int64, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("create migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker),
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	var results []*goose.MigrationResult
	if version > 0 {
		results, err = provider.UpTo(ctx, version)
	} else {
		results, err = provider.Up(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
		if logger != nil {
			logger.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration_ms", r.Duration.Milliseconds())
		}
	}
	return applied, nil
}

// Fingerprint identifies the embedded set of migrations: it changes when any
// file is added or edited. Test helpers key cached template databases on it.
func Fingerprint() string {
	h := sha256.New()
	entries, _ := files.ReadDir(".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
