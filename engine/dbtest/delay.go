package dbtest

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"go.uber.org/goleak"

	"github.com/maestro-aws/maestro/engine/localpg"
)

// DelayEnv names the environment variable that puts a fixed delay between
// the tests and PostgreSQL, each way (a Go duration: "1ms", "2ms"): every
// connection URL returns then goes through a proxy in this process that
// holds each chunk of bytes for that long before passing it on, in order,
// without holding back the chunks behind it. It stands in for a database a
// network away (an Aurora commit crosses availability zones) on a machine
// where PostgreSQL answers in microseconds; `make bench` runs the hot-path
// benchmarks with and without it.
const DelayEnv = "MAESTRO_TEST_DB_DELAY"

// Delay is the delay DelayEnv asks for; 0 when unset.
func Delay() (time.Duration, error) {
	s := os.Getenv(DelayEnv)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 1ms", DelayEnv, s)
	}
	return d, nil
}

var (
	proxyMu sync.Mutex
	proxies = map[string]*localpg.DelayProxy{}
)

// delayed returns dsn pointing at a delay proxy (one per target and
// process) in front of its host when DelayEnv asks for one; dsn itself
// otherwise.
func delayed(dsn string) (string, error) {
	d, err := Delay()
	if err != nil || d == 0 {
		return dsn, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("delay proxy: %w", err)
	}
	proxyMu.Lock()
	defer proxyMu.Unlock()
	p, ok := proxies[u.Host]
	if !ok {
		if p, err = localpg.NewDelayProxy(u.Host, d); err != nil {
			return "", err
		}
		proxies[u.Host] = p
	}
	u.Host = p.Addr()
	return u.String(), nil
}

// LeakOptions are the goleak options of a test binary whose databases may
// be reached through the delay proxy: its goroutines serve the process's
// connections until it exits, by design, and are not a leak.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/maestro-aws/maestro/engine/localpg.(*DelayProxy).accept"),
		goleak.IgnoreAnyFunction("github.com/maestro-aws/maestro/engine/localpg.(*DelayProxy).pump"),
		goleak.IgnoreAnyFunction("github.com/maestro-aws/maestro/engine/localpg.(*DelayProxy).pump.func1"),
	}
}
