package migrations

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// The database roles of a deployment (docs/deploy.md, "Database: migrations,
// roles, TLS").
const (
	// RoleOwner owns the schema: the migrations run as it. In AWS it is a
	// login of its own (its own secret); locally whoever runs the migrations
	// owns what they create, and this role does not exist.
	RoleOwner = "maestro_owner"
	// RoleApp may read and write rows and nothing else. Migration 00100
	// creates it (without a login) and grants it; in AWS it is the login of
	// the engine and every function.
	RoleApp = "maestro_app"
)

// Logins are the passwords EnsureLogins gives the roles when it makes them
// logins.
type Logins struct {
	OwnerPassword string
	AppPassword   string
}

// ensureLoginSQL creates role $1 as a login with password $2 when it is
// missing, and gives an existing role that cannot log in (RoleApp made by
// migration 00100) a login with that password. The password of an existing
// login is left alone: after the first deployment the secret's rotation owns
// it, and setting it here mid-rotation would undo the rotation. It answers
// the statement to run, built by the server's own quoting (format %I, %L),
// or NULL when there is nothing to do.
const ensureLoginSQL = `SELECT CASE
    WHEN r.rolname IS NULL THEN format('CREATE ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)
    WHEN NOT r.rolcanlogin THEN format('ALTER ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)
END
FROM (SELECT 1) one LEFT JOIN pg_roles r ON r.rolname = $1`

// grantsSQL lets the owner create in the schema and both roles connect; the
// user running it (the master user) becomes a member of the owner, which it
// needs to hand its own tables over (ALTER ... OWNER TO).
const grantsSQL = `DO $$
BEGIN
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO maestro_owner, maestro_app', current_database());
    EXECUTE format('GRANT maestro_owner TO %I', current_user);
    GRANT USAGE, CREATE ON SCHEMA public TO maestro_owner;
    GRANT USAGE ON SCHEMA public TO maestro_app;
END
$$`

// ownedByMeSQL lists what the connected user owns in the schema and must hand
// to the owner: tables, views and functions, and sequences no column owns
// (those owned by a column move with their table). A deployment of a release
// before roles existed made everything as the master user.
const ownedByMeSQL = `SELECT format('ALTER %s %s OWNER TO maestro_owner',
        CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
        c.oid::regclass)
    FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relowner = current_user::regrole
      AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
      AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d
            WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
UNION ALL
SELECT format('ALTER FUNCTION %s OWNER TO maestro_owner', p.oid::regprocedure)
    FROM pg_proc p
    WHERE p.pronamespace = 'public'::regnamespace AND p.proowner = current_user::regrole`

// EnsureLogins prepares the roles as the master user (conn): RoleOwner and
// RoleApp become logins (created when missing), the owner may create in the
// public schema, and whatever the master user owns there (a database
// migrated before roles existed) is handed to the owner. It is safe to
// repeat. The migrations then run as the owner (Apply with its login).
func EnsureLogins(ctx context.Context, conn *pgx.Conn, logins Logins, logger *slog.Logger) error {
	for _, l := range []struct{ role, password string }{
		{RoleOwner, logins.OwnerPassword}, {RoleApp, logins.AppPassword},
	} {
		if l.password == "" {
			return fmt.Errorf("ensure login %s: no password", l.role)
		}
		var stmt *string
		if err := conn.QueryRow(ctx, ensureLoginSQL, l.role, l.password).Scan(&stmt); err != nil {
			return fmt.Errorf("look up role %s: %w", l.role, err)
		}
		if stmt == nil {
			continue
		}
		if _, err := conn.Exec(ctx, *stmt); err != nil {
			return fmt.Errorf("make role %s a login: %w", l.role, err)
		}
		if logger != nil {
			logger.Info("database login made", "role", l.role)
		}
	}
	if _, err := conn.Exec(ctx, grantsSQL); err != nil {
		return fmt.Errorf("grant the owner the schema: %w", err)
	}
	rows, err := conn.Query(ctx, ownedByMeSQL)
	if err != nil {
		return fmt.Errorf("list what the master user owns: %w", err)
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list what the master user owns: %w", err)
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("hand over to the owner (%s): %w", s, err)
		}
	}
	if logger != nil && len(stmts) > 0 {
		logger.Info("schema objects handed to the owner", "objects", len(stmts))
	}
	return nil
}
