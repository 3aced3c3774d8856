package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The environment ConfigFromEnv reads.
const (
	// EnvRetention is the deployment's retention: a Go duration ("720h")
	// or a number of days ("30d"). Unset, archival is off.
	EnvRetention = "MAESTRO_RETENTION"
	// EnvBatch is the runs per batch (default 500).
	EnvBatch = "MAESTRO_RETENTION_BATCH"
	// EnvInterval is how often a long-running process runs a pass
	// (default 10m).
	EnvInterval = "MAESTRO_RETENTION_INTERVAL"
)

// ConfigFromEnv reads a Config (without its Logger) from the environment;
// ok is false when EnvRetention is unset (no archival).
func ConfigFromEnv(getenv func(string) string) (cfg Config, ok bool, err error) {
	v := strings.TrimSpace(getenv(EnvRetention))
	if v == "" {
		return cfg, false, nil
	}
	if cfg.Retention, err = ParseRetention(v); err != nil {
		return cfg, false, fmt.Errorf("%s=%q: %w", EnvRetention, v, err)
	}
	if b := getenv(EnvBatch); b != "" {
		if cfg.BatchSize, err = strconv.Atoi(b); err != nil || cfg.BatchSize < 1 || cfg.BatchSize > 10_000 {
			return cfg, false, fmt.Errorf("%s=%q is not a batch size from 1 to 10000", EnvBatch, b)
		}
	}
	if i := getenv(EnvInterval); i != "" {
		if cfg.Interval, err = time.ParseDuration(i); err != nil || cfg.Interval < time.Second {
			return cfg, false, fmt.Errorf("%s=%q is not a duration of a second or more", EnvInterval, i)
		}
	}
	return cfg, true, nil
}

// ParseRetention reads a retention: a Go duration or whole days ("30d"),
// at least MinRetention.
func ParseRetention(v string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 1 || n > MaxRetentionDays {
			return 0, fmt.Errorf("not a number of days from 1 to %d", MaxRetentionDays)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("not a duration (720h) or days (30d)")
		}
	}
	if d < MinRetention {
		return 0, fmt.Errorf("shorter than %s", MinRetention)
	}
	return d, nil
}
