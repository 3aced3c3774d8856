package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// runMigrate applies migrations to the configured database and exits.
func runMigrate(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := newLogger(false)
	dsn, _, err := resolveDSN(ctx, logger, false)
	if err != nil {
		fmt.Fprintln(stderr, "maestro migrate:", err)
		return 1
	}
	if err := migrate(ctx, dsn, logger); err != nil {
		fmt.Fprintln(stderr, "maestro migrate:", err)
		return 1
	}
	return 0
}
