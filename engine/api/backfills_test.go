package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	backfilldriver "github.com/maestro-aws/maestro/engine/trigger/backfill"
)

const backfillWorkflow = `{"properties":{"owner":"alice","run_strategy":{"rule":"PARALLEL","workflow_concurrency":10}},
	"workflow":{"id":"daily","steps":[
	{"step":{"id":"s","type":"NoOp"}}]}}`

// TestBackfillOverREST creates, reads, lists and acts on a backfill, and
// checks its errors and who may act on it.
func TestBackfillOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", backfillWorkflow).expect(t, http.StatusOK)
	body := `{"param":"TARGET_RUN_DATE","from":20240101,"to":"20240110","interval":"1d","concurrency":2,"request_id":"bf-1"}`
	c := e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "alice", body).expect(t, http.StatusOK)
	id, _ := c.body["backfill_id"].(string)
	if id == "" || c.body["workflow_id"] != "daily" || c.body["partitions"] != float64(10) || c.body["status"] != "RUNNING" {
		t.Fatalf("created %s", c.raw)
	}
	again := e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "alice", body).expect(t, http.StatusOK)
	if again.body["backfill_id"] != id || again.body["duplicated"] != true {
		t.Fatalf("repeated request id: %s", again.raw)
	}
	g := e.send(http.MethodGet, "/api/v3/backfills/"+id, "", "").expect(t, http.StatusOK)
	parts := g.body["partitions"].([]any)
	first := parts[0].(map[string]any)
	if len(parts) != 10 || first["value"] != "20240101" || first["status"] != "PENDING" || first["workflow_instance_id"] != nil ||
		g.body["counts"].(map[string]any)["PENDING"] != float64(10) || g.body["status"] != "RUNNING" ||
		g.body["param_type"] != "STRING" || g.body["format"] != "YYYYMMDD" || g.body["create_time"].(float64) < 1e12 {
		t.Fatalf("read %s", g.raw)
	}
	if _, ok := g.body["downstream"].(map[string]any); !ok {
		t.Fatalf("downstream missing: %s", g.raw)
	}
	l := e.send(http.MethodGet, "/api/v3/workflows/daily/backfills", "", "").expect(t, http.StatusOK)
	if bs := l.body["backfills"].([]any); len(bs) != 1 || bs[0].(map[string]any)["backfill_id"] != id {
		t.Fatalf("list %s", l.raw)
	}

	// Bad requests, unknown things, illegal transitions, strangers.
	for _, bad := range []string{
		`{"param":"TARGET_RUN_DATE","from":"20240110","to":"20240101"}`,
		`{"param":"TARGET_RUN_DATE","from":"20240101","to":"2024-01-05"}`,
		`{"param":"TARGET_RUN_DATE","from":"20240101","to":"20240105","interval":"1w"}`,
		`{"param":"TARGET_RUN_DATE","from":"20240101","to":"20240105","concurrency":0,"order":"sideways"}`,
		`{"param":"TARGET_RUN_DATE","values":[true]}`,
		`{"param":"TARGET_RUN_DATE","from":"20240101","to":"20240105","surprise":1}`,
		`{"from":"20240101","to":"20240105"}`,
		``,
	} {
		r := e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "alice", bad).expect(t, http.StatusBadRequest)
		if r.body["status"] != "BAD_REQUEST" || r.body["retryable"] != false {
			t.Fatalf("%s: %s", bad, r.raw)
		}
	}
	e.send(http.MethodPost, "/api/v3/workflows/nope/backfills", "alice", `{"param":"P","from":"1","to":"2"}`).expect(t, http.StatusNotFound)
	e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "bob", `{"param":"TARGET_RUN_DATE","from":"1","to":"2"}`).
		expect(t, http.StatusForbidden)
	e.send(http.MethodGet, "/api/v3/backfills/nope", "", "").expect(t, http.StatusNotFound)
	e.send(http.MethodPost, "/api/v3/backfills/nope/actions/pause", "alice", "").expect(t, http.StatusNotFound)
	e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/explode", "alice", "").expect(t, http.StatusNotFound)
	e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/pause", "bob", "").expect(t, http.StatusForbidden)
	p := e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/pause", "alice", "").expect(t, http.StatusOK)
	if p.body["status"] != "PAUSED" {
		t.Fatalf("paused %s", p.raw)
	}
	conflict := e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/pause", "alice", "").expect(t, http.StatusConflict)
	if conflict.body["status"] != "CONFLICT" {
		t.Fatalf("second pause %s", conflict.raw)
	}
	e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/resume", "alice", "").expect(t, http.StatusOK)
	x := e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/cancel", "alice", "").expect(t, http.StatusOK)
	if x.body["status"] != "CANCELLED" || x.body["end_time"] == nil {
		t.Fatalf("cancelled %s", x.raw)
	}
	e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/resume", "alice", "").expect(t, http.StatusConflict)
}

