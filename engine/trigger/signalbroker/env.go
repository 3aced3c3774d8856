package signalbroker

import (
	"fmt"
	"log/slog"
	"time"
)

// Environment variables SweeperFromEnv reads; all optional.
const (
	// EnvSweepInterval is the time between sweeps of pending output
	// signals without a kick (a Go duration; default 2 s).
	EnvSweepInterval = "MAESTRO_SIGNAL_SWEEP"
	// EnvTestPause holds every sweep's transaction open this long once it
	// has claimed its signals (or planned the range of an incremental
	// trigger's run), logging "test pause inside a signal sweep", for the
	// process-kill tests (a Go duration).
	EnvTestPause = "MAESTRO_TEST_SIGNAL_PAUSE"
)

// SweeperFromEnv returns a Sweeper configured by the environment (getenv)
// for an engine process; its Broker is set before Start. A malformed value
// is an error.
func SweeperFromEnv(getenv func(string) string, logger *slog.Logger) (*Sweeper, error) {
	s := &Sweeper{Logger: logger}
	var err error
	if s.Interval, err = envDuration(getenv, EnvSweepInterval); err != nil {
		return nil, err
	}
	if s.TestPause, err = envDuration(getenv, EnvTestPause); err != nil {
		return nil, err
	}
	return s, nil
}

func envDuration(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 2s", name, v)
	}
	return d, nil
}
