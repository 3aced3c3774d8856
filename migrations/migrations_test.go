package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/migrations"
)

// A test database comes from an already migrated template, so applying again
// must find nothing to do.
func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	applied, err := migrations.Apply(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 {
		t.Fatalf("applied %v on a migrated database, want nothing", applied)
	}
}

// Several engine tasks start at once: on an empty database each migration
// must be applied exactly once.
func TestConcurrentApplyOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Start from nothing.
	if _, err := conn.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatal(err)
	}

	const workers = 5
	var wg sync.WaitGroup
	results := make([][]int64, workers)
	errs := make([]error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrations.Apply(ctx, dsn, nil)
		}()
	}
	wg.Wait()
	total := 0
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v", i, errs[i])
		}
		total += len(results[i])
	}
	var files int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM maestro_schema_version WHERE version_id > 0").Scan(&files); err != nil {
		t.Fatal(err)
	}
	if total != files || files == 0 {
		t.Fatalf("workers applied %d migrations in all, version table has %d rows; want equal and > 0", total, files)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('public.workflow') IS NOT NULL").Scan(&exists); err != nil || !exists {
		t.Fatalf("workflow table missing after migration (err %v)", err)
	}
}

func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	if a, b := migrations.Fingerprint(), migrations.Fingerprint(); a != b || len(a) != 16 {
		t.Fatalf("fingerprint %q then %q", a, b)
	}
}

// Every column holding a workflow id or a run's parent key compares byte
// by byte (migration 00010): prefix ranges over inline run ids depend on
// it, and a join between a "C" column and a default-collation one could
// not use the other side's index. A new table must follow.
func TestWorkflowIDColumnsAreByteWise(t *testing.T) {
	t.Parallel()
	conn, err := pgx.Connect(context.Background(), dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT table_name || '.' || column_name FROM information_schema.columns
        WHERE table_schema = 'public' AND column_name IN ('workflow_id', 'parent_key')
          AND collation_name IS DISTINCT FROM 'C' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("columns without COLLATE \"C\": %v", bad)
	}
}
