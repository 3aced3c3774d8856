package flow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/metrics"
)

func TestHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	owner := e.engine(flow.Config{NodeID: "owner"})
	h := owner.Health(ctx, 2*time.Second)
	if !h.Healthy || h.OwnedGroups != testGroups || h.UnownedGroups != 0 || h.NodeID != "owner" {
		t.Fatalf("owner: %+v", h)
	}

	// A second node finds every group held under a live lease: a healthy
	// standby.
	standby := e.engine(flow.Config{NodeID: "standby"})
	if h := standby.Health(ctx, 2*time.Second); !h.Healthy || h.OwnedGroups != 0 {
		t.Fatalf("standby: %+v", h)
	}

	// A node whose database is gone: unhealthy at once, and once a lease
	// has passed without a lease round it says so too.
	pool, err := dbconn.Open(ctx, dbtest.URL(t), dbconn.PoolOptions{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	rec := metrics.NewRecorder(metrics.New(&out, metrics.ServiceEngine))
	lost, err := flow.New(pool, flow.Config{NodeID: "lost", GroupCount: testGroups, Lease: time.Second, Logger: flowtest.Logger(), Runtimes: testRuntimes(),
		Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := lost.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lost.Stop)
	if h := lost.Health(ctx, 2*time.Second); !h.Healthy {
		t.Fatalf("before the database goes: %+v", h)
	}
	pool.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := lost.Health(ctx, time.Second)
		text := strings.Join(h.Problems, "; ")
		if !h.Healthy && strings.Contains(text, "database unreachable") && strings.Contains(text, "no successful lease round") {
			if h.OK() {
				t.Error("OK() disagrees with Healthy")
			}
			// The readiness metric the EngineNotReady alarm reads says so
			// too (the container's liveness check does not).
			lost.SampleMetrics(ctx)
			if err := rec.Flush(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), `"`+metrics.Ready+`":0`) {
				t.Errorf("metrics of a node without its database: %s, want %s 0", out.String(), metrics.Ready)
			}
			break
		}
		if h.Healthy && time.Since(h.LastLeaseRound) > 2*time.Second {
			t.Fatalf("healthy without a database: %+v", h)
		}
		if time.Now().After(deadline) {
			t.Fatalf("never reported both problems: %+v", h)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
