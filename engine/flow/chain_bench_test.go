package flow_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// The chain benchmarks of issue 28: one run at a time, what a chained step
// costs against the floor of a durable commit measured in the same run,
// and how many commits it takes (flowtest.Env.ChainFigures reports
// ms/step, floor-commit-ms, commit-ratio and commits/step).

// BenchmarkChainCommits: a 100-step NoOp chain (target: commit-ratio
// <= 1.5).
func BenchmarkChainCommits(b *testing.B) {
	const steps = 100
	e := newEnv(b)
	e.engine(flow.Config{})
	e.push(chainJSON("chain", steps))
	e.ChainFigures(b, "chain", steps)
}

// BenchmarkHttpChain: a chain of 20 Http steps against a server that
// answers at once (target: <= 2 commits per step). Each step waits for two
// writes before its request (STARTING, then RUNNING with the recorded
// intent) and, since the write-behind of terminal states, for none after.
func BenchmarkHttpChain(b *testing.B) {
	const steps = 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	b.Cleanup(srv.Close)
	e := newEnv(b)
	rts := stepruntime.Builtins()
	rts[httpstep.Type] = httpstep.New(httpstep.Config{})
	e.engine(flow.Config{Runtimes: rts})
	var def strings.Builder
	def.WriteString(`{"workflow":{"id":"hchain","steps":[`)
	for i := range steps {
		if i > 0 {
			def.WriteString(",")
		}
		next := ""
		if i < steps-1 {
			next = fmt.Sprintf(`,"transition":{"successors":{"h%d":"true"}}`, i+1)
		}
		fmt.Fprintf(&def, `{"step":{"id":"h%d","type":"Http"%s,
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s/%d"}}}}}}`, i, next, srv.URL, i)
	}
	def.WriteString("]}}")
	e.push(def.String())
	e.ChainFigures(b, "hchain", steps)
}

// BenchmarkStartDurable: start request accepted -> the run's first step
// (a NoOp) durable, by the clock of the Observer's call, which comes once
// the write has committed (BenchmarkWorkflowStartOverhead reads the time
// of the transition instead, which a write behind makes earlier than its
// commit). Target (issue 28, 1 ms each way to PostgreSQL): p50 <= 8 ms.
func BenchmarkStartDurable(b *testing.B) {
	e := newEnv(b)
	var mu sync.Mutex
	durable := map[int64]time.Time{}
	e.engine(flow.Config{Observer: func(ref run.Ref, step string, _ int64, st instance.StepStatus, _ time.Time) {
		if st == instance.StepSucceeded {
			mu.Lock()
			durable[ref.InstanceID] = time.Now()
			mu.Unlock()
		}
	}})
	e.push(chainJSON("one", 1))
	e.wait(e.start("one", nil), time.Minute) // warms the pool up, untimed
	var gaps []time.Duration
	b.ResetTimer()
	for b.Loop() {
		inst := e.start("one", nil)
		accepted := time.Now()
		e.wait(inst, time.Minute)
		mu.Lock()
		if at, ok := durable[inst.InstanceID]; ok {
			gaps = append(gaps, at.Sub(accepted))
		}
		mu.Unlock()
	}
	b.ReportMetric(ms(percentile(gaps, 0.5)), "p50-start-durable-ms")
	b.ReportMetric(ms(percentile(gaps, 0.99)), "p99-start-durable-ms")
}
