// Package api is Maestro's REST API as an http.Handler. The API Lambda serves
// it behind API Gateway and `maestro dev` serves it on localhost. It validates
// and writes; it never runs workflow logic.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/iceberg"
	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
)

// MaxBodyBytes is the largest request body accepted (Maestro's limit for a
// workflow definition).
const MaxBodyBytes = 256 << 10

// Config holds what the handler needs.
type Config struct {
	// DB is the Maestro database.
	DB *pgxpool.Pool
	// Logger receives one line per failed request. Required.
	Logger *slog.Logger
	// Definitions stores workflow definitions. Required.
	Definitions *definition.Store
	// Runs starts, stops and reads workflow instances. Required.
	Runs *execution.Service
	// Admins may do everything any owner may (docs/security.md). Entries
	// are principals as authz.Matches reads them.
	Admins []string
	// TrustUserHeader makes the `user` request header name the caller when
	// no identity came from the platform (maestro dev); a request without
	// one is the caller "anonymous". Without it, a request with no identity
	// is refused (401) except for the public routes.
	TrustUserHeader bool
	// RequireUserHeader, with TrustUserHeader, makes a request without a
	// `user` header, or with an empty one, a request without a caller (401
	// but on public routes) instead of the caller "anonymous": maestro api
	// --trust-user-header, behind a proxy that authenticates.
	RequireUserHeader bool
	// RequestTimeout bounds the work of one request (default 30s): a
	// database that stops answering makes a request fail with 503 instead
	// of holding it.
	RequestTimeout time.Duration
	// Events serves GET /api/v3/events; nil answers 404.
	Events *event.Feed
	// Signals announces signals; nil builds one over DB and Runs.
	Signals *signalbroker.Broker
	// SignalRules map S3 object events posted to /api/v3/signals/messages
	// to signals (MAESTRO_S3_SIGNAL_RULES).
	SignalRules signalmsg.Rules
	// Iceberg reads the Iceberg catalog (MAESTRO_ICEBERG_CATALOG_URI): the
	// files an incremental run's range added (its added_* params), and the
	// snapshot of a Glue or S3 Tables event posted to
	// /api/v3/signals/messages. Nil: neither (docs/incremental.md).
	Iceberg *iceberg.Reader
	// IcebergManifests writes the manifest of a range that added more
	// files than a param lists (MAESTRO_ICEBERG_MANIFEST_LOCATION).
	IcebergManifests *iceberg.Manifests
	// Archive reads runs the archiver moved out of the database
	// (engine/retention): GET of a run that is no longer in the database
	// answers from it, marked "archived": true. Nil: such a GET is 404.
	Archive *retention.Reader
	// UI, when set, is the web UI the API serves beside itself (/, /ui/,
	// /api/v3/docs): the maestro binary sets it (engine/webui); the API
	// Lambda does not, and `maestro ui` serves it next to a deployment.
	UI UI
}

// UI is the web UI's embedded files: Handler serves file NAME at /NAME
// (the page at /), Has reports whether there is one.
type UI interface {
	Handler() http.Handler
	Has(name string) bool
}

// Server routes and serves the API.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	policy   authz.Policy
	signals  *signalbroker.Broker
	messages *signalmsg.Parser
	// stepTokens checks the step token of output-data and step-completion
	// calls.
	stepTokens *completion.Tokens
}

// New builds the handler.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		return nil, errors.New("api: Config.Logger is required")
	}
	if cfg.DB == nil || cfg.Definitions == nil || cfg.Runs == nil {
		return nil, errors.New("api: Config.DB, Config.Definitions and Config.Runs are required")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), policy: authz.Policy{Admins: cfg.Admins}, signals: cfg.Signals,
		messages: &signalmsg.Parser{Rules: cfg.SignalRules, Logger: cfg.Logger, Via: "api"}, stepTokens: completion.NewTokens(cfg.DB)}
	if s.signals == nil {
		s.signals = signalbroker.New(cfg.DB, cfg.Runs, cfg.Logger)
		if cfg.Iceberg != nil {
			s.signals.SetTableReader(cfg.Iceberg, cfg.IcebergManifests.WriterFunc())
		}
	}
	if cfg.Iceberg != nil {
		s.messages.Tables = cfg.Iceberg
	}
	s.routes()
	return s, nil
}

// handlerFunc is an endpoint that returns an error instead of writing one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers an endpoint. Before h runs, the caller is checked
// against the access the route needs (routeAccess, docs/security.md); every
// request that may change something is logged with its caller.
func (s *Server) handle(pattern string, h handlerFunc) {
	a := accessFor(pattern)
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		r, err := s.authorize(r, a)
		if err == nil {
			err = h(sw, r)
		}
		if err != nil {
			e := asError(err)
			if e.HTTPStatus >= 500 {
				s.cfg.Logger.ErrorContext(r.Context(), "request failed",
					"method", r.Method, "path", r.URL.Path, "caller", CallerFrom(r.Context()), "error", err.Error())
			}
			writeError(sw, e)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.cfg.Logger.InfoContext(r.Context(), "api action", "method", r.Method, "path", r.URL.Path,
				"caller", CallerFrom(r.Context()), "role", a.role.String(), "status", sw.status)
		}
	}))
}

