package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/trigger/scheduler"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// clockSpeed runs the dev process's trigger clock 20 times as fast: a
// one-minute cron fires every 3 s.
const clockSpeed = 20

// devProcess runs `maestro dev` against dsn with a fast trigger clock
// anchored at anchor (the same for every process of the test, so time
// carries on across a restart), and every batch transaction held open for
// a moment so that a kill lands inside one. pauses receives a value each
// time a batch is paused, open.
func devProcess(t *testing.T, dsn string, anchor time.Time) (cmd *exec.Cmd, pauses <-chan struct{}) {
	t.Helper()
	cmd = exec.Command(maestroBinary(t), "dev", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "MAESTRO_GROUP_COUNT=4", "MAESTRO_LEASE=2s",
		scheduler.EnvTestClock+"="+strconv.FormatInt(anchor.UnixMilli(), 10)+","+strconv.Itoa(clockSpeed),
		scheduler.EnvTick+"=200ms", scheduler.EnvBatch+"=25", scheduler.EnvTestPause+"=300ms",
		// An hour of the fast clock is three minutes: however slow the
		// restart, no fire time is older than the catch-up window.
		scheduler.EnvCatchUp+"=1h")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ch := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, sc.Text())
			}
			if strings.Contains(sc.Text(), "test pause inside a batch") {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	return cmd, ch
}

// A kill -9 of `maestro dev` in the middle of a trigger batch, then a
// restart: every one-minute trigger has started exactly one run per fire
// time, with no fire time lost or doubled across the kill.
func TestKilledDevProcessLosesNoFireTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defs := definition.NewStore(pool)
	const workflows = 100
	anchor := time.Now()
	for i := range workflows {
		tz := []string{"UTC", "America/New_York", "Asia/Kolkata", "Europe/Berlin"}[i%4]
		d, err := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":"PARALLEL"},"workflow":{"id":"tick%03d",
			"time_triggers":[{"cron":"* * * * *","timezone":%q}],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, i, tz)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := defs.Create(ctx, d, "o"); err != nil {
			t.Fatal(err)
		}
	}
	first := map[string]time.Time{}
	frows, err := pool.Query(ctx, `SELECT workflow_id, next_fire_at FROM time_trigger`)
	if err != nil {
		t.Fatal(err)
	}
	for frows.Next() {
		var id string
		var at time.Time
		if err := frows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		first[id] = at
	}
	frows.Close()
	fired := func() (runs, minutes int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT run_params->'RUN_TS'->>'value') FROM workflow_instance`).Scan(&runs, &minutes); err != nil {
			t.Fatal(err)
		}
		return runs, minutes
	}
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	p1, pauses := devProcess(t, dsn, anchor)
	waitFor("two fire times", 90*time.Second, func() bool { _, m := fired(); return m >= 2 })
	// Kill inside a batch: its runs are inserted and its triggers advanced,
	// not committed (the dev process's connection is idle in transaction).
	for attempt := 0; ; attempt++ {
		select {
		case <-pauses:
		case <-time.After(60 * time.Second):
			t.Fatal("no batch paused")
		}
		var open int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'maestro-dev' AND state = 'idle in transaction'`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open > 0 {
			break
		}
		if attempt == 20 {
			t.Fatal("never caught a batch transaction open")
		}
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	runsAtKill, minutesAtKill := fired()
	t.Logf("killed after %d runs over %d fire times", runsAtKill, minutesAtKill)

	p2, _ := devProcess(t, dsn, anchor)
	waitFor("three more fire times", 120*time.Second, func() bool { _, m := fired(); return m >= minutesAtKill+3 })
	// The restarted engine takes the killed one's groups over and runs the
	// triggered runs with the trigger's params.
	waitFor("a run of tick001 to succeed", 120*time.Second, func() bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'tick001' AND status = 'SUCCEEDED'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	if err := p2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.Wait(); err != nil {
		t.Errorf("dev did not stop cleanly on SIGTERM: %v", err)
	}

	// Every trigger fired every minute from the first fire time to its
	// last one, once.
	rows, err := pool.Query(ctx, `SELECT workflow_id, count(*), count(DISTINCT run_params->'RUN_TS'->>'value'),
            min((run_params->'RUN_TS'->>'value')::bigint), max((run_params->'RUN_TS'->>'value')::bigint)
        FROM workflow_instance GROUP BY workflow_id ORDER BY workflow_id`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var id string
		var n, distinct int
		var lo, hi int64
		if err := rows.Scan(&id, &n, &distinct, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		seen++
		span := int((hi-lo)/60000) + 1
		if n != distinct || n != span || lo != first[id].UnixMilli() {
			t.Errorf("%s: %d runs, %d distinct fire times, %d minutes from %s to %s (first fire time %s)", id, n, distinct, span,
				time.UnixMilli(lo).UTC(), time.UnixMilli(hi).UTC(), first[id].UTC())
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != workflows {
		t.Errorf("%d of %d workflows fired", seen, workflows)
	}
	var runTS, fireTime, zone, initiatorZone string
	if err := pool.QueryRow(ctx, `SELECT params->'RUN_TS'->>'value', initiator->>'trigger_time',
            params->'WORKFLOW_CRON_TIMEZONE'->>'value', initiator->>'timezone' FROM workflow_instance
        WHERE workflow_id = 'tick001' AND status = 'SUCCEEDED' ORDER BY instance_id LIMIT 1`).Scan(&runTS, &fireTime, &zone, &initiatorZone); err != nil {
		t.Fatalf("no succeeded run of tick001: %v", err)
	}
	if zone != "America/New_York" || initiatorZone != zone || runTS != fireTime {
		t.Errorf("WORKFLOW_CRON_TIMEZONE %q, initiator zone %q, RUN_TS %s, fire time %s", zone, initiatorZone, runTS, fireTime)
	}
}
