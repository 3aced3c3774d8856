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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/eventsvc"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/groupcount"
	"github.com/maestro-aws/maestro/engine/retention"
	enginerun "github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/trigger/scheduler"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
	"github.com/maestro-aws/maestro/engine/webui"
)

// httpFlags are the flags of the commands that serve the REST API.
type httpFlags struct {
	addr     *string
	timeouts api.HTTPTimeouts
}

func addHTTPFlags(fs *flag.FlagSet, defaultAddr string) *httpFlags {
	d := api.DefaultHTTPTimeouts()
	f := &httpFlags{addr: fs.String("addr", defaultAddr, "address the REST API listens on")}
	fs.DurationVar(&f.timeouts.ReadHeader, "read-header-timeout", d.ReadHeader, "time a client has to send the request headers")
	fs.DurationVar(&f.timeouts.Read, "read-timeout", d.Read, "time a client has to send the whole request")
	fs.DurationVar(&f.timeouts.Write, "write-timeout", d.Write, "time to write the response")
	fs.DurationVar(&f.timeouts.Idle, "idle-timeout", d.Idle, "time a kept-alive connection may wait for its next request")
	return f
}

// runDev runs everything in one process against DATABASE_URL, or against a
// throwaway PostgreSQL under .maestro/ when it is unset.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hf := addHTTPFlags(fs, "127.0.0.1:8080")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := newLogger(false)
	if err := dev(ctx, hf, stdout, logger); err != nil {
		fmt.Fprintln(stderr, "maestro dev:", err)
		return 1
	}
	return 0
}

func dev(ctx context.Context, hf *httpFlags, stdout io.Writer, logger *slog.Logger) error {
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
		LinkBase: "http://" + *hf.addr, Retention: 24 * time.Hour})
	if err != nil {
		return err
	}
	defer events.Stop()
	signals, err := signalbroker.SweeperFromEnv(os.Getenv, logger)
	if err != nil {
		return err
	}
	eng, err := startEngine(ctx, pool, logger, nil, events.Wake, signals.Kick)
	if err != nil {
		return err
	}
	defer eng.Stop()

	// maestro dev is for one person on one machine: the `user` header
	// names the caller.
	defs := definition.NewStore(pool)
	runs := execution.New(pool, defs, eng.GroupCount())
	// Signals: POST /api/v3/signals and /api/v3/signals/messages (the
	// signals Lambda's message shapes) announce through the broker; the
	// sweeper matches the engine's output signals.
	signals.Broker = signalbroker.New(pool, runs, logger)
	if err := withIceberg(ctx, signals.Broker, logger); err != nil {
		return err
	}
	if err := signals.Start(ctx); err != nil {
		return err
	}
	defer signals.Stop()
	backfills, err := startBackfills(ctx, pool, defs, runs, logger)
	if err != nil {
		return err
	}
	defer backfills.Stop()
	// The run archive: a directory (MAESTRO_ARCHIVE_DIR, default
	// .maestro/archive), runs kept MAESTRO_RETENTION (default 30d).
	store, err := archive.FromEnv(ctx, os.Getenv, devArchiveDir)
	if err != nil {
		return err
	}
	stopArchiver, err := startArchiver(ctx, pool, store, logger, devRetention)
	if err != nil {
		return err
	}
	defer stopArchiver()
	handler, err := apiHandler(pool, logger, userHeaderOrAnonymous, defs, runs, events.Feed, store)
	if err != nil {
		return err
	}
	// The time-trigger loop (the time-trigger Lambda's work, in-process).
	sched, err := scheduler.FromEnv(pool, runs, scheduler.Config{Logger: logger}, os.Getenv)
	if err != nil {
		return err
	}
	triggers := scheduler.NewService(sched)
	if err := triggers.Start(ctx); err != nil {
		return err
	}
	defer triggers.Stop()
	return serveAPI(ctx, hf, handler, stdout, logger, "maestro dev")
}

