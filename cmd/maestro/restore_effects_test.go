package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask/ecstasktest"
)

// The restore drill with a side-effecting step: 40 runs of an EcsTask step
// whose tasks run 4 s, against one ECS (ecstasktest's fake, served to the
// engines' real SDK client) that both the lost deployment and the restored
// one use, as they share the AWS account. A base backup is taken once half
// the tasks are launched. On the copy every attempt's task is launched
// exactly once: an attempt whose launch the copy records (launch=done) is
// polled, not launched again; an intent without launch=done is looked up by
// startedBy (its idempotency key) first. Tasks the lost deployment launched
// after the backup for attempts the copy does not have are the window
// docs/operations-runbooks.md describes; the test counts them.
func TestRestoreDrillLaunchesEachRecordedTaskOnce(t *testing.T) {
	t.Parallel()
	const runs = 40
	bindir := drillBinDir(t)
	srcCluster := openCluster(t, clusterDir(t, "drill-fx-src"))
	src := createDB(t, srcCluster, "maestro")
	if out, err := migrateWith(maestroBinary(t), "DATABASE_URL="+src); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	fake := ecstasktest.New()
	fake.Define("etl", "main")
	ecsSrv := httptest.NewServer(fake.Handler())
	t.Cleanup(ecsSrv.Close)
	pushAndStart(t, src, runs, `{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"effects","steps":[
	  {"step":{"id":"job","type":"EcsTask","params":{"ecs_task":{"type":"MAP","value":{
	    "task_definition":{"type":"STRING","value":"etl"},"poll_interval":{"type":"STRING","value":"300ms"},
	    "env":{"type":"STRING_MAP","value":{"RUN_FOR":"4s"}}}}}}},
	  {"step":{"id":"after","type":"NoOp"}}]}}`)
	env := []string{"MAESTRO_AWS_ENDPOINT=" + ecsSrv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true", "MAESTRO_ECS_CLUSTER=jobs",
		"MAESTRO_ECS_SUBNETS=subnet-1", "MAESTRO_WORKERS=128"}
	live := engineProcess(t, src, "live-1", "4", env...)
	deadline := time.Now().Add(60 * time.Second)
	for len(fake.AllLaunches()) < runs/2 {
		if time.Now().After(deadline) {
			t.Fatalf("before the backup: %d tasks launched", len(fake.AllLaunches()))
		}
		time.Sleep(20 * time.Millisecond)
	}

	backup := clusterDir(t, "drill-fx-restored")
	if code, out, _ := drill(t, bindir, "basebackup", srcCluster.URL("postgres"), backup); code != 0 {
		t.Fatalf("base backup: %d\n%s", code, out)
	}
	_ = live.Process.Signal(syscall.SIGKILL)
	_ = live.Wait()
	launchedByLost := len(fake.AllLaunches())

	asPostgres(t, nil, backup)
	target := openCluster(t, backup).URL("maestro")
	code, out, report := drill(t, bindir, "report", target)
	if code != 0 || !strings.Contains(out, "event_positions forward") {
		t.Fatalf("report: %d\n%s", code, out)
	}
	t.Logf("restored copy:\n%s", out)
	pool := openPool(t, target)
	ctx := context.Background()
	var recorded int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM step_instance WHERE step_id = 'job'
		AND runtime_state->'data'->>'launch' IS NOT NULL`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded == 0 || report["runs_in_flight"] == 0 {
		t.Fatalf("no launch recorded in the copy (%d), or no run in flight: %v", recorded, report)
	}

	engineProcess(t, target, "restored-1", "4", env...)
	waitAllEnded(t, pool, "effects", runs, 120*time.Second)
	rows, err := pool.Query(ctx, `SELECT uuid::text, status, attempt_id FROM step_instance WHERE workflow_id = 'effects' AND step_id = 'job'`)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		UUID, Status string
		Attempt      int64
	}
	atts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		t.Fatal(err)
	}
	launches := fake.AllLaunches()
	inCopy := map[string]bool{}
	for _, a := range atts {
		inCopy[a.UUID] = true
		if launches[a.UUID] != 1 || a.Status != "SUCCEEDED" || a.Attempt != 1 {
			t.Errorf("attempt %s: %s (attempt %d), its task launched %d times, want once", a.UUID, a.Status, a.Attempt, launches[a.UUID])
		}
	}
	if len(atts) != runs {
		t.Errorf("%d EcsTask attempts in the copy, want %d", len(atts), runs)
	}
	window := 0
	for key := range launches {
		if !inCopy[key] {
			window++
		}
	}
	t.Logf("%d attempts had a recorded launch at the restore point; %d tasks launched in all (%d by the lost deployment); "+
		"%d launched by the lost deployment after the backup for attempts the copy lacks (the window)",
		recorded, len(launches), launchedByLost, window)
}

// waitAllEnded waits until n runs of workflowID have ended, and fails on
// any that did not succeed.
func waitAllEnded(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, workflowID string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var done, ok int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status IN ('SUCCEEDED','FAILED','STOPPED','TIMED_OUT')),
			count(*) FILTER (WHERE status = 'SUCCEEDED') FROM workflow_instance WHERE workflow_id = $1`, workflowID).Scan(&done, &ok); err != nil {
			t.Fatal(err)
		}
		if done == n {
			if ok != n {
				t.Fatalf("%d of %d runs of %s succeeded", ok, n, workflowID)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs of %s ended within %s", done, n, workflowID, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
