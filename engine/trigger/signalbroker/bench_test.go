package signalbroker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// BenchmarkMatch measures what matching costs per signal with 10 and with
// 10,000 subscribed signal triggers (10 workflows of one trigger, 100
// workflows of 100 triggers; each trigger on a name of its own): batches
// of 10 signals whose names a trigger subscribes to (each starts a run of
// another workflow) and batches whose names none does.
// The cost must not grow with the triggers subscribed to other names:
// matching reads the subscriptions of the batch's names only
// (signal_subscription's primary key).
// matchSeq numbers the signals BenchmarkMatch announces, across its runs
// (-count, and the benchmark's own ramp-up): a signal announced again with
// the same name and params would be the same signal, and start nothing.
var matchSeq atomic.Int64

func BenchmarkMatch(b *testing.B) {
	for _, triggers := range []int{10, 10_000} {
		e := newEnv(b)
		workflows := min(triggers, 100)
		perWorkflow := triggers / workflows
		for w := range workflows {
			var ts []string
			for t := range perWorkflow {
				ts = append(ts, fmt.Sprintf(`{"definitions": {"s-%d-%d": {"match_params": {"n": {"value": 0, "operator": ">="}}}}}`, w, t))
			}
			e.PushAs(fmt.Sprintf(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "w%d",
				"signal_triggers": [%s], "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`, w, strings.Join(ts, ",")), "o")
		}
		if n := e.count(`SELECT count(*) FROM signal_subscription`); n != triggers {
			b.Fatalf("%d subscriptions", n)
		}
		if _, err := e.Pool.Exec(context.Background(), `ANALYZE`); err != nil {
			b.Fatal(err)
		}
		for _, subscribed := range []bool{true, false} {
			name := fmt.Sprintf("triggers=%d/subscribed=%v", triggers, subscribed)
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				var busy time.Duration
				iterations := 0
				for b.Loop() {
					reqs := make([]signal.Request, 10)
					for i := range reqs {
						n := int(matchSeq.Add(1))
						w, t := n%workflows, n/workflows%perWorkflow
						sname := fmt.Sprintf("s-%d-%d", w, t)
						if !subscribed {
							sname = fmt.Sprintf("none-%d-%d", w, t)
						}
						reqs[i] = signal.Request{Name: sname, Params: map[string]any{"n": int64(n)}}
					}
					t0 := time.Now()
					_, stats, err := e.broker.Announce(ctx, reqs)
					busy += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					if want := map[bool]int{true: 10, false: 0}[subscribed]; stats.Started != want {
						b.Fatalf("started %d, want %d", stats.Started, want)
					}
					if subscribed {
						// No engine runs them: keep admission's count of live
						// runs from growing. The deleted runs (and the lineage
						// rows deleted with them) are vacuumed now and then, as
						// autovacuum would: left as dead rows, they made the
						// lineage insert's foreign-key checks slower with each
						// -count (652 -> 1,030 µs per signal over four).
						if _, err := e.Pool.Exec(ctx, `DELETE FROM workflow_instance`); err != nil {
							b.Fatal(err)
						}
						if iterations++; iterations%20 == 0 {
							for _, table := range []string{"workflow_instance", "signal_lineage"} {
								if _, err := e.Pool.Exec(ctx, `VACUUM `+table); err != nil {
									b.Fatal(err)
								}
							}
						}
					}
				}
				b.ReportMetric(float64(busy.Microseconds())/float64(10*b.N), "µs/signal")
			})
		}
	}
}
