package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/functions/timetrigger/internal/timetriggerenv"
)

// The Lambda's cold-start wiring, invoked with a Scheduler-shaped event
// against a real database with one due trigger.
func TestLambdaFiresDueTriggers(t *testing.T) {
	ctx := context.Background()
	pool, due := dueTrigger(t)
	var emf bytes.Buffer
	s, err := timetriggerenv.Scheduler(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), &emf)
	if err != nil {
		t.Fatal(err)
	}
	ictx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := s.HandleScheduled(ictx, json.RawMessage(`{"scheduled_time":"2024-05-01T10:00:00Z","execution_id":"e","attempt":"1"}`))
	if err != nil || st.Started != 1 {
		t.Fatalf("invocation: %+v %v", st, err)
	}
	// The invocation wrote how late it started the run, as the TriggerLag
	// alarm reads it (namespace, name, the Service dimension).
	got, err := metrics.Parse(emf.Bytes())
	if err != nil || len(got) != 1 || got[0].Namespace != metrics.Namespace || got[0].Name != metrics.TriggerLag ||
		got[0].Dimensions[metrics.DimensionService] != metrics.ServiceTimeTrigger || got[0].Unit != metrics.UnitSeconds ||
		got[0].Values[0] < time.Since(due).Seconds()-60 || got[0].Values[0] > time.Since(due).Seconds() {
		t.Errorf("metrics %s: %+v (%v)", emf.String(), got, err)
	}
	var runTS int64
	if err := pool.QueryRow(ctx, `SELECT (run_params->'RUN_TS'->>'value')::bigint FROM workflow_instance WHERE workflow_id = 'wf'`).Scan(&runTS); err != nil || runTS != due.UnixMilli() {
		t.Fatalf("RUN_TS %d (%v), want %d", runTS, err, due.UnixMilli())
	}
}

func TestColdStartFailures(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, k := range []string{"DATABASE_URL", "DB_SECRET_ARN", "DB_HOST"} {
		t.Setenv(k, "")
	}
	if _, err := timetriggerenv.Scheduler(context.Background(), logger, io.Discard); err == nil {
		t.Fatal("cold start succeeded with no database configured")
	}
	t.Setenv("DATABASE_URL", dbtest.URL(t))
	if _, err := timetriggerenv.Scheduler(context.Background(), logger, io.Discard); err == nil {
		t.Fatal("cold start succeeded with no group count")
	}
	t.Setenv("MAESTRO_GROUP_COUNT", "16")
	t.Setenv("MAESTRO_TRIGGER_BATCH", "many")
	if _, err := timetriggerenv.Scheduler(context.Background(), logger, io.Discard); err == nil {
		t.Fatal("cold start succeeded with a malformed batch size")
	}
}

// dueTrigger gives the Lambda's environment a fresh database (DATABASE_URL,
// MAESTRO_GROUP_COUNT) holding workflow wf with one cron trigger, due now,
// and returns a pool on it and the fire time.
func dueTrigger(t *testing.T) (*pgxpool.Pool, time.Time) {
	t.Helper()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	t.Setenv("DATABASE_URL", dsn)
	t.Setenv("MAESTRO_GROUP_COUNT", "16")
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := workflow.DecodeJSON([]byte(`{"workflow":{"id":"wf","time_triggers":[{"cron":"*/5 * * * *"}],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := definition.NewStore(pool).Create(ctx, d, "o"); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Truncate(5 * time.Minute)
	if _, err := pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = $1, next_fire_at = $1`, due); err != nil {
		t.Fatal(err)
	}
	return pool, due
}
