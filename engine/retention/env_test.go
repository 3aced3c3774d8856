package retention_test

import (
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/retention"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, ok, err := retention.ConfigFromEnv(env(nil)); ok || err != nil {
		t.Fatalf("unset: ok %v err %v, want archival off", ok, err)
	}
	cfg, ok, err := retention.ConfigFromEnv(env(map[string]string{
		retention.EnvRetention: "30d", retention.EnvBatch: "50", retention.EnvInterval: "5m"}))
	if err != nil || !ok || cfg.Retention != 30*24*time.Hour || cfg.BatchSize != 50 || cfg.Interval != 5*time.Minute {
		t.Fatalf("%+v %v %v", cfg, ok, err)
	}
	if d, err := retention.ParseRetention("36h"); err != nil || d != 36*time.Hour {
		t.Fatalf("36h: %v %v", d, err)
	}
	for _, bad := range []map[string]string{
		{retention.EnvRetention: "30m"}, {retention.EnvRetention: "0d"}, {retention.EnvRetention: "x"},
		{retention.EnvRetention: "99999d"}, {retention.EnvRetention: "1d", retention.EnvBatch: "0"},
		{retention.EnvRetention: "1d", retention.EnvInterval: "1ms"},
	} {
		if _, _, err := retention.ConfigFromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