// runAPI serves the REST API alone (no engine) against DATABASE_URL: more
// API processes beside the engines, or the API behind a proxy that
// authenticates callers and names them in the `user` header
// (--trust-user-header). Without that flag every request but health and
// the OpenAPI document is refused as unauthenticated.
func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hf := addHTTPFlags(fs, "127.0.0.1:8081")
	trust := fs.Bool("trust-user-header", false, "take the caller's identity from the user request header (behind a proxy that authenticates)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := newLogger(true)
	err := func() error {
		dsn, _, err := resolveDSN(ctx, logger, false)
		if err != nil {
			return err
		}
		pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 16, ApplicationName: "maestro-api"})
		if err != nil {
			return err
		}
		defer pool.Close()
		groups, err := groupcount.Resolve(ctx, pool, envInt("MAESTRO_GROUP_COUNT", 0), enginerun.DefaultGroupCount, "api "+hostname())
		if err != nil {
			return err
		}
		defs := definition.NewStore(pool)
		// A feed of JSON pages: the live stream is maestro dev's.
		feed := event.NewFeed(pool, nil, os.Getenv("MAESTRO_CLUSTER_NAME"))
		users := noUserHeader
		if *trust {
			users = userHeaderRequired
		}
		store, err := archive.FromEnv(ctx, os.Getenv, "")
		if err != nil {
			return err
		}
		handler, err := apiHandler(pool, logger, users, defs, execution.New(pool, defs, groups), feed, store)
		if err != nil {
			return err
		}
		return serveAPI(ctx, hf, handler, stdout, logger, "maestro api")
	}()
	if err != nil {
		fmt.Fprintln(stderr, "maestro api:", err)
		return 1
	}
	return 0
}

// apiHandler builds the REST API over pool; MAESTRO_ADMINS names the
// administrators (docs/security.md), MAESTRO_S3_SIGNAL_RULES the rules of
// S3 events posted to /api/v3/signals/messages (docs/signals.md).
// userHeaderMode is how the API takes callers from the `user` header.
type userHeaderMode int

const (
	// noUserHeader: callers come from nowhere; all but public routes 401.
	noUserHeader userHeaderMode = iota
	// userHeaderRequired: behind an authenticating proxy, a missing or
	// empty header is 401 (maestro api --trust-user-header).
	userHeaderRequired
	// userHeaderOrAnonymous: one person's dev server; no header is the
	// caller anonymous (maestro dev).
	userHeaderOrAnonymous
)

func apiHandler(pool *pgxpool.Pool, logger *slog.Logger, users userHeaderMode, defs *definition.Store, runs *execution.Service,
	events *event.Feed, store archive.Store) (*api.Server, error) {
	rules, err := signalmsg.ParseRules(os.Getenv("MAESTRO_S3_SIGNAL_RULES"))
	if err != nil {
		return nil, err
	}
	var archived *retention.Reader
	if store != nil {
		archived = retention.NewReader(pool, store)
	}
	reader, manifests, err := icebergFromEnv(context.Background(), logger)
	if err != nil {
		return nil, err
	}
	return api.New(api.Config{
		DB: pool, Logger: logger, Events: events,
		TrustUserHeader: users != noUserHeader, RequireUserHeader: users == userHeaderRequired,
		Admins:      authz.ParsePrincipals(os.Getenv("MAESTRO_ADMINS")),
		Definitions: defs, Runs: runs, SignalRules: rules, UI: webui.Files{}, Archive: archived,
		Iceberg: reader, IcebergManifests: manifests,
	})
}

// serveAPI serves handler on the flags' address with their timeouts until
// ctx ends, then shuts down within 10 s.
func serveAPI(ctx context.Context, hf *httpFlags, handler http.Handler, stdout io.Writer, logger *slog.Logger, name string) error {
	ln, err := net.Listen("tcp", *hf.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *hf.addr, err)
	}
	srv := api.NewHTTPServer(handler, hf.timeouts)
	// Requests live in ctx, so that live event streams end on shutdown.
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%s: REST API on http://%s/api/v3 (health: http://%s/api/v3/health)\n", name, ln.Addr(), ln.Addr())

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
	logger.Info(name + " stopped")
	return nil
}
