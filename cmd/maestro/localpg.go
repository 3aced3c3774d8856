package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/localpg"
)

// runLocalPG manages a throwaway cluster: `make test` uses it to stop the
// shared test cluster, developers to reach the dev database with psql.
func runLocalPG(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: maestro localpg start|stop|url|delay --dir DIR [--delay 1ms]")
		return 2
	}
	fs := flag.NewFlagSet("localpg", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".maestro/pg", "cluster data directory")
	delay := fs.Duration("delay", time.Millisecond, "delay: how long the proxy holds the bytes of each direction")
	settings := settingFlag{}
	fs.Var(settings, "c", "start: a server setting name=value (repeatable), as postgres -c takes it")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if _, err := os.Stat(filepath.Join(*dir, "PG_VERSION")); err != nil && args[0] != "start" {
		if args[0] == "stop" {
			return 0 // nothing was ever started there
		}
		fmt.Fprintf(stderr, "maestro localpg: no cluster in %s\n", *dir)
		return 1
	}
	c, err := localpg.Open(ctx, localpg.Options{Dir: *dir, Settings: settings})
	if err != nil {
		fmt.Fprintln(stderr, "maestro localpg:", err)
		return 1
	}
	switch args[0] {
	case "start":
		err = c.Start(ctx)
		if err == nil {
			fmt.Fprintln(stdout, c.URL("postgres"))
		}
	case "stop":
		err = c.Stop(ctx)
	case "url":
		port, ok := c.Running(ctx)
		if !ok {
			err = fmt.Errorf("no server is running in %s", *dir)
			break
		}
		c.Port = port
		fmt.Fprintln(stdout, c.URL("postgres"))
	case "delay":
		err = serveDelayed(ctx, c, *delay, stdout)
	default:
		fmt.Fprintf(stderr, "maestro localpg: unknown action %q\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "maestro localpg:", err)
		return 1
	}
	return 0
}

// serveDelayed runs a delay proxy in front of the running cluster (`make
// bench` measures the engine with a database a network away), prints the
// admin URL through it and serves until ctx ends (SIGINT, SIGTERM).
func serveDelayed(ctx context.Context, c *localpg.Cluster, delay time.Duration, stdout io.Writer) error {
	port, ok := c.Running(ctx)
	if !ok {
		return fmt.Errorf("no server is running in %s", c.Dir)
	}
	c.Port = port
	u, err := url.Parse(c.URL("postgres"))
	if err != nil {
		return err
	}
	p, err := localpg.NewDelayProxy(u.Host, delay)
	if err != nil {
		return err
	}
	defer p.Close()
	u.Host = p.Addr()
	fmt.Fprintln(stdout, u.String())
	<-ctx.Done()
	return nil
}

// settingFlag collects -c name=value server settings.
type settingFlag map[string]string

func (f settingFlag) String() string { return fmt.Sprint(map[string]string(f)) }

func (f settingFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	f[name] = value
	return nil
}
