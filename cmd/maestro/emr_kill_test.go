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
	"github.com/maestro-aws/maestro/engine/stepruntime/emr"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr/emrtest"
)

// Kill -9 the engine while EMR steps run and while AddJobFlowSteps answers
// are on their way back, then start it again: each attempt's EMR step is
// added once (the ones whose id the kill lost are found by name with
// ListSteps), and every run ends SUCCEEDED. EMR is emrtest's cluster over
// EMR's JSON protocol (the emulator's EMR completes steps as they are
// added).
func TestKilledEngineAddsEachEmrStepOnce(t *testing.T) {
	t.Parallel()
	const runs = 40
	dsn := dbtest.URL(t)
	ctx := context.Background()

	fake := emrtest.New()
	fake.AddAnswerDelay = 700 * time.Millisecond
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)

	f := pushAndStart(t, dsn, runs, `{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"emrfx","steps":[
	  {"step":{"id":"spark","type":"Emr","params":{"emr":{"type":"MAP","value":{
	    "poll_interval":{"type":"STRING","value":"300ms"},
	    "step":{"type":"MAP","value":{"name":{"type":"STRING","value":"agg"},
	      "args":{"type":"STRING_ARRAY","value":["spark-submit","agg.py","--run-for=3s"]}}}}}}}}]}}`)

	env := []string{"MAESTRO_AWS_ENDPOINT=" + srv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true", "MAESTRO_EMR_CLUSTER_ID=j-1FAKE", "MAESTRO_WORKERS=256"}
	p1 := engineProcess(t, dsn, "ex-1", "4", env...)
	deadline := time.Now().Add(60 * time.Second)
	for len(fake.Added()) < runs*2/3 {
		if time.Now().After(deadline) {
			t.Fatalf("before the kill: %d EMR steps added", len(fake.Added()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	t.Logf("killed with %d EMR steps added", len(fake.Added()))
	engineProcess(t, dsn, "ex-2", "4", env...)
	f.checkAllSucceeded(t, 120*time.Second)

	rows, err := f.pool.Query(ctx, `SELECT uuid::text, status FROM step_instance WHERE workflow_id = 'emrfx' AND step_id = 'spark'`)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct{ UUID, Status string }
	atts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		t.Fatal(err)
	}
	added := fake.Added()
	for _, a := range atts {
		if n := added[emr.StepName("agg", "spark", a.UUID)]; n != 1 || a.Status != string(instance.StepSucceeded) {
			t.Errorf("attempt %s: %s, %d EMR steps added", a.UUID, a.Status, n)
		}
	}
	if len(atts) != runs || len(added) != runs || fake.Calls("AddJobFlowSteps") != runs {
		t.Errorf("%d attempts, %d step names, %d AddJobFlowSteps calls for %d runs", len(atts), len(added), fake.Calls("AddJobFlowSteps"), runs)
	}
	if fake.LostAnswers() == 0 {
		t.Errorf("no AddJobFlowSteps answer was in flight at the kill: the lookup by name went untested")
	}
	t.Logf("%d EMR steps were added whose id the kill lost; the restarted engine found each by its name", fake.LostAnswers())
}
