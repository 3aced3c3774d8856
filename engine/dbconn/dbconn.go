// Package dbconn resolves where the Maestro database is and opens a pool on
// it. The same rules serve `maestro dev`, the engine task and every Lambda:
//
//  1. DATABASE_URL, a libpq URL or key/value string;
//  2. DB_SECRET_ARN, a Secrets Manager secret in the shape RDS generates
//     ({host, port, username, password, dbname}); used by the Lambdas and
//     the engine task. DB_PROXY_ENDPOINT, when set, replaces the secret's
//     host (the Lambdas connect through RDS Proxy). The secret is read again
//     for new connections (PoolOptions.Refresh), so a rotated password
//     needs no restart;
//  3. DB_HOST, DB_PORT, DB_NAME, DB_USER, DB_PASSWORD; ECS injects these from
//     the same secret into the engine task.
//
// Connections built from 2 and 3 to a remote host verify the server's
// certificate and name (sslmode=verify-full); the Amazon RDS and RDS Proxy
// CAs are embedded (rdsca) and trusted besides the system's roots by every
// connection this package configures with verify-full and no sslrootcert.
// A DATABASE_URL keeps whatever sslmode it says.
package dbconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/dbconn/rdsca"
	"github.com/maestro-aws/maestro/engine/pgparam"
)

// ErrNotConfigured reports that none of the variables above is set.
var ErrNotConfigured = errors.New("no database configured: set DATABASE_URL, DB_SECRET_ARN or DB_HOST")

// SecretFetcher returns the string value of a Secrets Manager secret.
type SecretFetcher func(ctx context.Context, arn string) (string, error)

// Secret is the JSON shape of an RDS-generated database secret.
type Secret struct {
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"`
	Username string          `json:"username"`
	Password string          `json:"password"`
	DBName   string          `json:"dbname"`
}

// FromEnv resolves the connection string from getenv. fetch is only called
// when DB_SECRET_ARN is the source; it may be nil otherwise.
func FromEnv(ctx context.Context, getenv func(string) string, fetch SecretFetcher) (string, error) {
	if dsn := getenv("DATABASE_URL"); dsn != "" {
		return dsn, nil
	}
	if arn := getenv("DB_SECRET_ARN"); arn != "" {
		if fetch == nil {
			return "", fmt.Errorf("DB_SECRET_ARN is set but no secret fetcher is configured")
		}
		raw, err := fetch(ctx, arn)
		if err != nil {
			return "", fmt.Errorf("read database secret: %w", err)
		}
		return FromSecret(raw, getenv("DB_PROXY_ENDPOINT"))
	}
	if host := getenv("DB_HOST"); host != "" {
		return BuildURL(host, getenv("DB_PORT"), getenv("DB_NAME"), getenv("DB_USER"), getenv("DB_PASSWORD")), nil
	}
	return "", ErrNotConfigured
}

// FromSecret builds the connection string from a secret in the RDS shape;
// host, when set, replaces the secret's (RDS Proxy's endpoint).
func FromSecret(raw, host string) (string, error) {
	var s Secret
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return "", fmt.Errorf("decode database secret: %w", err)
	}
	port := string(s.Port)
	if unq, err := strconv.Unquote(port); err == nil {
		port = unq
	}
	if host == "" {
		host = s.Host
	}
	return BuildURL(host, port, s.DBName, s.Username, s.Password), nil
}

// BuildURL assembles a postgres:// URL, escaping every part. Remote hosts get
// sslmode=verify-full (see TrustRDS); loopback hosts sslmode=disable.
func BuildURL(host, port, dbname, user, password string) string {
	if port == "" {
		port = "5432"
	}
	if dbname == "" {
		dbname = "postgres"
	}
	sslmode := "verify-full"
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		sslmode = "disable"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(user, password),
		Host:     net.JoinHostPort(host, port),
		Path:     "/" + dbname,
		RawQuery: "sslmode=" + sslmode,
	}
	return u.String()
}

