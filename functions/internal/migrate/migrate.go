// Package migrate is the migrate function's job: as the deploy step that
// runs before any code of a release (a CloudFormation custom resource in the
// data stack, on which every stack with code depends), it makes the schema
// owner and the application role logins as the master user, then applies
// the embedded migrations as the owner (docs/deploy.md, "Database:
// migrations, roles, TLS").
package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/migrations"
)

// PhysicalID names the schema as the custom resource's physical resource:
// the same on every update, so that CloudFormation never deletes it.
const PhysicalID = "maestro-schema"

// Environment variables the function reads: the ARNs of the three secrets
// in the RDS shape ({host, port, username, password, dbname}).
const (
	EnvMasterSecret = "MAESTRO_MASTER_SECRET_ARN"
	EnvOwnerSecret  = "MAESTRO_OWNER_SECRET_ARN"
	EnvAppSecret    = "MAESTRO_APP_SECRET_ARN"
)

// Config is what a Migrator needs.
type Config struct {
	// MasterSecretARN is the cluster's master secret: the only use of the
	// master user is EnsureLogins.
	MasterSecretARN string
	// OwnerSecretARN and AppSecretARN hold the logins of
	// migrations.RoleOwner and migrations.RoleApp.
	OwnerSecretARN, AppSecretARN string
	// Fetch reads a secret (dbconn.SecretsManager in AWS).
	Fetch dbconn.SecretFetcher
	// Logger is required.
	Logger *slog.Logger
}

// ConfigFromEnv reads the secrets' ARNs; a missing one is an error.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{MasterSecretARN: getenv(EnvMasterSecret), OwnerSecretARN: getenv(EnvOwnerSecret), AppSecretARN: getenv(EnvAppSecret)}
	var missing []error
	for k, v := range map[string]string{EnvMasterSecret: c.MasterSecretARN, EnvOwnerSecret: c.OwnerSecretARN, EnvAppSecret: c.AppSecretARN} {
		if v == "" {
			missing = append(missing, fmt.Errorf("%s is not set", k))
		}
	}
	return c, errors.Join(missing...)
}

// Migrator runs the migrate step.
type Migrator struct {
	cfg Config
}

// New checks cfg and returns a Migrator.
func New(cfg Config) (*Migrator, error) {
	if cfg.MasterSecretARN == "" || cfg.OwnerSecretARN == "" || cfg.AppSecretARN == "" || cfg.Fetch == nil || cfg.Logger == nil {
		return nil, errors.New("migrate: the three secrets, a secret fetcher and a logger are required")
	}
	return &Migrator{cfg: cfg}, nil
}

// login reads the secret of role: its user must be role.
func (m *Migrator) login(ctx context.Context, arn, role string) (dbconn.Secret, error) {
	raw, err := m.cfg.Fetch(ctx, arn)
	if err != nil {
		return dbconn.Secret{}, fmt.Errorf("read the secret of %s: %w", role, err)
	}
	var s dbconn.Secret
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return dbconn.Secret{}, fmt.Errorf("decode the secret of %s: %w", role, err)
	}
	if s.Username != role || s.Password == "" {
		return dbconn.Secret{}, fmt.Errorf("secret %s is for user %q, want %q with a password", arn, s.Username, role)
	}
	return s, nil
}

// Run makes the roles logins (as the master user) and applies the pending
// migrations as the owner, connecting where the master secret says (the
// writer, not RDS Proxy: a migration's session advisory lock and DDL must
// not be multiplexed). It returns the versions applied.
func (m *Migrator) Run(ctx context.Context) ([]int64, error) {
	raw, err := m.cfg.Fetch(ctx, m.cfg.MasterSecretARN)
	if err != nil {
		return nil, fmt.Errorf("read the master secret: %w", err)
	}
	masterDSN, err := dbconn.FromSecret(raw, "")
	if err != nil {
		return nil, fmt.Errorf("master secret: %w", err)
	}
	owner, err := m.login(ctx, m.cfg.OwnerSecretARN, migrations.RoleOwner)
	if err != nil {
		return nil, err
	}
	app, err := m.login(ctx, m.cfg.AppSecretARN, migrations.RoleApp)
	if err != nil {
		return nil, err
	}

	masterCfg, err := dbconn.ParseConfig(masterDSN)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, masterCfg)
	if err != nil {
		return nil, fmt.Errorf("connect as the master user: %w", err)
	}
	err = migrations.EnsureLogins(ctx, conn, migrations.Logins{OwnerPassword: owner.Password, AppPassword: app.Password}, m.cfg.Logger)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}

	// The owner logs in where the master user does.
	ownerCfg := masterCfg.Copy()
	ownerCfg.User, ownerCfg.Password = owner.Username, owner.Password
	applied, err := migrations.ApplyConfig(ctx, ownerCfg, m.cfg.Logger)
	if err != nil {
		return nil, err
	}
	m.cfg.Logger.Info("database schema is current", "applied", len(applied))
	return applied, nil
}

// HandleCloudFormation is the custom resource's handler (wrapped by
// cfn.LambdaWrap, which answers CloudFormation): Create and Update run the
// migrations, and a failure fails the deployment before any stack with code
// of the release is updated; Delete leaves the schema, which outlives the
// stack.
func (m *Migrator) HandleCloudFormation(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	if ev.RequestType == cfn.RequestDelete {
		m.cfg.Logger.Info("custom resource deleted; the schema stays")
		return ev.PhysicalResourceID, nil, nil
	}
	applied, err := m.Run(ctx)
	if err != nil {
		m.cfg.Logger.Error("migrate failed", "error", err.Error())
		return PhysicalID, nil, fmt.Errorf("migrate the database: %w", err)
	}
	return PhysicalID, map[string]any{"Applied": len(applied)}, nil
}