// statusWriter remembers the status a handler wrote, for the action log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach the connection's writer: the
// live event stream flushes and lifts the write deadline through it.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (s *Server) routes() {
	s.handle("GET /api/v3/health", s.health)
	s.workflowRoutes()
	s.instanceRoutes()
	s.patternRoutes()
	s.signalRoutes()
	s.timeTriggerRoutes()
	s.eventRoutes()
	s.uiRoutes()
	s.jobTemplateRoutes()
	s.flattenRoutes()
	s.backfillRoutes()
	s.incrementalRoutes()
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && s.cfg.UI != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			_ = redirectToUI(w, r) // a browser at the root meets the UI
			return
		}
		if allowed := s.allowedMethods(r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, &Error{HTTPStatus: http.StatusMethodNotAllowed, Code: "METHOD_NOT_ALLOWED",
				Message: fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allowed, ", "))})
			return
		}
		writeError(w, notFound(fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)))
	}))
}

// allowedMethods lists the methods a route serves on r's path (the
// catch-all route hides the mux's own 405).
func (s *Server) allowedMethods(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// cleanPath reports whether p is a path the mux serves as it is: no "."
// or ".." segment and no empty one. The mux would answer such a path with
// a redirect to its cleaned form, which a client should not be led to
// follow into another route.
func cleanPath(p string) bool {
	if strings.Contains(p, "//") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// ServeHTTP applies the cross-cutting rules: panics become 500s, bodies are
// capped, and the caller's identity is resolved.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			s.cfg.Logger.ErrorContext(r.Context(), "panic serving request",
				"method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			writeError(w, internal())
		}
	}()
	if r.ContentLength > MaxBodyBytes {
		writeError(w, tooLarge(fmt.Sprintf("request body is %d bytes; the limit is %d", r.ContentLength, MaxBodyBytes)))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if !liveStream(r) {
		// A live event stream lasts as long as its client stays; every
		// other request's work is bounded.
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if err := checkText(r); err != nil {
		writeError(w, err)
		return
	}
	if !cleanPath(r.URL.Path) {
		writeError(w, badRequest("the path has a '.', '..' or empty segment: "+strconv.Quote(r.URL.Path)))
		return
	}
	if CallerFrom(r.Context()) == "" && s.cfg.TrustUserHeader {
		u, err := s.userHeader(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if u != "" {
			r = r.WithContext(WithCaller(r.Context(), u))
		}
	}
	s.mux.ServeHTTP(w, r)
}

// userHeader reads the caller from the `user` header: "" for none (a
// missing or empty header where RequireUserHeader, so the route's access
// check answers 401), else "anonymous" for none. Two `user` headers are a
// 400: a proxy that appends the header instead of replacing it must not
// let the client choose who it is.
func (s *Server) userHeader(r *http.Request) (string, error) {
	values := r.Header.Values("user")
	if len(values) > 1 {
		return "", badRequest(fmt.Sprintf("the request has %d user headers; send one", len(values)))
	}
	u := ""
	if len(values) == 1 {
		u = values[0]
	}
	if strings.TrimSpace(u) == "" {
		if s.cfg.RequireUserHeader {
			return "", nil
		}
		return definition.Anonymous, nil
	}
	if err := authz.CheckCaller(u); err != nil {
		return "", badRequest("invalid user header: " + err.Error())
	}
	return u, nil
}

// liveStream reports whether r asks for the live event stream (Server-Sent
// Events), which is exempt from the request timeout.
func liveStream(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Path == "/api/v3/events" &&
		strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// checkText refuses a path or query that PostgreSQL could not store: NUL
// bytes and invalid UTF-8 are a 400 here instead of a database error later.
func checkText(r *http.Request) *Error {
	for _, part := range []string{r.URL.Path, r.URL.RawQuery} {
		decoded, err := url.PathUnescape(part)
		if err != nil {
			return badRequest("the URL is not properly escaped")
		}
		if !utf8.ValidString(decoded) || strings.ContainsRune(decoded, 0) {
			return badRequest("the URL contains a NUL byte or invalid UTF-8")
		}
	}
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		return unavailable("database unreachable")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// WithCaller records who is calling: the IAM principal in Lambda, the `user`
// header in maestro dev (authz.WithCaller).
func WithCaller(ctx context.Context, caller string) context.Context {
	return authz.WithCaller(ctx, caller)
}

// CallerFrom returns the caller recorded by WithCaller, or "".
func CallerFrom(ctx context.Context) string { return authz.CallerFrom(ctx) }