// PoolOptions tune Open.
type PoolOptions struct {
	// MaxConns caps the pool; 0 keeps pgx's default (max(4, cores)).
	MaxConns int32
	// ApplicationName shows in pg_stat_activity.
	ApplicationName string
	// Refresh, when set, resolves the connection string again before a new
	// connection is opened (at most once per RefreshEvery), so that the
	// pool follows a rotated password. See Refresher.
	Refresh func(ctx context.Context) (string, error)
	// RefreshEvery bounds how often Refresh is called; 1 minute when zero.
	RefreshEvery time.Duration
}

// Refresher returns a PoolOptions.Refresh that reads the secret again when
// DB_SECRET_ARN is the source of the connection string, and nil otherwise
// (a DATABASE_URL or DB_* variables cannot change under a running process).
func Refresher(getenv func(string) string, fetch SecretFetcher) func(ctx context.Context) (string, error) {
	if getenv("DATABASE_URL") != "" || getenv("DB_SECRET_ARN") == "" {
		return nil
	}
	return func(ctx context.Context) (string, error) { return FromEnv(ctx, getenv, fetch) }
}

// credentialCache hands out the latest credentials, refreshing them at most
// once per period.
type credentialCache struct {
	refresh func(ctx context.Context) (string, error)
	every   time.Duration

	mu       sync.Mutex
	at       time.Time
	user     string
	password string
}

// apply sets the latest user and password on cc. A failed refresh keeps the
// previous credentials: the connection attempt then says whether they still
// work.
func (c *credentialCache) apply(ctx context.Context, cc *pgx.ConnConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= c.every {
		dsn, err := c.refresh(ctx)
		if err == nil {
			var parsed *pgx.ConnConfig
			if parsed, err = pgx.ParseConfig(dsn); err == nil {
				c.user, c.password, c.at = parsed.User, parsed.Password, time.Now()
			}
		}
		if err != nil && c.user == "" {
			return fmt.Errorf("refresh database credentials: %w", err)
		}
	}
	if c.user != "" {
		cc.User, cc.Password = c.user, c.password
	}
	return nil
}

// ParseConfig is pgx.ParseConfig with TrustRDS applied.
func ParseConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	TrustRDS(&cfg.Config)
	return cfg, nil
}

// TrustRDS adds the embedded RDS and RDS Proxy CAs (rdsca) to the roots of
// every TLS configuration of cfg that verifies the server against the
// system's roots (sslmode=verify-full without sslrootcert), so that the
// certificates Aurora and RDS Proxy present verify on any image, the
// distroless one included. A configuration that skips verification
// (sslmode=require) or names its own roots (sslrootcert) is left alone.
func TrustRDS(cfg *pgconn.Config) {
	configs := []*tls.Config{cfg.TLSConfig}
	for _, fb := range cfg.Fallbacks {
		configs = append(configs, fb.TLSConfig)
	}
	for _, tc := range configs {
		if tc == nil || tc.InsecureSkipVerify || tc.RootCAs != nil {
			continue
		}
		tc.RootCAs = rdsRoots()
	}
}

// rdsRoots is the system's roots, when it has any, and the RDS bundle.
var rdsRoots = sync.OnceValue(func() *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	rdsca.AddTo(pool)
	return pool
})

// Open opens a pool and checks that the database answers.
func Open(ctx context.Context, dsn string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	TrustRDS(&cfg.ConnConfig.Config)
	// Statements with large parameters size pgx's buffer once (pgparam);
	// pools made from a copy of this config (the engine's writer) keep it.
	cfg.AfterConnect = pgparam.AfterConnect(cfg.AfterConnect)
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	if opts.Refresh != nil {
		every := opts.RefreshEvery
		if every <= 0 {
			every = time.Minute
		}
		// The first connection uses dsn as it is; later ones the refreshed
		// credentials.
		creds := &credentialCache{refresh: opts.Refresh, every: every, at: time.Now(),
			user: cfg.ConnConfig.User, password: cfg.ConnConfig.Password}
		cfg.BeforeConnect = creds.apply
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// SecretsManager is the SecretFetcher that reads the secret from AWS Secrets
// Manager with the default credential chain.
func SecretsManager(ctx context.Context, arn string) (string, error) {
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return "", fmt.Errorf("load aws config: %w", err)
	}
	out, err := secretsmanager.NewFromConfig(cfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("get secret %s: %w", arn, err)
	}
	return aws.ToString(out.SecretString), nil
}
