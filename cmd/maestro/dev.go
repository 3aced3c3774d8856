package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/eventsvc"
	"github.com/maestro-aws/maestro/engine/execution"
)

// runDev runs everything in one process against DATABASE_URL, or against a
// throwaway PostgreSQL under .maestro/ when it is unset.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address the REST API listens on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := newLogger(false)
	if err := dev(ctx, *addr, stdout, logger); err != nil {
		fmt.Fprintln(stderr, "maestro dev:", err)
		return 1
	}
	return 0
}

func dev(ctx context.Context, addr string, stdout io.Writer, logger *slog.Logger) error {
	dsn, stopPG, err := resolveDSN(ctx, logger, true)
	if err != nil {
		return err
	}
	defer stopPG()
	if err := migrate(ctx, dsn, logger); err != nil {
		return err
	}
	pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{ApplicationName: "maestro-dev"})
	if err != nil {
		return err
	}
	defer pool.Close()

	events, err := eventsvc.Start(ctx, pool, eventsvc.Options{Logger: logger, Getenv: os.Getenv, Local: true,
		LinkBase: "http://" + addr, Retention: 24 * time.Hour})
	if err != nil {
		return err
	}
	defer events.Stop()
	eng, err := startEngine(ctx, pool, logger, events.Wake)
	if err != nil {
		return err
	}
	defer eng.Stop()

	defs := definition.NewStore(pool)
	handler, err := api.New(api.Config{
		DB: pool, Logger: logger, TrustUserHeader: true, Events: events.Feed,
		Definitions: defs, Runs: execution.New(pool, defs, envInt("MAESTRO_GROUP_COUNT", 0)),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	// Requests live in ctx, so that live event streams end on shutdown.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "maestro dev: REST API on http://%s/api/v3 (health: http://%s/api/v3/health)\n", ln.Addr(), ln.Addr())

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	logger.Info("maestro dev stopped")
	return nil
}
