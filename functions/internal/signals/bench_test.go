package signals_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkIngest measures what one signals Lambda instance ingests: one
// Handle per batch of 10 distinct messages (SQS's batch size here), each
// stored, checked for waiting steps and subscribed triggers, in one
// transaction. Target: at least 2,000 signals/s (docs/performance.md).
// Shapes: Maestro signal JSON, S3 event notifications; "matched" has a
// subscribed trigger start a run per signal.
func BenchmarkIngest(b *testing.B) {
	for _, shape := range []string{"json", "s3", "json-matched"} {
		b.Run(shape, func(b *testing.B) {
			e := newEnv(b)
			// Triggers on other names, as in a deployment with workflows.
			for i := range 20 {
				e.Push(fmt.Sprintf(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "w%d",
					"signal_triggers": [{"definitions": {"other-%d": {}}}], "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`, i, i))
			}
			name := "bench"
			if shape == "json-matched" {
				name = "matched"
				e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "m",
					"signal_triggers": [{"definitions": {"matched": {}}}], "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
			}
			ctx := context.Background()
			n := 0
			next := func() string {
				n++
				if shape == "s3" {
					return s3Event(fmt.Sprintf("sales/bench/part-%09d.parquet", n), fmt.Sprintf("%018X", n))
				}
				return fmt.Sprintf(`{"name":%q,"params":{"i":%d,"dt":"2026-05-01"},"payload":{"rows":1000}}`, name, n)
			}
			var busy time.Duration
			b.ResetTimer()
			for b.Loop() {
				bodies := make([]string, 10)
				for i := range bodies {
					bodies[i] = next()
				}
				t0 := time.Now()
				res, err := e.h.Handle(ctx, batch(bodies...))
				if err != nil || len(res.BatchItemFailures) > 0 {
					b.Fatalf("%v %v", err, res.BatchItemFailures)
				}
				busy += time.Since(t0)
				if shape == "json-matched" {
					// No engine runs them: the started runs are removed, so
					// that admission does not count an ever-growing backlog.
					if _, err := e.Pool.Exec(ctx, `DELETE FROM workflow_instance WHERE workflow_id = 'm'`); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(10*b.N)/busy.Seconds(), "signals/s")
		})
	}
}
