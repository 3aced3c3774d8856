package queue_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// TestMessageCarriesTheEnqueuersTrace: Enqueue and EnqueueBatch store the
// traceparent of the enqueuing span in the row, and the worker handles the
// message in a span of that trace; a message enqueued without a span gets a
// trace of its own.
func TestMessageCarriesTheEnqueuersTrace(t *testing.T) {
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())))
	pool := dbtest.Pool(t)
	const (
		single = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
		batch  = "00-6759e988bd862e3fe1be46a994272794-63995c3f42cd8ad9-01"
	)
	var mu sync.Mutex
	seen := map[int]trace.SpanContext{}
	worker(t, pool, "n", []int32{1}, map[queue.ID]queue.Handler{
		queue.StepUpdate: func(ctx context.Context, m queue.Message) error {
			var p struct{ N int }
			_ = json.Unmarshal(m.Payload, &p)
			mu.Lock()
			seen[p.N] = trace.SpanContextFromContext(ctx)
			mu.Unlock()
			return nil
		},
	})
	time.Sleep(200 * time.Millisecond)
	var stored []string
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := queue.Enqueue(tracing.WithTraceparent(context.Background(), single), tx, queue.StepUpdate, 1, map[string]int{"N": 1}); err != nil {
			return err
		}
		if _, err := queue.Enqueue(context.Background(), tx, queue.StepUpdate, 1, map[string]int{"N": 2}); err != nil {
			return err
		}
		if err := queue.EnqueueBatch(tracing.WithTraceparent(context.Background(), batch), tx, queue.StepUpdate,
			[]int32{1, 1}, []map[string]int{{"N": 3}, {"N": 4}}); err != nil {
			return err
		}
		// Read the rows before the commit: once it commits, the worker may
		// handle and delete them before a read after it.
		return tx.QueryRow(context.Background(),
			`SELECT array_agg(COALESCE(trace_context, '') ORDER BY message_id) FROM maestro_queue`).Scan(&stored)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{single, "", batch, batch}; len(stored) != 4 || stored[0] != want[0] || stored[1] != "" || stored[2] != batch || stored[3] != batch {
		t.Fatalf("stored trace contexts %q, want %q", stored, want)
	}
	waitEmpty(t, pool)
	mu.Lock()
	defer mu.Unlock()
	wantTrace := map[int]string{1: "5759e988bd862e3fe1be46a994272793", 3: "6759e988bd862e3fe1be46a994272794", 4: "6759e988bd862e3fe1be46a994272794"}
	for n, id := range wantTrace {
		if got := seen[n].TraceID().String(); got != id {
			t.Errorf("message %d handled in trace %s, want %s", n, got, id)
		}
	}
	if sc := seen[2]; !sc.IsValid() || sc.TraceID() == seen[1].TraceID() || sc.TraceID() == seen[3].TraceID() {
		t.Errorf("untraced message handled in %v", sc)
	}
}
