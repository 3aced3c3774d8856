package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// BenchmarkFourEngines64Groups (issue 18): four `maestro engine` processes
// on one database with 64 flow groups hold 16 groups each, and together
// carry at least the NoOp steps per second one engine carries alone with
// the same 64 groups, measured one after the other in the same run, each
// on a fresh database. Heavy (two databases, five processes): it runs only
// with MAESTRO_BENCH_MULTI=1 (make bench sets it).
func BenchmarkFourEngines64Groups(b *testing.B) {
	if os.Getenv("MAESTRO_BENCH_MULTI") == "" {
		b.Skip("set MAESTRO_BENCH_MULTI=1 to run (five engine processes)")
	}
	for b.Loop() {
		one := multiEngineThroughput(b, 1)
		four := multiEngineThroughput(b, 4)
		b.ReportMetric(one.stepsPerSecond, "1-engine-steps/s")
		b.ReportMetric(four.stepsPerSecond, "4-engine-steps/s")
		b.ReportMetric(four.stepsPerSecond/one.stepsPerSecond, "4-vs-1")
		b.ReportMetric(one.machineCPUms, "1-engine-machine-cpu-ms/step")
		b.ReportMetric(four.machineCPUms, "4-engine-machine-cpu-ms/step")
		b.ReportMetric(one.engineCPUms, "1-engine-process-cpu-ms/step")
		b.ReportMetric(four.engineCPUms, "4-engine-process-cpu-ms/step")
		if four.stepsPerSecond < one.stepsPerSecond {
			// Not a failure of the code by itself: on one small machine the
			// engines share its cores with each other and with PostgreSQL
			// (docs/scaling.md).
			b.Logf("four engines carry %.0f steps/s, fewer than one alone (%.0f) on this machine",
				four.stepsPerSecond, one.stepsPerSecond)
		}
	}
}

// multiEngineFigures is what one multiEngineThroughput measured.
type multiEngineFigures struct {
	stepsPerSecond float64 // sustained: the middle 80 % of the step ends
	machineCPUms   float64 // CPU the whole machine spent per step (engines, PostgreSQL, the poller)
	engineCPUms    float64 // of which the engine processes
}

// multiEngineThroughput starts engines processes on a fresh database with
// 64 groups and waits until they share the groups evenly. It then pauses
// them (SIGSTOP, well inside their lease), starts 1,000 twenty-step NoOp
// chains, resumes them, and measures how fast they work off that backlog.
//
// The engines are paused while the runs are started because otherwise the
// bench measures its own start calls: four engines kept up with 1,000
// concurrent start requests, finishing every step by the time the last
// request returned, so the figure was the rate at which this process could
// insert starts while competing for the two cores, not what the engines
// can carry.
func multiEngineThroughput(b *testing.B, engines int) multiEngineFigures {
	const groups, runs, steps = 64, 1000, 20
	dsn := dbtest.URL(b)
	pool := openPool(b, dsn)
	want := map[string]int{}
	var procs []*exec.Cmd
	for i := range engines {
		node := fmt.Sprintf("bench-%d", i)
		want[node] = groups / engines
		procs = append(procs, engineProcess(b, dsn, node, "0", fmt.Sprintf("MAESTRO_GROUP_COUNT=%d", groups), "MAESTRO_LEASE=60s"))
	}
	waitOwnedWithin(b, pool, want, time.Minute)

	def := chainDefinition("multi", `{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}}`, steps,
		func(int) string { return `"type":"NoOp"` })
	defs := definition.NewStore(pool)
	pushDefinitions(b, defs, def)
	svc := execution.New(pool, defs, groups)
	ctx := context.Background()
	held := groupHolders(b, pool)
	signalAll(b, procs, syscall.SIGSTOP)
	paused := time.Now()
	var wg sync.WaitGroup
	for range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := svc.Start(ctx, execution.StartRequest{WorkflowID: "multi", Version: "latest"}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	if time.Since(paused) > 30*time.Second {
		b.Fatalf("starting %d runs took %s, too close to the engines' 60 s lease", runs, time.Since(paused))
	}
	busy0, engines0 := machineBusy(b), processesCPU(b, procs)
	signalAll(b, procs, syscall.SIGCONT)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM step_instance WHERE status = 'SUCCEEDED'`).Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done == runs*steps {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d steps done", done, runs*steps)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after := groupHolders(b, pool); after != held {
		// A group changed hands: the pause cost some engine its lease, and
		// the figure would include a takeover.
		b.Fatalf("groups changed hands while measuring:\nbefore %s\nafter  %s", held, after)
	}
	var f multiEngineFigures
	f.machineCPUms = (machineBusy(b) - busy0).Seconds() * 1000 / (runs * steps)
	f.engineCPUms = (processesCPU(b, procs) - engines0).Seconds() * 1000 / (runs * steps)
	rows, err := pool.Query(ctx, `SELECT end_time FROM step_instance WHERE status = 'SUCCEEDED'`)
	if err != nil {
		b.Fatal(err)
	}
	var ends []time.Time
	for rows.Next() {
		var t time.Time
		if err := rows.Scan(&t); err != nil {
			b.Fatal(err)
		}
		ends = append(ends, t)
	}
	rows.Close()
	slices.SortFunc(ends, func(x, y time.Time) int { return x.Compare(y) })
	lo, hi := len(ends)/10, len(ends)*9/10
	f.stepsPerSecond = float64(hi-lo) / ends[hi].Sub(ends[lo]).Seconds()
	return f
}

// groupHolders lists every flow group with its owner and generation.
func groupHolders(b *testing.B, pool *pgxpool.Pool) string {
	var out string
	err := pool.QueryRow(context.Background(),
		`SELECT string_agg(group_id || ':' || coalesce(owner, '-') || '@' || generation, ' ' ORDER BY group_id) FROM flow_group`).Scan(&out)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// signalAll sends sig to every process.
func signalAll(b *testing.B, procs []*exec.Cmd, sig syscall.Signal) {
	for _, p := range procs {
		if err := p.Process.Signal(sig); err != nil {
			b.Fatal(err)
		}
	}
}

// processesCPU is the CPU time (user + system) the processes have spent
// so far.
func processesCPU(b *testing.B, procs []*exec.Cmd) time.Duration {
	var total time.Duration
	for _, p := range procs {
		d, err := dbtest.PIDCPU(p.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	return total
}

// machineBusy is the CPU time the whole machine has spent busy since boot.
func machineBusy(b *testing.B) time.Duration {
	d, err := dbtest.MachineBusy()
	if err != nil {
		b.Skip("no /proc/stat")
	}
	return d
}
