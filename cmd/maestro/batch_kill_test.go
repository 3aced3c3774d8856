package main

import (
	"context"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
)

// Kill -9 the engine while Batch jobs run and while SubmitJob answers are
// on their way back, then start it again. Each attempt's job is submitted
// once: the restarted engine finds the running jobs by their ids, and the
// jobs whose id the kill lost by their name (ListJobs); every run ends
// SUCCEEDED once its job succeeds.
//
// Batch is batchtest's fake served over Batch's REST-JSON protocol to the
// engine process's real SDK client (MAESTRO_AWS_ENDPOINT): the emulator's
// Batch jobs succeed the moment they are submitted, so no job could be
// running at the kill (localstack/batch_test.go covers the emulator).
func TestKilledEngineSubmitsEachBatchJobOnce(t *testing.T) {
	t.Parallel()
	const runs = 60
	dsn := dbtest.URL(t)
	ctx := context.Background()

	fake := batchtest.New()
	fake.SubmitAnswerDelay = 700 * time.Millisecond
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)

	f := pushAndStart(t, dsn, runs, `{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"batchfx","steps":[
	  {"step":{"id":"job","type":"Batch","params":{"batch":{"type":"MAP","value":{
	    "job_definition":{"type":"STRING","value":"etl:1"},"poll_interval":{"type":"STRING","value":"300ms"},
	    "container_overrides":{"type":"MAP","value":{"environment":{"type":"STRING_MAP","value":{"RUN_FOR":"3s"}}}}}}}}}]}}`)

	env := []string{"MAESTRO_AWS_ENDPOINT=" + srv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true", "MAESTRO_BATCH_JOB_QUEUE=etl-queue", "MAESTRO_WORKERS=256"}
	p1 := engineProcess(t, dsn, "bx-1", "4", env...)
	deadline := time.Now().Add(60 * time.Second)
	for len(fake.AllSubmits()) < runs*2/3 {
		if time.Now().After(deadline) {
			t.Fatalf("before the kill: %d jobs submitted", len(fake.AllSubmits()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	killedAt := len(fake.AllSubmits())
	t.Logf("killed with %d jobs submitted", killedAt)
	engineProcess(t, dsn, "bx-2", "4", env...)
	f.checkAllSucceeded(t, 120*time.Second)

	rows, err := f.pool.Query(ctx, `SELECT uuid::text, status FROM step_instance WHERE workflow_id = 'batchfx' AND step_id = 'job'`)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct{ UUID, Status string }
	atts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		t.Fatal(err)
	}
	submits := fake.AllSubmits()
	for _, a := range atts {
		name := batch.JobName("", "job", a.UUID)
		if submits[name] != 1 || a.Status != string(instance.StepSucceeded) {
			t.Errorf("attempt %s: %s, %d jobs submitted", a.UUID, a.Status, submits[name])
		}
	}
	if len(atts) != runs || len(submits) != runs || fake.Calls("SubmitJob") != runs {
		t.Errorf("%d attempts, %d job names, %d SubmitJob calls for %d runs", len(atts), len(submits), fake.Calls("SubmitJob"), runs)
	}
	if fake.LostAnswers() == 0 {
		t.Errorf("no SubmitJob answer was in flight at the kill: the lookup by name went untested")
	}
	t.Logf("%d jobs were submitted whose id the kill lost; the restarted engine found each by its name", fake.LostAnswers())
}
