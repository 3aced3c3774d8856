package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/maestro-aws/maestro/engine/localpg"
)

// runLocalPG manages a throwaway cluster: `make test` uses it to stop the
// shared test cluster, developers to reach the dev database with psql.
func runLocalPG(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: maestro localpg start|stop|url --dir DIR")
		return 2
	}
	fs := flag.NewFlagSet("localpg", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".maestro/pg", "cluster data directory")
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
	c, err := localpg.Open(ctx, localpg.Options{Dir: *dir})
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
