package dbconn

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	secret := `{"host":"db.cluster.example","port":5432,"username":"maestro","password":"p@ss/word","dbname":"maestro"}`
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr error
	}{
		{"database url wins", map[string]string{"DATABASE_URL": "postgres://x/y", "DB_HOST": "h"}, "postgres://x/y", nil},
		{"secret arn", map[string]string{"DB_SECRET_ARN": "arn:secret"},
			"postgres://maestro:p%40ss%2Fword@db.cluster.example:5432/maestro?sslmode=verify-full", nil},
		{"secret through the proxy", map[string]string{"DB_SECRET_ARN": "arn:secret", "DB_PROXY_ENDPOINT": "proxy.example"},
			"postgres://maestro:p%40ss%2Fword@proxy.example:5432/maestro?sslmode=verify-full", nil},
		{"discrete vars", map[string]string{"DB_HOST": "127.0.0.1", "DB_USER": "u", "DB_PASSWORD": "p", "DB_NAME": "d"},
			"postgres://u:p@127.0.0.1:5432/d?sslmode=disable", nil},
		{"nothing set", map[string]string{}, "", ErrNotConfigured},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fetch := func(_ context.Context, arn string) (string, error) {
				if arn != "arn:secret" {
					t.Fatalf("fetched %q", arn)
				}
				return secret, nil
			}
			got, err := FromEnv(context.Background(), func(k string) string { return tt.env[k] }, fetch)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("dsn = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFromEnvSecretPortAsString(t *testing.T) {
	t.Parallel()
	got, err := FromEnv(context.Background(), func(k string) string {
		if k == "DB_SECRET_ARN" {
			return "arn"
		}
		return ""
	}, func(context.Context, string) (string, error) {
		return `{"host":"h","port":"6543","username":"u","password":"p","dbname":"d"}`, nil
	})
	if err != nil || !strings.Contains(got, "h:6543/d") {
		t.Fatalf("dsn %q err %v", got, err)
	}
}

func TestRefresher(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if Refresher(env(map[string]string{"DATABASE_URL": "postgres://x/y", "DB_SECRET_ARN": "a"}), nil) != nil {
		t.Error("a DATABASE_URL is refreshed")
	}
	if Refresher(env(map[string]string{"DB_HOST": "h"}), nil) != nil {
		t.Error("DB_* variables are refreshed")
	}
	if Refresher(env(map[string]string{"DB_SECRET_ARN": "a"}), nil) == nil {
		t.Error("a secret is not refreshed")
	}
}
