package awsjob_test

import (
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
)

// BenchmarkInFlightAWSJobs1000: 1,000 runs whose one AWS job step waits
// for a long job (an in-memory service standing in for Athena), through
// the real engine and PostgreSQL. Once all are launched, the engine's cost
// is measured over a window while every step polls every second (MinPoll
// = MaxPoll = 1 s, the worst case, far more often than the backoff
// allows): describe calls, and the CPU of this process and of PostgreSQL,
// per poll. Reported:
//
//   - polls/step/min: describe calls per in-flight step per minute in the
//     window (60 at a 1 s poll);
//   - cpu-us/poll: engine and database CPU per poll;
//   - cpu-us/step/min@5m: the cost per in-flight step per minute at the
//     default poll of an engine with events (DefaultMaxPoll, 5 min: 0.2
//     polls a minute), and api-calls/step/min@5m likewise;
//   - cores: engine and database cores while 1,000 steps poll each second.
func BenchmarkInFlightAWSJobs1000(b *testing.B) {
	const runs = 1000
	const window = 15 * time.Second
	f := newFake()
	rt, err := awsjob.New(f, awsjob.Config{MinPoll: time.Second, MaxPoll: time.Second, Logger: logger()})
	if err != nil {
		b.Fatal(err)
	}
	env := flowtest.New(b)
	// The fake runs as the Athena type, which the step-type table knows.
	env.Engine(stepruntime.Registry{"Athena": rt}, flow.Config{Workers: 64})
	env.Push(`{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}},
	  "workflow":{"id":"longjob","steps":[{"step":{"id":"q","type":"Athena",
	  "params":{"athena":{"type":"MAP","value":{"query":{"type":"STRING","value":"SELECT 1"}}}}}}]}}`)
	for range b.N {
		insts := make([]*execution.Instance, 0, runs)
		for range runs {
			insts = append(insts, env.Start("longjob"))
		}
		deadline := time.Now().Add(3 * time.Minute)
		for f.starts.Load() < runs {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d jobs started", f.starts.Load(), runs)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second) // every step past its first poll
		polls0, cpu0, db0 := f.describe.Load(), dbtest.ProcessCPU(), dbtest.ServerCPU()
		start := time.Now()
		time.Sleep(window)
		polls, cpu, db := f.describe.Load()-polls0, dbtest.ProcessCPU()-cpu0, dbtest.ServerCPU()-db0
		elapsed := time.Since(start)
		f.releaseAll()
		for _, inst := range insts {
			if got := env.Wait(inst, 2*time.Minute); got.Status != instance.WorkflowSucceeded {
				b.Fatalf("run %d ended %s", inst.InstanceID, got.Status)
			}
		}
		if n := f.starts.Load(); n != runs {
			b.Fatalf("%d jobs started for %d steps", n, runs)
		}
		perPoll := float64((cpu + db).Microseconds()) / float64(max(polls, 1))
		b.ReportMetric(float64(polls)/runs/elapsed.Minutes(), "polls/step/min")
		b.ReportMetric(perPoll, "cpu-us/poll")
		b.ReportMetric(perPoll*awsjobPollsPerMinute(), "cpu-us/step/min@5m")
		b.ReportMetric(awsjobPollsPerMinute(), "api-calls/step/min@5m")
		b.ReportMetric((cpu+db).Seconds()/elapsed.Seconds(), "cores")
		f.starts.Store(0)
	}
}

// awsjobPollsPerMinute is the steady-state poll rate of a long job on an
// engine with events.
func awsjobPollsPerMinute() float64 { return time.Minute.Seconds() / awsjob.DefaultMaxPoll.Seconds() }
