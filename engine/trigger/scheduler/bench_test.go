package scheduler

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// burstWorld is n workflows with one @daily trigger each (Maestro's
// midnight-UTC peak), cloned in SQL from one pushed through the store.
func burstWorld(b *testing.B, n int) *world {
	b.Helper()
	ctx := context.Background()
	w := &world{clock: &clock{}}
	w.pool = dbtestPool(b)
	w.defs = definition.NewStore(w.pool)
	w.runs = execution.New(w.pool, w.defs, 64)
	d := `{"properties":{"owner":"o"},"workflow":{"id":"daily","time_triggers":[{"type":"PREDEFINED","expression":"@daily","timezone":"UTC"}],
		"params":{"table":{"type":"STRING","value":"sales"}},
		"steps":[{"step":{"id":"extract","type":"NoOp","transition":{"successors":{"load":"true"}}}},{"step":{"id":"load","type":"NoOp"}}]}}`
	pushDoc(b, w.defs, d)
	for _, q := range []string{
		`INSERT INTO workflow (workflow_id, active_version, latest_version, properties_version, properties, owner, created_by)
         SELECT 'daily-' || i, 1, 1, 1, properties, owner, created_by FROM workflow, generate_series(1, $1 - 1) i WHERE workflow_id = 'daily'`,
		`INSERT INTO workflow_version (workflow_id, version, definition, fingerprint, created_by)
         SELECT 'daily-' || i, 1, jsonb_set(definition, '{id}', to_jsonb('daily-' || i)), fingerprint, created_by
         FROM workflow_version, generate_series(1, $1 - 1) i WHERE workflow_id = 'daily'`,
		`INSERT INTO time_trigger (workflow_id, trigger_index, workflow_version, trigger_key, trigger_uuid, definition, timezone,
             state, next_schedule_at, next_fire_at)
         SELECT 'daily-' || i, 0, 1, trigger_key, trigger_uuid, definition, timezone, state, next_schedule_at, next_fire_at
         FROM time_trigger, generate_series(1, $1 - 1) i WHERE workflow_id = 'daily'`,
		`VACUUM ANALYZE`,
	} {
		var err error
		if q == `VACUUM ANALYZE` {
			_, err = w.pool.Exec(ctx, q)
		} else {
			_, err = w.pool.Exec(ctx, q, n)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return w
}

// benchmarkBurst: n triggers due at the same midnight; one scheduler fires
// them all. It reports the seconds until every run was created, the cost
// per trigger and the rate; each iteration is another midnight.
func benchmarkBurst(b *testing.B, n int, target time.Duration) {
	ctx := context.Background()
	w := burstWorld(b, n)
	workers, _ := strconv.Atoi(os.Getenv("MAESTRO_BENCH_TRIGGER_WORKERS"))
	s := w.scheduler(b, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Workers: workers})
	midnight := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		day := midnight.AddDate(0, 0, i)
		for _, q := range []string{`TRUNCATE workflow_instance CASCADE`, `DELETE FROM maestro_queue`} {
			if _, err := w.pool.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = $1, next_fire_at = $1`, day); err != nil {
			b.Fatal(err)
		}
		if _, err := w.pool.Exec(ctx, `VACUUM ANALYZE time_trigger`); err != nil {
			b.Fatal(err)
		}
		w.clock.Set(day.Add(time.Second))
		b.StartTimer()
		start := time.Now()
		st, err := s.FireDue(ctx)
		took := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		total += took
		var runs int
		if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance`).Scan(&runs); err != nil {
			b.Fatal(err)
		}
		if runs != n || st.Started != n {
			b.Fatalf("%d runs created (%+v), want %d", runs, st, n)
		}
		if took > target {
			b.Logf("%d triggers took %s, over the %s target", n, took.Round(time.Millisecond), target)
		}
		b.StartTimer()
	}
	iters := float64(b.N)
	b.ReportMetric(total.Seconds()/iters, "s/burst")
	b.ReportMetric(float64(total.Microseconds())/iters/float64(n), "µs/trigger")
	b.ReportMetric(float64(n)*iters/total.Seconds(), "triggers/s")
}

// BenchmarkTriggerBurst10000: 10,000 triggers due in the same minute.
// Target: every run created within 10 s.
func BenchmarkTriggerBurst10000(b *testing.B) { benchmarkBurst(b, 10_000, 10*time.Second) }

// BenchmarkTriggerBurst100000: 100,000 triggers due at once. Target: 60 s.
// It takes a minute or more, so it runs only when MAESTRO_BENCH_TRIGGERS_100K
// is set (make bench does, once).
func BenchmarkTriggerBurst100000(b *testing.B) {
	if os.Getenv("MAESTRO_BENCH_TRIGGERS_100K") == "" {
		b.Skip("set MAESTRO_BENCH_TRIGGERS_100K=1 to run (minutes)")
	}
	benchmarkBurst(b, 100_000, 60*time.Second)
}
