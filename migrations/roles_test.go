package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/migrations"
)

// asUser is dsn with another user (the test cluster trusts local logins).
func asUser(t *testing.T, dsn, user string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

// appLogin creates a login that is a member of maestro_app, as a deployment's
// engine and functions log in, and returns dsn with that user.
func appLogin(t *testing.T, admin *pgx.Conn, dsn string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "maestro_app_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+name+" LOGIN IN ROLE "+migrations.RoleApp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
			c.Close(context.Background())
		}
	})
	return asUser(t, dsn, name)
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// The application role reads and writes rows, listens and notifies, and
// cannot change the schema or empty a table wholesale.
func TestAppRoleIsDMLOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	app := connect(t, appLogin(t, connect(t, dsn), dsn))

	allowed := []string{
		`INSERT INTO workflow (workflow_id, owner, created_by) VALUES ('least_privilege', 'me', 'me')`,
		`UPDATE workflow SET workflow_id = workflow_id WHERE workflow_id = 'least_privilege'`,
		`SELECT count(*) FROM maestro_queue`,
		`DELETE FROM workflow WHERE workflow_id = 'least_privilege'`,
		`LISTEN maestro_test`,
		`SELECT pg_notify('maestro_test', 'x')`,
		`SELECT pg_advisory_xact_lock(1)`,
	}
	for _, sql := range allowed {
		if _, err := app.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	refused := []string{
		`CREATE TABLE intruder (id int)`,
		`DROP TABLE workflow`,
		`ALTER TABLE workflow ADD COLUMN intruder int`,
		`TRUNCATE maestro_queue`,
		`CREATE INDEX intruder ON workflow (workflow_id)`,
	}
	for _, sql := range refused {
		_, err := app.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: err = %v, want insufficient privilege", sql, err)
		}
	}
}

// An engine started as the application role on a migrated database finds
// nothing to apply and starts; it must not need to create anything.
func TestApplyAsAppRoleOnMigratedDatabase(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	applied, err := migrations.Apply(context.Background(), appLogin(t, connect(t, dsn), dsn), nil)
	if err != nil || len(applied) != 0 {
		t.Fatalf("Apply as the app role = %v, %v; want nothing applied and no error", applied, err)
	}
}

// A deployment of a release before the roles: every table was made by the
// master user. The migrate step (EnsureLogins as the master user, then the
// migrations as the owner) hands the schema to the owner, applies what is
// pending, and the app role may use tables made before and after.
func TestUpgradeHandsTheSchemaToTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	master := connect(t, dsn)
	if _, err := master.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyTo(ctx, dsn, 90, nil); err != nil {
		t.Fatal(err)
	}
	if err := migrations.EnsureLogins(ctx, master, migrations.Logins{OwnerPassword: "o", AppPassword: "a"}, nil); err != nil {
		t.Fatal(err)
	}
	// Twice: every deploy runs it.
	if err := migrations.EnsureLogins(ctx, master, migrations.Logins{OwnerPassword: "o", AppPassword: "a"}, nil); err != nil {
		t.Fatal(err)
	}
	applied, err := migrations.Apply(ctx, asUser(t, dsn, migrations.RoleOwner), nil)
	if err != nil || len(applied) == 0 {
		t.Fatalf("Apply as the owner = %v, %v", applied, err)
	}
	rows, err := master.Query(ctx, `SELECT c.relname || ' ' || pg_get_userbyid(c.relowner) FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S') AND pg_get_userbyid(c.relowner) <> $1
		UNION ALL SELECT proname || ' ' || pg_get_userbyid(proowner) FROM pg_proc
		WHERE pronamespace = 'public'::regnamespace AND pg_get_userbyid(proowner) <> $1`, migrations.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	notOwned, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(notOwned) > 0 {
		t.Errorf("not owned by %s: %v", migrations.RoleOwner, notOwned)
	}
	var canLogin bool
	if err := master.QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", migrations.RoleApp).Scan(&canLogin); err != nil || !canLogin {
		t.Errorf("%s can log in: %v, %v", migrations.RoleApp, canLogin, err)
	}
	// A table made by a later migration (as the owner) is granted too.
	owner := connect(t, asUser(t, dsn, migrations.RoleOwner))
	if _, err := owner.Exec(ctx, "CREATE TABLE later_table (id bigserial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	app := connect(t, asUser(t, dsn, migrations.RoleApp))
	for _, sql := range []string{`INSERT INTO later_table (v) VALUES ('x')`, `INSERT INTO workflow (workflow_id, owner, created_by) VALUES ('up', 'me', 'me')`} {
		if _, err := app.Exec(ctx, sql); err != nil {
			t.Errorf("as %s: %s: %v", migrations.RoleApp, sql, err)
		}
	}
	if _, err := app.Exec(ctx, "DROP TABLE later_table"); err == nil {
		t.Errorf("%s dropped a table", migrations.RoleApp)
	}
}
