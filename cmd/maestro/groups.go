package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/groupcount"
)

// runGroups shows or raises the flow group count recorded in the database
// at DATABASE_URL (engine/groupcount). Raising is online: the engines take
// the new groups at their next heartbeat round.
func runGroups(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: maestro groups show | maestro groups raise --to N")
	}
	if len(args) == 0 || (args[0] != "show" && args[0] != "raise") {
		usage()
		return 2
	}
	fs := flag.NewFlagSet("groups "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.Int("to", 0, "the new flow group count (raise only; it can never be lowered)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if args[0] == "raise" && *to == 0 {
		usage()
		return 2
	}
	logger := newLogger(false)
	dsn, _, err := resolveDSN(ctx, logger, false)
	if err != nil {
		fmt.Fprintln(stderr, "maestro groups:", err)
		return 1
	}
	pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 1, ApplicationName: "maestro-groups"})
	if err != nil {
		fmt.Fprintln(stderr, "maestro groups:", err)
		return 1
	}
	defer pool.Close()
	if args[0] == "show" {
		n, err := groupcount.Recorded(ctx, pool)
		if err != nil {
			fmt.Fprintln(stderr, "maestro groups:", err)
			return 1
		}
		fmt.Fprintf(stdout, "flow group count: %d\n", n)
		return 0
	}
	before, err := groupcount.Raise(ctx, pool, *to, "maestro groups raise")
	if err != nil {
		fmt.Fprintln(stderr, "maestro groups:", err)
		return 1
	}
	fmt.Fprintf(stdout, "flow group count: %d -> %d (the engines take the new groups at their next heartbeat)\n", before, *to)
	return 0
}
