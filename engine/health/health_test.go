package health

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type report struct {
	Healthy bool   `json:"healthy"`
	Why     string `json:"why"`
}

func (r report) OK() bool { return r.Healthy }

func TestServerAndProbe(t *testing.T) {
	var healthy atomic.Bool
	var calls atomic.Int32
	healthy.Store(true)
	s, err := New(Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Check: func(ctx context.Context) Report {
			calls.Add(1)
			if _, ok := ctx.Deadline(); !ok {
				t.Error("check without a deadline")
			}
			return report{Healthy: healthy.Load(), Why: "no lease"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	addr := s.Addr().String()
	if err := Probe(context.Background(), addr, 2*time.Second); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	healthy.Store(false)
	err = Probe(context.Background(), addr, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "no lease") {
		t.Fatalf("unhealthy: %v, want a 503 with the report", err)
	}
	// Liveness does not run the check: a node that is not ready (its
	// database gone, say) is still alive, so ECS leaves it be.
	checks := calls.Load()
	if err := ProbeLive(context.Background(), addr, 2*time.Second); err != nil {
		t.Fatalf("not ready, yet not alive: %v", err)
	}
	if calls.Load() != checks {
		t.Error("the liveness probe ran the readiness check")
	}
	s.Stop()
	s.Stop()
	if err := Probe(context.Background(), addr, time.Second); err == nil {
		t.Fatal("probe of a stopped server succeeded")
	}
	if err := ProbeLive(context.Background(), addr, time.Second); err == nil {
		t.Fatal("liveness probe of a stopped server succeeded")
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("no error without Check and Logger")
	}
}
