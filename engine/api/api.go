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
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
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
	// Admins may change any workflow's properties and delete any workflow.
	Admins []string
	// TrustUserHeader makes the `user` request header name the caller when
	// no identity came from the platform (maestro dev).
	TrustUserHeader bool
	// Events serves GET /api/v3/events; nil answers 404.
	Events *event.Feed
}

// Server routes and serves the API.
type Server struct {
	cfg Config
	mux *http.ServeMux
}

// New builds the handler.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		return nil, errors.New("api: Config.Logger is required")
	}
	if cfg.DB == nil || cfg.Definitions == nil || cfg.Runs == nil {
		return nil, errors.New("api: Config.DB, Config.Definitions and Config.Runs are required")
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

// handlerFunc is an endpoint that returns an error instead of writing one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			if asError(err).HTTPStatus >= 500 {
				s.cfg.Logger.ErrorContext(r.Context(), "request failed",
					"method", r.Method, "path", r.URL.Path, "error", err.Error())
			}
			writeError(w, err)
		}
	}))
}

func (s *Server) routes() {
	s.handle("GET /api/v3/health", s.health)
	s.workflowRoutes()
	s.instanceRoutes()
	s.patternRoutes()
	s.signalRoutes()
	s.eventRoutes()
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound(fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)))
	}))
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
	if err := checkText(r); err != nil {
		writeError(w, err)
		return
	}
	if CallerFrom(r.Context()) == "" && s.cfg.TrustUserHeader {
		if u := r.Header.Get("user"); u != "" {
			r = r.WithContext(WithCaller(r.Context(), u))
		}
	}
	s.mux.ServeHTTP(w, r)
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

type callerKey struct{}

// WithCaller records who is calling: the IAM principal in Lambda, the `user`
// header in maestro dev.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom returns the caller recorded by WithCaller, or "".
func CallerFrom(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}
