package e2e_test

import (
	"context"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/localstack"
	"github.com/maestro-aws/maestro/migrations"
)

// emptyDatabase is a database with nothing in it, as a first deploy meets
// Aurora: no schema, no roles' grants, no version table.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	dsn := dbtest.URL(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP SCHEMA public CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// newestMigration is the version of the newest file in migrations/.
func newestMigration(t *testing.T) int64 {
	t.Helper()
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "migrations", "*.sql"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no migrations")
	}
	v, _, _ := strings.Cut(filepath.Base(files[len(files)-1]), "_")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkMigratedByDeploy holds, right after `cdk deploy` and before any
// engine ran, that the data stack's migrate step (the custom resource
// invoking the migrate Lambda) brought the empty database up to the newest
// migration, as the schema owner.
func checkMigratedByDeploy(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version int64
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM maestro_schema_version WHERE is_applied").Scan(&version); err != nil {
		t.Fatalf("the deploy did not migrate the database: %v", err)
	}
	if want := newestMigration(t); version != want {
		t.Fatalf("schema version after the deploy %d, want %d", version, want)
	}
	var owner string
	if err := conn.QueryRow(ctx, "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'public.workflow'::regclass").Scan(&owner); err != nil || owner != migrations.RoleOwner {
		t.Fatalf("workflow table owned by %q (%v), want %s", owner, err, migrations.RoleOwner)
	}
}

// scenarioFreshDatabase: deployed into an empty database, the deployment
// works on the first scheduled minute: a cron workflow pushed right after
// the deploy is started by the schedule's time-trigger Lambda within about
// two minutes of the deploy (the emulator's Scheduler ticks every ~61 s),
// and every session the engine and the functions hold is the application
// role's.
func scenarioFreshDatabase(t *testing.T, d *Deployment) {
	id := uniqueID("fresh")
	d.push(t, twoSteps(id, map[string]any{"time_triggers": []any{map[string]any{"cron": "* * * * *"}}}))
	run := d.waitForRun(t, id, "SUCCEEDED", 150*time.Second-time.Since(d.Deployed))
	if run.InitiatorType != "TIME" {
		t.Errorf("initiator %q, want TIME", run.InitiatorType)
	}
	t.Logf("first time-triggered run succeeded %s after the deploy", time.Since(d.Deployed).Round(time.Second))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT DISTINCT usename || ' ' || application_name FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) == 0 {
		t.Fatal("no sessions of the engine or the functions")
	}
	for _, s := range sessions {
		if !strings.HasPrefix(s, migrations.RoleApp+" ") {
			t.Errorf("session %q: want every engine and function session as %s", s, migrations.RoleApp)
		}
	}
	t.Logf("sessions: %v", sessions)
}
