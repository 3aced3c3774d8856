package flow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/run"
)

// lockedBuffer is a bytes.Buffer safe for the recorder's writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestEngineMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var out lockedBuffer
	rec := metrics.NewRecorder(metrics.New(&out, metrics.ServiceEngine))
	eng := e.engine(flow.Config{Metrics: rec})
	e.push(chainJSON("metered", 3))
	e.wait(e.start("metered", nil), time.Minute)

	eng.SampleMetrics(context.Background())
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if doc[metrics.StepsEnded] != 3.0 || doc[metrics.OwnedGroups] != float64(testGroups) || doc[metrics.UnownedGroups] != 0.0 ||
		doc[metrics.Ready] != 1.0 {
		t.Errorf("metrics %v, want 3 steps ended, every group owned and the node ready", doc)
	}
	lat, _ := doc[metrics.StepLaunchLatency].(map[string]any)
	var n float64
	for _, c := range lat["Counts"].([]any) {
		n += c.(float64)
	}
	if n != 3 {
		t.Errorf("launch latency samples %v, want one per step", lat)
	}
	if _, ok := doc[metrics.QueueDepth].(float64); !ok {
		t.Errorf("no queue depth in %v", doc)
	}
	if _, ok := doc[metrics.QueueAge].(float64); !ok {
		t.Errorf("no queue age in %v", doc)
	}
}

// Launch latency leaves out the time an attempt waits outside the engine.
func TestLaunchLatencyExcludesWaits(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	rec := metrics.NewRecorder(metrics.New(&out, metrics.ServiceEngine))
	obs := flow.LaunchObserver(rec)
	ref := run.Ref{WorkflowID: "w", InstanceID: 1, RunID: 1}
	t0 := time.Unix(1000, 0)
	for _, ev := range []struct {
		status instance.StepStatus
		after  time.Duration
	}{
		{instance.StepCreated, 0},
		{instance.StepInitialized, 1 * time.Millisecond},
		{instance.StepWaitingForSignals, 2 * time.Millisecond},
		{instance.StepEvaluatingParams, 10 * time.Second}, // a signal arrived 10 s later
		{instance.StepWaitingForPermits, 10*time.Second + 3*time.Millisecond},
		{instance.StepStarting, 10*time.Second + 4*time.Millisecond},
		{instance.StepRunning, 10*time.Second + 6*time.Millisecond},
		{instance.StepSucceeded, 11 * time.Second},
	} {
		obs(ref, "s", 1, ev.status, t0.Add(ev.after))
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &doc); err != nil {
		t.Fatal(err)
	}
	// 2 ms to the signal wait, 3 ms to the permit wait, 2 ms to RUNNING.
	if lat := doc[metrics.StepLaunchLatency]; asFloat(lat) != 7 {
		t.Errorf("launch latency %v ms, want 7 (the 10 s signal wait left out): %v", lat, doc)
	}
	if doc[metrics.StepsEnded] != 1.0 {
		t.Errorf("steps ended %v", doc[metrics.StepsEnded])
	}
}

func asFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case map[string]any:
		if vals, _ := x["Values"].([]any); len(vals) == 1 {
			return vals[0].(float64)
		}
	}
	return -1
}

// BenchmarkStepMetrics: what the engine's metrics add to one step attempt
// (nine transitions, as a NoOp step makes). Target: under 5 µs per step,
// against a step launch of about 1 ms.
func BenchmarkStepMetrics(b *testing.B) {
	rec := metrics.NewRecorder(metrics.New(io.Discard, metrics.ServiceEngine))
	obs := flow.LaunchObserver(rec)
	statuses := []instance.StepStatus{instance.StepCreated, instance.StepInitialized, instance.StepWaitingForSignals,
		instance.StepEvaluatingParams, instance.StepWaitingForPermits, instance.StepStarting, instance.StepRunning,
		instance.StepFinishing, instance.StepSucceeded}
	ref := run.Ref{WorkflowID: "bench", InstanceID: 1, RunID: 1}
	now := time.Now()
	i := int64(0)
	for b.Loop() {
		i++
		for _, st := range statuses {
			obs(ref, "s", i, st, now)
		}
	}
	_ = rec.Flush()
}
