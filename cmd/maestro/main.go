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
//	maestro ops stuck|nodes|drain|triggers|dlq|audit   operator commands (docs/cli.md)
//	maestro sel eval 'EXPR' [--params J]  evaluate a SEL expression
//	maestro localpg start|stop|url --dir D   manage a throwaway PostgreSQL cluster
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	_ "time/tzdata" // time zones for triggers, even in images without zoneinfo

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/cli"
)

// serverCommand is one command of the server half of the binary, which
// parses its own flags with the standard library's flag package.
type serverCommand struct {
	name, short string
	// usage is the synopsis after "maestro NAME".
	usage string
	// env lists the environment variables the command reads, one per line.
	env []string
	// helpArgs make run print its flags (default -h).
	helpArgs []string
	run      func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Environment shared by the commands that open the database or run steps.
var (
	databaseEnv = []string{
		"DATABASE_URL     the database (or DB_SECRET_ARN: a Secrets Manager secret in RDS's shape; or DB_HOST, DB_PORT, DB_NAME, DB_USER, DB_PASSWORD)",
	}
	localDatabaseEnv = []string{
		"DATABASE_URL     the database; unset: a throwaway PostgreSQL cluster in MAESTRO_DEV_PGDIR (default .maestro/pg)",
	}
	apiEnv = []string{
		"MAESTRO_ADMINS   administrators, names or IAM ARNs separated by commas or spaces (docs/security.md)",
		"MAESTRO_S3_SIGNAL_RULES  rules mapping S3 events posted to /api/v3/signals/messages to signals (docs/signals.md)",
		"MAESTRO_CLUSTER_NAME     the cluster name in events (docs/events.md)",
	}
	engineEnv = []string{
		"MAESTRO_GROUP_COUNT      flow groups of new runs (default the database's count)",
		"MAESTRO_MEMORY_BUDGET    bytes the engine's flows may hold (default 40% of the cgroup limit; docs/limits.md)",
		"MAESTRO_PASSIVATE_AFTER  how long a waiting run stays in memory before it is passivated (default 30s, negative never; docs/engine.md)",
		"MAESTRO_HTTP_*, MAESTRO_LAMBDA_*, MAESTRO_ECS_*  the step runtimes' settings (docs/step-runtimes.md)",
		"LOG_FORMAT               json for JSON logs",
	}
)

// serverCommands are the server half of the binary.
var serverCommands = []serverCommand{
	{name: "dev", short: "run the REST API, the engine and the trigger loop in one process, for local use",
		usage: "[--addr 127.0.0.1:8080] [timeouts]",
		env:   concat(localDatabaseEnv, []string{"user (request header)  the caller; without it the caller is anonymous"}, apiEnv, engineEnv),
		run:   runDev},
	{name: "engine", short: "run the engine (what the ECS Fargate task runs)",
		env: concat(databaseEnv, engineEnv, []string{
			"MAESTRO_ADMINS           administrators, as the API's: a step of their workflow may start any workflow",
			"MAESTRO_NODE_ID          this node's name (default host name and a random suffix)",
			"MAESTRO_MAX_GROUPS       the most flow groups this node owns (default its fair share)",
			"MAESTRO_LEASE            how long a group stays owned without a heartbeat (default 10s)",
			"MAESTRO_WORKERS          concurrent step runtime calls (default 64)",
			"MAESTRO_HEALTH_ADDR      address of the health endpoint (maestro health)",
			"MAESTRO_METRICS_INTERVAL how often metrics are sampled",
			"MAESTRO_EVENT_QUEUE_URL  the SQS queue of internal events (unset: none forwarded)",
			"MAESTRO_CLUSTER_NAME     the cluster name in events",
			"GOMEMLIMIT               set to 85% of the cgroup limit unless given",
		}),
		run: func(ctx context.Context, args []string, _, stderr io.Writer) int {
			return runEngine(ctx, args, stderr)
		}},
	{name: "health", short: "ask a running engine's health endpoint; exit 0 when healthy",
		usage: "[--addr HOST:PORT] [--live] [--timeout 4s]",
		env:   []string{"MAESTRO_HEALTH_ADDR  the endpoint when --addr is not given"},
		run:   runHealth},
	{name: "api", short: "serve the REST API alone against the database, beside engines (--trust-user-header behind an authenticating proxy)",
		usage: "[--addr 127.0.0.1:8081] [--trust-user-header] [timeouts]",
		env: concat(databaseEnv, []string{
			"user (request header)  the caller, with --trust-user-header: a missing or empty one is 401, two are 400",
			"MAESTRO_GROUP_COUNT    flow groups of new runs (default the database's count)",
		}, apiEnv),
		run: runAPI},
	{name: "migrate", short: "apply the database migrations and exit",
		env: databaseEnv,
		run: func(ctx context.Context, args []string, _, stderr io.Writer) int {
			return runMigrate(ctx, args, stderr)
		}},
	{name: "sel", short: "evaluate SEL expressions, or list the params they read",
		usage: `eval 'EXPR' [--params '{"x":1}'] [--timeout 10s] | names 'EXPR'`,
		run:   runSel},
	{name: "localpg", short: "start, stop or print the URL of a throwaway PostgreSQL cluster",
		usage: "start|stop|url [--dir .maestro/pg]", helpArgs: []string{"url", "-h"},
		env: []string{"PATH  must hold PostgreSQL's initdb and postgres (or pg_ctl)"},
		run: runLocalPG},
	{name: "groups", short: "show or raise the flow group count of the database, online",
		usage: "show | raise --to N", helpArgs: []string{"raise", "-h"},
		env: databaseEnv,
		run: runGroups},
	{name: "ops", short: "operator commands: stuck runs, engine nodes, drain a node, pause or resume every trigger, re-drive a DLQ, the audit log",
		usage:    "stuck | nodes | drain --node ID | triggers pause|resume|status | dlq redrive --queue-url URL | audit",
		helpArgs: []string{"-h"},
		env: concat(databaseEnv, []string{
			"MAESTRO_OPERATOR     the operator recorded in the audit log (default the login name; --as)",
			"AWS_REGION, AWS_*    dlq redrive: the AWS configuration (MAESTRO_AWS_ENDPOINT: another endpoint, e.g. an emulator)",
		}),
		run: runOps},
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// wantsHelp reports whether args ask for help (before any "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// printHelp says what the command does, its flags (as the command's own
// flag set prints them) and its environment.
func printHelp(ctx context.Context, w io.Writer, sc serverCommand) {
	fmt.Fprintf(w, "maestro %s: %s\n\nUsage: maestro %s %s\n", sc.name, sc.short, sc.name, sc.usage)
	helpArgs := sc.helpArgs
	if helpArgs == nil {
		helpArgs = []string{"-h"}
	}
	var own bytes.Buffer
	sc.run(ctx, helpArgs, &own, &own)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(own.String(), "\n"), "\n") {
		if strings.HasPrefix(l, "Usage of ") || strings.TrimSpace(l) == "" && len(lines) == 0 {
			continue
		}
		lines = append(lines, l)
	}
	switch {
	case len(lines) > 0 && strings.HasPrefix(lines[0], "  -"):
		fmt.Fprintf(w, "\nFlags:\n%s\n", strings.Join(lines, "\n"))
	case len(lines) > 0:
		fmt.Fprintf(w, "\n%s\n", strings.Join(lines, "\n"))
	default:
		fmt.Fprintln(w, "\nFlags: none")
	}
	if len(sc.env) > 0 {
		fmt.Fprintf(w, "\nEnvironment:\n  %s\n", strings.Join(sc.env, "\n  "))
	}
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
				if wantsHelp(args) {
					printHelp(cmd.Context(), stdout, sc)
					return nil
				}
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
