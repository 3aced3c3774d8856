package httpstep_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// BenchmarkHttpSteps1000: 1,000 runs of a one-step Http workflow started at
// once against a local server that answers each request after 100 ms. The
// engine's overhead per step is the step's time from STARTING (written) to
// SUCCEEDED (written) less the time the server spent on the request: the
// STARTING and RUNNING writes with the recorded intent, the wait for a
// worker, the connection, the outputs and the final write. Targets:
// overhead p50 <= 20 ms, p99 <= 150 ms with 1,000 in flight. Also reported:
// CPU of this process (engine, API and the test server) per 1,000 steps
// and in cores while the steps run.
func BenchmarkHttpSteps1000(b *testing.B) {
	const runs = 1000
	var mu sync.Mutex
	served := map[int64]time.Duration{} // instance id -> time the server held the request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		time.Sleep(100 * time.Millisecond)
		_, _ = w.Write([]byte(`{"ok": true}`))
		id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
		mu.Lock()
		served[id] = time.Since(start)
		mu.Unlock()
	}))
	b.Cleanup(srv.Close)

	starting, done := map[run.Ref]time.Time{}, map[run.Ref]time.Time{}
	env := flowtest.New(b)
	env.Engine(stepruntime.Registry{httpstep.Type: httpstep.New(httpstep.Config{})}, flow.Config{
		Workers: 2 * runs,
		Observer: func(ref run.Ref, _ string, _ int64, st instance.StepStatus, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case instance.StepStarting:
				starting[ref] = at
			case instance.StepSucceeded:
				done[ref] = at
			}
		},
	})
	env.Push(fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":%d}},
	  "workflow":{"id":"calls","steps":[{"step":{"id":"call","type":"Http",
	    "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s/${workflow_instance_id}"}}}}}}]}}`, runs, srv.URL))

	var overhead []time.Duration
	var cpu, wall time.Duration
	b.ResetTimer()
	for b.Loop() {
		cpu0, wall0 := cpuTime(), time.Now()
		insts := make([]*execution.Instance, runs)
		var wg sync.WaitGroup
		next := make(chan int)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					insts[i] = env.Start("calls")
				}
			}()
		}
		for i := range runs {
			next <- i
		}
		close(next)
		wg.Wait()
		for _, inst := range insts {
			if got := env.Wait(inst, 5*time.Minute); got.Status != instance.WorkflowSucceeded {
				b.Fatalf("run %d ended %s", inst.InstanceID, got.Status)
			}
		}
		cpu += cpuTime() - cpu0
		wall += time.Since(wall0)
		mu.Lock()
		for _, inst := range insts {
			ref := run.Ref{WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID, RunID: inst.RunID}
			s, ok1 := starting[ref]
			d, ok2 := done[ref]
			held, ok3 := served[inst.InstanceID]
			if ok1 && ok2 && ok3 {
				overhead = append(overhead, d.Sub(s)-held)
			}
		}
		mu.Unlock()
	}
	if len(overhead) < b.N*runs {
		b.Fatalf("measured %d of %d steps", len(overhead), b.N*runs)
	}
	b.ReportMetric(ms(percentile(overhead, 0.5)), "p50-overhead-ms")
	b.ReportMetric(ms(percentile(overhead, 0.99)), "p99-overhead-ms")
	b.ReportMetric(cpu.Seconds()/float64(b.N*runs)*1000, "cpu-s/1k-steps")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cpuTime() time.Duration { return dbtest.ProcessCPU() }
