package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/migrations"
)

// secretsFor are the three secrets of a deployment whose database is dsn
// (its user standing for the master user).
func secretsFor(t *testing.T, dsn string) map[string]string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(user, password string) string {
		b, _ := json.Marshal(map[string]any{"host": u.Hostname(), "port": u.Port(), "username": user,
			"password": password, "dbname": strings.TrimPrefix(u.Path, "/"), "engine": "postgres"})
		return string(b)
	}
	return map[string]string{
		"arn:master": secret(u.User.Username(), ""),
		"arn:owner":  secret(migrations.RoleOwner, "owner-pw"),
		"arn:app":    secret(migrations.RoleApp, "app-pw"),
	}
}

func newMigrator(t *testing.T, secrets map[string]string) *Migrator {
	t.Helper()
	cfg, err := ConfigFromEnv(env{EnvMasterSecret: "arn:master", EnvOwnerSecret: "arn:owner", EnvAppSecret: "arn:app"}.get)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Fetch = func(_ context.Context, arn string) (string, error) {
		if s, ok := secrets[arn]; ok {
			return s, nil
		}
		return "", fmt.Errorf("no secret %s", arn)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type env map[string]string

func (e env) get(k string) string { return e[k] }

// The deploy step on an empty database: the custom resource's Create makes
// the schema, owned by the owner role, and the app role may use it; an
// Update with nothing new applies nothing; Delete leaves the schema.
func TestCustomResourceOnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.URL(t)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatal(err)
	}
	m := newMigrator(t, secretsFor(t, dsn))

	id, data, err := m.HandleCloudFormation(ctx, cfn.Event{RequestType: cfn.RequestCreate})
	if err != nil || id != PhysicalID || data["Applied"].(int) == 0 {
		t.Fatalf("create: %q %v %v", id, data, err)
	}
	var owner string
	if err := admin.QueryRow(ctx, "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'public.flow_group_count'::regclass").Scan(&owner); err != nil || owner != migrations.RoleOwner {
		t.Errorf("flow_group_count owned by %q (%v), want %s", owner, err, migrations.RoleOwner)
	}
	id, data, err = m.HandleCloudFormation(ctx, cfn.Event{RequestType: cfn.RequestUpdate, PhysicalResourceID: PhysicalID})
	if err != nil || id != PhysicalID || data["Applied"].(int) != 0 {
		t.Fatalf("update: %q %v %v", id, data, err)
	}
	if id, _, err = m.HandleCloudFormation(ctx, cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: PhysicalID}); err != nil || id != PhysicalID {
		t.Fatalf("delete: %q %v", id, err)
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT to_regclass('public.workflow') IS NOT NULL").Scan(&exists); err != nil || !exists {
		t.Errorf("the schema went with the custom resource (%v)", err)
	}
}

// A secret of the wrong user, or a missing setting, fails the deploy step
// with a message that says which.
func TestMisconfigured(t *testing.T) {
	if _, err := ConfigFromEnv(env{EnvMasterSecret: "arn:master"}.get); err == nil || !strings.Contains(err.Error(), EnvAppSecret) {
		t.Errorf("missing settings: %v", err)
	}
	secrets := secretsFor(t, "postgres://postgres@127.0.0.1:1/none")
	secrets["arn:app"] = secrets["arn:owner"]
	_, _, err := newMigrator(t, secrets).HandleCloudFormation(context.Background(), cfn.Event{RequestType: cfn.RequestCreate})
	if err == nil || !strings.Contains(err.Error(), `want "maestro_app"`) {
		t.Errorf("wrong user: %v", err)
	}
}
