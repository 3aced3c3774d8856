// Package health serves an engine node's health over HTTP.
//
//   - GET /livez (liveness) answers 200 as long as the process serves HTTP.
//     It asks nothing else, the database least of all: the ECS container
//     health check runs `maestro health --live`, and a check that failed
//     with the database would make ECS replace every engine task at once
//     during an Aurora writer failover, then again while the new tasks wait
//     for it.
//   - GET /healthz (readiness) answers 200 with the node's report when it is
//     healthy and 503 when it is not (database unreachable, leases not
//     renewed, no groups held while some are free). Operators and `maestro
//     health` ask it; in AWS the same report is the engine's Ready metric,
//     which an alarm watches.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Path is where the readiness report is served.
const Path = "/healthz"

// LivePath is where liveness is served: 200 while the process answers.
const LivePath = "/livez"

// Report is what a check returns: a JSON-encodable value and whether it
// counts as healthy.
type Report interface {
	OK() bool
}

// Config configures a Server.
type Config struct {
	// Addr is the listen address, e.g. 127.0.0.1:8081.
	Addr string
	// Check builds the report; it is given a context that ends after
	// Timeout.
	Check func(ctx context.Context) Report
	// Timeout bounds one check (default 3s).
	Timeout time.Duration
	// Logger is required.
	Logger *slog.Logger
}

// Server is the health endpoint.
type Server struct {
	cfg  Config
	srv  *http.Server
	addr net.Addr
	once sync.Once
	done chan struct{}
}

// New validates cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" || cfg.Check == nil || cfg.Logger == nil {
		return nil, errors.New("health: Config.Addr, Check and Logger are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	s := &Server{cfg: cfg, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, s.serve)
	mux.HandleFunc("GET "+LivePath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"alive":true}` + "\n"))
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	rep := s.cfg.Check(ctx)
	w.Header().Set("Content-Type", "application/json")
	if !rep.OK() {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(rep)
}

// Start listens on Addr and serves until Stop; it returns once listening.
func (s *Server) Start(context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("health: listen on %s: %w", s.cfg.Addr, err)
	}
	s.addr = ln.Addr()
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("health endpoint stopped", "error", err.Error())
		}
	}()
	return nil
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() net.Addr { return s.addr }

// Stop closes the listener and waits. Idempotent.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.addr == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(ctx)
		<-s.done
	})
}

// Probe asks the readiness endpoint at addr once: nil when it answers 200
// within timeout, otherwise an error carrying the report (`maestro health`).
func Probe(ctx context.Context, addr string, timeout time.Duration) error {
	return probe(ctx, addr, Path, timeout)
}

// ProbeLive asks the liveness endpoint at addr once: nil when it answers 200
// within timeout. `maestro health --live` runs it as the container health
// check.
func ProbeLive(ctx context.Context, addr string, timeout time.Duration) error {
	return probe(ctx, addr, LivePath, timeout)
}

func probe(ctx context.Context, addr, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: ask %s: %w", addr, err)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: unhealthy (%d): %s", resp.StatusCode, body)
	}
	return nil
}
