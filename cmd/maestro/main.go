// Command maestro is the one binary users run: the servers below, and a
// command line for the REST API (push, start, list, get, watch, timeline,
// restart, stop, kill, signal, events, trigger; `maestro --help`):
//
//	maestro dev [--addr 127.0.0.1:8080]   everything in one process, for local use
//	maestro engine                        the long-running engine (the Fargate task)
//	maestro health [--addr A] [--live]    ask the engine's health endpoint (--live: the container health check)
//	maestro api [--addr 127.0.0.1:8081]   the REST API alone, beside engines
//	maestro migrate                       apply migrations to DATABASE_URL and exit
//	maestro groups show|raise --to N      show or raise the flow group count, online
//	maestro sel eval 'EXPR' [--params J]  evaluate a SEL expression
//	maestro localpg start|stop|url --dir D   manage a throwaway PostgreSQL cluster
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // time zones for triggers, even in images without zoneinfo

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/cli"
)

// serverCommands are the server half of the binary, each parsing its own
// flags with the standard library's flag package.
var serverCommands = []struct {
	name, short string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}{
	{"dev", "run the REST API, the engine and the trigger loop in one process", runDev},
	{"engine", "run the engine (what the ECS Fargate task runs)", func(ctx context.Context, args []string, _, stderr io.Writer) int {
		return runEngine(ctx, args, stderr)
	}},
	{"health", "ask a running engine's health endpoint (MAESTRO_HEALTH_ADDR); exit 0 when healthy", runHealth},
	{"api", "serve the REST API alone against DATABASE_URL (--trust-user-header behind an authenticating proxy)", runAPI},
	{"migrate", "apply database migrations to DATABASE_URL and exit", func(ctx context.Context, args []string, _, stderr io.Writer) int {
		return runMigrate(ctx, args, stderr)
	}},
	{"sel", `evaluate SEL expressions: maestro sel eval 'EXPR' [--params '{"x":1}']`, runSel},
	{"localpg", "start, stop or print the URL of a throwaway PostgreSQL cluster", runLocalPG},
	{"groups", "show or raise the flow group count of DATABASE_URL: maestro groups show | raise --to N", runGroups},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line: the client commands of engine/cli and the
// server commands above, under one cobra root (help and completion for all).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code := 0
	extra := make([]*cobra.Command, 0, len(serverCommands))
	for _, sc := range serverCommands {
		extra = append(extra, &cobra.Command{
			Use: sc.name, Short: sc.short,
			// Each parses its own flags (and answers its own -h).
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				code = sc.run(cmd.Context(), args, stdout, stderr)
				return nil
			},
		})
	}
	root := cli.NewRoot(cli.Options{Stdout: stdout, Stderr: stderr, Extra: extra})
	if c := cli.Run(ctx, root, args); c != 0 {
		return c
	}
	return code
}