// TestBackfillRunsToTheEndOnTheEngine drives a backfill with the real
// engine and driver: every partition SUCCEEDED, each run a BACKFILL run
// with its value.
func TestBackfillRunsToTheEndOnTheEngine(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	defs := definition.NewStore(e.pool)
	d := &backfilldriver.Driver{Store: backfill.NewStore(e.pool, defs, execution.New(e.pool, defs, 0)),
		Logger: discardLogger(), Interval: 50 * time.Millisecond}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", backfillWorkflow).expect(t, http.StatusOK)
	c := e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "alice",
		`{"param":"TARGET_RUN_DATE","from":"20240105","to":"20240101","order":"newest","concurrency":3}`).expect(t, http.StatusBadRequest)
	_ = c
	c = e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "alice",
		`{"param":"TARGET_RUN_DATE","from":"20240101","to":"20240105","order":"newest","concurrency":3}`).expect(t, http.StatusOK)
	id := c.body["backfill_id"].(string)
	deadline := time.Now().Add(60 * time.Second)
	var g response
	for {
		g = e.send(http.MethodGet, "/api/v3/backfills/"+id, "", "").expect(t, http.StatusOK)
		if g.body["status"] != "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backfill still running: %s", g.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g.body["status"] != "SUCCEEDED" || g.body["counts"].(map[string]any)["SUCCEEDED"] != float64(5) {
		t.Fatalf("ended %s", g.raw)
	}
	first := g.body["partitions"].([]any)[0].(map[string]any)
	iid := int64(first["workflow_instance_id"].(float64))
	run := e.send(http.MethodGet, "/api/v3/workflows/daily/instances/"+strconv.FormatInt(iid, 10), "", "").expect(t, http.StatusOK)
	init := run.body["initiator"].(map[string]any)
	params := run.body["params"].(map[string]any)["TARGET_RUN_DATE"].(map[string]any)
	if first["value"] != "20240105" || init["type"] != "BACKFILL" || init["backfill_id"] != id || params["value"] != "20240105" {
		t.Fatalf("newest partition %v ran as %s", first, run.raw)
	}
	// Every run and step event of the backfill's runs carries its id.
	var with, without int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE payload->>'b' = $1),
            count(*) FILTER (WHERE payload->>'b' IS NULL) FROM maestro_event WHERE workflow_id = 'daily' AND kind IN (1, 2)`,
		id).Scan(&with, &without); err != nil {
		t.Fatal(err)
	}
	if with < 10 || without != 0 {
		t.Fatalf("%d run and step events carry the backfill id, %d do not", with, without)
	}
}

// TestBackfillEventsOnTheFeed: a backfill's status changes are served by
// the events endpoint like the others.
func TestBackfillEventsOnTheFeed(t *testing.T) {
	t.Parallel()
	e := eventsEnv(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", backfillWorkflow).expect(t, http.StatusOK)
	c := e.send(http.MethodPost, "/api/v3/workflows/daily/backfills", "alice",
		`{"param":"TARGET_RUN_DATE","from":"20240101","to":"20240103"}`).expect(t, http.StatusOK)
	id := c.body["backfill_id"].(string)
	e.send(http.MethodPost, "/api/v3/backfills/"+id+"/actions/pause", "alice", "").expect(t, http.StatusOK)
	var page response
	deadline := time.Now().Add(10 * time.Second)
	for {
		page = e.send(http.MethodGet, "/api/v3/events?type=BACKFILL_STATUS_CHANGE_EVENT", "", "").expect(t, http.StatusOK)
		if len(page.body["events"].([]any)) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	evs := page.body["events"].([]any)
	if len(evs) != 2 {
		t.Fatalf("backfill events: %s", page.raw)
	}
	first, second := evs[0].(map[string]any), evs[1].(map[string]any)
	if first["backfill_id"] != id || first["new_status"] != "RUNNING" || first["cluster_name"] != "test" ||
		second["old_status"] != "RUNNING" || second["new_status"] != "PAUSED" || second["author"] != "alice" ||
		first["counts"].(map[string]any)["PENDING"] != float64(3) {
		t.Fatalf("backfill events: %s", page.raw)
	}
}
