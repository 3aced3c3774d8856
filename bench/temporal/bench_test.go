package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// config is one way of running the same workflows: SDK options on the
// client's side; the server's side is the dev server's flags
// (.ci/bench-temporal), named by server.
type config struct {
	name   string
	server string // "default" or "tuned": the dev server it needs
	local  bool   // steps as local activities
	eager  bool   // eager workflow start
	worker worker.Options
}

var configs = []config{
	{name: "default", server: "default"},
	{name: "tuned-eager", server: "tuned", eager: true, worker: worker.Options{
		MaxConcurrentWorkflowTaskPollers: 8,
		MaxConcurrentActivityTaskPollers: 8,
	}},
	{name: "tuned", server: "tuned", local: true, eager: true, worker: worker.Options{
		MaxConcurrentWorkflowTaskPollers: 8,
		MaxConcurrentActivityTaskPollers: 8,
	}},
}

// recorder keeps the time each step's activity ran, by workflow.
type recorder struct {
	mu    sync.Mutex
	steps map[string][]time.Time // workflow ID -> start of step i
	all   []time.Time
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.steps = map[string][]time.Time{}
	r.all = r.all[:0]
	r.mu.Unlock()
}

// NoOp is the step: it notes when it ran and returns.
func (r *recorder) NoOp(ctx context.Context, step int) error {
	now := time.Now()
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.steps[id]
	for len(ts) <= step {
		ts = append(ts, time.Time{})
	}
	ts[step] = now
	r.steps[id] = ts
	r.all = append(r.all, now)
	return nil
}

// Chain runs n NoOp steps one after another.
func Chain(ctx workflow.Context, n int, local bool) error {
	if local {
		ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	} else {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	}
	for i := range n {
		var f workflow.Future
		if local {
			f = workflow.ExecuteLocalActivity(ctx, "NoOp", i)
		} else {
			f = workflow.ExecuteActivity(ctx, "NoOp", i)
		}
		if err := f.Get(ctx, nil); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// env is a client and a worker on a task queue of their own.
type env struct {
	cfg       config
	client    client.Client
	queue     string
	rec       *recorder
	serverPID int
}

func newEnv(b *testing.B, cfg config) *env {
	b.Helper()
	addr := os.Getenv("TEMPORAL_BENCH_ADDRESS")
	if addr == "" {
		b.Skip("TEMPORAL_BENCH_ADDRESS is not set: run make bench-temporal")
	}
	pid, _ := strconv.Atoi(os.Getenv("TEMPORAL_BENCH_SERVER_PID"))
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: "default", Logger: tlog.NewStructuredLogger(logger)})
	if err != nil {
		b.Fatalf("dial %s: %v", addr, err)
	}
	b.Cleanup(c.Close)
	e := &env{cfg: cfg, client: c, queue: fmt.Sprintf("bench-%s-%d", cfg.name, time.Now().UnixNano()),
		rec: &recorder{steps: map[string][]time.Time{}}, serverPID: pid}
	w := worker.New(c, e.queue, cfg.worker)
	w.RegisterWorkflowWithOptions(Chain, workflow.RegisterOptions{Name: "Chain"})
	w.RegisterActivityWithOptions(e.rec.NoOp, activity.RegisterOptions{Name: "NoOp"})
	if err := w.Start(); err != nil {
		b.Fatalf("start worker: %v", err)
	}
	b.Cleanup(w.Stop)
	return e
}

func (e *env) start(ctx context.Context, id string, steps int) (client.WorkflowRun, error) {
	return e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: e.queue, EnableEagerStart: e.cfg.eager,
	}, "Chain", steps, e.cfg.local)
}

