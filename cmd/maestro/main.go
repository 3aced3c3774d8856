// Command maestro is the one binary users run:
//
//	maestro dev [--addr 127.0.0.1:8080]   everything in one process, for local use
//	maestro engine                        the long-running engine (the Fargate task)
//	maestro health [--addr A]             ask the engine's health endpoint (the container health check)
//	maestro api [--addr 127.0.0.1:8081]   the REST API alone, beside engines
//	maestro migrate                       apply migrations to DATABASE_URL and exit
//	maestro sel eval 'EXPR' [--params J]  evaluate a SEL expression
//	maestro localpg start|stop|url --dir D   manage a throwaway PostgreSQL cluster
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // time zones for triggers, even in images without zoneinfo
)

const usage = `usage: maestro <command> [flags]

commands:
  dev       run the REST API, the engine and the trigger loop in one process
  engine    run the engine (what the ECS Fargate task runs)
  health    ask a running engine's health endpoint (MAESTRO_HEALTH_ADDR); exit 0 when healthy
  api       serve the REST API alone against DATABASE_URL (--trust-user-header behind an authenticating proxy)
  migrate   apply database migrations to DATABASE_URL and exit
  sel       evaluate SEL expressions: maestro sel eval 'EXPR' [--params '{"x":1}']
  localpg   start, stop or print the URL of a throwaway PostgreSQL cluster
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "dev":
		return runDev(ctx, args[1:], stdout, stderr)
	case "engine":
		return runEngine(ctx, args[1:], stderr)
	case "health":
		return runHealth(ctx, args[1:], stdout, stderr)
	case "api":
		return runAPI(ctx, args[1:], stdout, stderr)
	case "migrate":
		return runMigrate(ctx, args[1:], stderr)
	case "sel":
		return runSel(ctx, args[1:], stdout, stderr)
	case "localpg":
		return runLocalPG(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "maestro: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