// launchGaps are, for regular activities, the server's times from step
// i-1's completion being recorded to step i being started: the engine's
// launch overhead (predecessor terminal -> step running, both written).
func (e *env) launchGaps(ctx context.Context, id, runID string) ([]time.Duration, error) {
	var completed, started []time.Time
	it := e.client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started = append(started, ev.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			completed = append(completed, ev.GetEventTime().AsTime())
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(started) && i-1 < len(completed); i++ {
		gaps = append(gaps, started[i].Sub(completed[i-1]))
	}
	return gaps, nil
}

// forServer runs f as config=NAME for each configuration the running dev
// server was started for.
func forServer(b *testing.B, f func(*testing.B, config)) {
	server := os.Getenv("TEMPORAL_BENCH_SERVER")
	if server == "" {
		server = "default"
	}
	for _, cfg := range configs {
		if cfg.server == server {
			b.Run("config="+cfg.name, func(b *testing.B) { f(b, cfg) })
		}
	}
}

// BenchmarkChain100: one workflow of 100 NoOp steps one after another.
// Reports
//   - p50-step-ms, p99-step-ms: from a step's activity starting to the
//     next one's starting, in the worker (the whole round trip of a step);
//   - ms/step: start request to result, divided by 100;
//   - p50-launch-ms, p99-launch-ms (regular activities): from the server's
//     completion of a step to its start of the next, from the history, the
//     counterpart of the engine's BenchmarkStepLaunchOverhead.
func BenchmarkChain100(b *testing.B) {
	forServer(b, func(b *testing.B, cfg config) {
		const steps = 100
		e := newEnv(b, cfg)
		ctx := context.Background()
		var gaps, launches []time.Duration
		var total time.Duration
		iter := 0
		b.ResetTimer()
		for b.Loop() {
			e.rec.reset()
			id := fmt.Sprintf("%s-chain-%d", e.queue, iter)
			iter++
			t0 := time.Now()
			run, err := e.start(ctx, id, steps)
			if err != nil {
				b.Fatalf("start %s: %v", id, err)
			}
			if err := run.Get(ctx, nil); err != nil {
				b.Fatalf("run %s: %v", id, err)
			}
			total += time.Since(t0)
			b.StopTimer()
			e.rec.mu.Lock()
			ts := slices.Clone(e.rec.steps[id])
			e.rec.mu.Unlock()
			if len(ts) != steps {
				b.Fatalf("%s ran %d steps, want %d", id, len(ts), steps)
			}
			for i := 1; i < steps; i++ {
				gaps = append(gaps, ts[i].Sub(ts[i-1]))
			}
			if !cfg.local {
				l, err := e.launchGaps(ctx, id, run.GetRunID())
				if err != nil {
					b.Fatal(err)
				}
				launches = append(launches, l...)
			}
			b.StartTimer()
		}
		b.ReportMetric(ms(percentile(gaps, 0.5)), "p50-step-ms")
		b.ReportMetric(ms(percentile(gaps, 0.99)), "p99-step-ms")
		b.ReportMetric(ms(total)/float64(b.N*steps), "ms/step")
		if !cfg.local {
			b.ReportMetric(ms(percentile(launches, 0.5)), "p50-launch-ms")
			b.ReportMetric(ms(percentile(launches, 0.99)), "p99-launch-ms")
		}
	})
}

// BenchmarkThroughput: 200 workflows started at once, each a chain of 10
// NoOp steps, as the engine's BenchmarkThroughput. Reports
//   - sustained-steps/s: steps run between 10% and 90% of all the steps,
//     divided by that time (a step's time is when its activity ran);
//   - steps/s: end to end, from the first start request to the last result;
//   - cpu-ms/step: CPU of this process (client and worker) plus the dev
//     server's, per step; worker-cpu-ms/step and server-cpu-ms/step apart.
func BenchmarkThroughput(b *testing.B) {
	forServer(b, func(b *testing.B, cfg config) {
		const runs, steps = 200, 10
		e := newEnv(b, cfg)
		ctx := context.Background()
		var total, busy, cpu, serverCPU time.Duration
		var sustainedSteps float64
		iter := 0
		b.ResetTimer()
		for b.Loop() {
			e.rec.reset()
			cpu0, server0 := processCPU(), pidCPU(e.serverPID)
			start := time.Now()
			wfs := make([]client.WorkflowRun, runs)
			errs := make([]error, runs)
			var wg sync.WaitGroup
			for i := range runs {
				wg.Go(func() {
					wfs[i], errs[i] = e.start(ctx, fmt.Sprintf("%s-tput-%d-%d", e.queue, iter, i), steps)
				})
			}
			wg.Wait()
			iter++
			for i, run := range wfs {
				if errs[i] != nil {
					b.Fatalf("start: %v", errs[i])
				}
				if err := run.Get(ctx, nil); err != nil {
					b.Fatalf("run %s: %v", run.GetID(), err)
				}
			}
			total += time.Since(start)
			cpu += processCPU() - cpu0
			serverCPU += pidCPU(e.serverPID) - server0
			e.rec.mu.Lock()
			ts := slices.Clone(e.rec.all)
			e.rec.mu.Unlock()
			if len(ts) != runs*steps {
				b.Fatalf("ran %d steps, want %d", len(ts), runs*steps)
			}
			slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
			lo, hi := len(ts)/10, len(ts)*9/10
			busy += ts[hi].Sub(ts[lo])
			sustainedSteps += float64(hi - lo)
		}
		n := float64(b.N * runs * steps)
		b.ReportMetric(sustainedSteps/busy.Seconds(), "sustained-steps/s")
		b.ReportMetric(n/total.Seconds(), "steps/s")
		b.ReportMetric(ms(cpu+serverCPU)/n, "cpu-ms/step")
		b.ReportMetric(ms(cpu)/n, "worker-cpu-ms/step")
		b.ReportMetric(ms(serverCPU)/n, "server-cpu-ms/step")
	})
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// processCPU is the CPU this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidCPU is the CPU process pid has used, utime+stime from /proc (0 when
// pid is 0 or gone).
func pidCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command (field 2) may hold spaces: count from its closing ')'.
	i := strings.LastIndexByte(string(st), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // CLK_TCK = 100
}
