package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// batchWorld is a database with one workflow per run strategy, each in a
// state its strategy reacts to.
type batchWorld struct {
	pool *pgxpool.Pool
	svc  *Service
}

func newBatchWorld(t *testing.T) *batchWorld {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	push := func(id, props, extra string) {
		d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"o"` + props + `},"workflow":{"id":"` + id + `"` + extra +
			`,"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := defs.Create(ctx, d, "o"); err != nil {
			t.Fatal(err)
		}
	}
	push("seq", "", `,"timeout":"2h"`)
	push("strict", `,"run_strategy":"STRICT_SEQUENTIAL"`, "")
	push("first", `,"run_strategy":"FIRST_ONLY"`, "")
	push("first_idle", `,"run_strategy":"FIRST_ONLY"`, "")
	push("last", `,"run_strategy":"LAST_ONLY"`, "")
	push("par", `,"run_strategy":{"rule":"PARALLEL","workflow_concurrency":2}`, "")
	push("paused", `,"run_strategy":{"rule":"PARALLEL","workflow_concurrency":0}`, "")
	push("consts", "", `,"params":{"locked":{"type":"STRING","value":"a","mode":"CONSTANT"}}`)
	w := &batchWorld{pool: pool, svc: New(pool, defs, 4)}
	// The states: a FAILED run blocks strict; first and last have a live
	// run; last also a queued one; dup has a run with request id r-old.
	start := func(id, rid string) {
		if _, err := w.svc.Start(ctx, StartRequest{WorkflowID: id, Version: "1", RequestID: rid}); err != nil {
			t.Fatal(err)
		}
	}
	start("strict", "")
	start("first", "")
	start("last", "")
	start("last", "")
	start("seq", "r-old")
	start("consts", "c-old")
	for _, q := range []string{
		`UPDATE workflow_instance SET status = 'FAILED', seq = seq + 1, end_time = now() WHERE workflow_id = 'strict'`,
		`UPDATE workflow_instance SET status = 'IN_PROGRESS', seq = seq + 1 WHERE workflow_id IN ('first', 'last') AND instance_id = 1`,
		`UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now() WHERE workflow_id = 'seq'`,
		`DELETE FROM maestro_queue`,
		`DELETE FROM maestro_event`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func timeStart(id, rid string, fire int64) BatchStart {
	return BatchStart{WorkflowID: id, Version: 1, RequestID: rid,
		Initiator: map[string]any{"type": "TIME", "trigger_uuid": "6f1f0a38-1b4c-3d2f-9a55-0b6f8a3f0c11", "trigger_time": fire, "timezone": "UTC", "depth": 0},
		RunParams: workflow.Params{"RUN_TS": {Type: workflow.ParamTypeLong, Value: fire}}}
}

// batchStarts covers every rule: strategies admitting, queueing, blocking,
// dropping and superseding; several starts of one workflow; request ids
// repeated from the database and within the batch; refused run params;
// missing workflows and versions.
var batchStarts = []BatchStart{
	timeStart("seq", "r1", 1000),
	timeStart("seq", "r2", 2000),
	timeStart("seq", "r1", 1000), // repeats an earlier start of the batch
	timeStart("seq", "r-old", 5), // repeats a stored run
	timeStart("strict", "", 1000),
	timeStart("first", "", 1000),
	timeStart("first_idle", "", 1000),
	timeStart("first_idle", "", 2000),
	timeStart("last", "l1", 1000),
	timeStart("last", "l2", 2000),
	timeStart("par", "", 1),
	timeStart("par", "", 2),
	timeStart("par", "", 3),
	timeStart("paused", "", 1),
	{WorkflowID: "consts", Version: 1, RunParams: workflow.Params{"locked": {Type: workflow.ParamTypeString, Value: "b"}}},
	{WorkflowID: "consts", Version: 1, Initiator: map[string]any{"type": "MANUAL", "user": "u"}},
	timeStart("nope", "", 1),
	{WorkflowID: "seq", Version: 9},
	// A request id whose first start is refused: the next start with it
	// is created; a refused start repeating a stored run is its duplicate.
	{WorkflowID: "consts", Version: 1, RequestID: "c1", RunParams: workflow.Params{"locked": {Type: workflow.ParamTypeString, Value: "b"}}},
	{WorkflowID: "consts", Version: 1, RequestID: "c1"},
	{WorkflowID: "consts", Version: 1, RequestID: "c1"},
	{WorkflowID: "consts", Version: 1, RequestID: "c-old", RunParams: workflow.Params{"locked": {Type: workflow.ParamTypeString, Value: "b"}}},
}

// The batch path and Start, given the same starts in the same order over
// the same state, leave the same runs, queue messages and instance ids
// behind and report the same outcome of each start.
func TestBatchStartMatchesSingleStarts(t *testing.T) {
	t.Parallel()
	got := matchSingleStarts(t, batchStarts)
	// The scenario exercises what it means to.
	for _, w := range []struct {
		i    int
		what string
		ok   bool
	}{
		{1, "queued behind a live run", got[1].Queued},
		{2, "duplicate within the batch", got[2].Duplicated && got[2].InstanceID == got[0].InstanceID},
		{3, "duplicate of a stored run", got[3].Duplicated && got[3].InstanceID == 1},
		{4, "blocked by a failed run", got[4].Queued},
		{5, "dropped under FIRST_ONLY", got[5].Status == "STOPPED"},
		{6, "admitted under FIRST_ONLY", !got[6].Queued && got[6].Status == "CREATED"},
		{7, "second start dropped under FIRST_ONLY", got[7].Status == "STOPPED"},
		{12, "third PARALLEL(2) start queued", got[12].Queued && !got[11].Queued},
		{13, "paused", got[13].Queued},
		{14, "constant param refused", got[14].Err == "invalid"},
		{16, "missing workflow", got[16].Err == "not found"},
		{17, "missing version", got[17].Err == "not found"},
		{18, "refused with a request id", got[18].Err == "invalid"},
		{19, "created with the request id a refused start had", got[19].Err == "" && !got[19].Duplicated},
		{20, "duplicate of a start created after a refused one", got[20].Duplicated && got[20].InstanceID == got[19].InstanceID},
		{21, "duplicate of a stored run though its params are refused", got[21].Duplicated && got[21].InstanceID == 1},
	} {
		if !w.ok {
			t.Errorf("start %d was not %s: %+v", w.i, w.what, got[w.i])
		}
	}
}

// Without request ids a batch needs no lookup of stored runs (no
// run.FindStarted statement); it still leaves what single starts leave:
// instance ids without gaps where a start is refused or its workflow or
// version is missing.
func TestBatchStartWithoutRequestIDsMatchesSingleStarts(t *testing.T) {
	t.Parallel()
	var starts []BatchStart
	for _, st := range batchStarts {
		if st.RequestID == "" {
			starts = append(starts, st)
		}
	}
	got := matchSingleStarts(t, starts)
	var created, refused int
	for _, o := range got {
		switch {
		case o.Err == "":
			created++
		case o.Err == "invalid":
			refused++
		}
	}
	if created < 8 || refused != 1 {
		t.Errorf("%d runs created and %d refused, want the scenario's: %+v", created, refused, got)
	}
}

// matchSingleStarts applies starts through the batch path and one by one
// through Start in two equal worlds, and fails the test where their
// outcomes or what they wrote differ. It returns the batch's outcomes.
func matchSingleStarts(t *testing.T, starts []BatchStart) []outcome {
	t.Helper()
	ctx := context.Background()
	single, batch := newBatchWorld(t), newBatchWorld(t)

	var want []outcome
	for _, st := range starts {
		res, err := single.svc.Start(ctx, StartRequest{WorkflowID: st.WorkflowID, Version: strconv.FormatInt(st.Version, 10),
			RunParams: st.RunParams, RequestID: st.RequestID, Initiator: st.Initiator})
		if err != nil {
			want = append(want, outcome{Err: errKind(err)})
			continue
		}
		want = append(want, outcome{InstanceID: res.Instance.InstanceID, Status: string(res.Instance.Status),
			Queued: res.Instance.Queued, Duplicated: res.Duplicated})
	}
	results, err := batch.svc.StartBatch(ctx, starts)
	if err != nil {
		t.Fatal(err)
	}
	var got []outcome
	for _, r := range results {
		if r.Err != nil {
			got = append(got, outcome{Err: errKind(r.Err)})
			continue
		}
		got = append(got, outcome{InstanceID: r.InstanceID, Status: string(r.Status), Queued: r.Queued, Duplicated: r.Duplicated})
	}
	for i := range starts {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("start %d (%s %q): batch %+v, single %+v", i, starts[i].WorkflowID, starts[i].RequestID, got[i], want[i])
		}
	}
	a, b := snapshot(t, single.pool), snapshot(t, batch.pool)
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s:\n single %s\n batch  %s", k, v, b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s only after the batch: %s", k, v)
		}
	}
	return got
}

type outcome struct {
	InstanceID int64
	Status     string
	Queued     bool
	Duplicated bool
	Err        string
}

func errKind(err error) string {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, definition.ErrNotFound):
		return "not found"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	}
	return err.Error()
}

// snapshot reads what starts write, without what differs by nature (uuids,
// clock times): runs by key, queue messages counted by content, and each
// workflow's instance id counter.
func snapshot(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT workflow_id, instance_id, run_id, workflow_version, coalesce(request_id, ''), group_id,
            status, queued, run_params, initiator, run_config, timeout_seconds, end_time IS NULL, md5(definition::text),
            (SELECT jsonb_agg(e - 'timestamp') FROM jsonb_array_elements(timeline) e)
        FROM workflow_instance`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, rid, status, runParams, initiator, runConfig, def, timeline string
		var iid, run, version, timeout int64
		var group int32
		var queued, open bool
		if err := rows.Scan(&id, &iid, &run, &version, &rid, &group, &status, &queued, &runParams, &initiator, &runConfig,
			&timeout, &open, &def, &timeline); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("run %s/%d/%d", id, iid, run)] = fmt.Sprintf("v%d rid=%q g%d %s queued=%v params=%s initiator=%s config=%s timeout=%d open=%v def=%s timeline=%s",
			version, rid, group, status, queued, runParams, initiator, runConfig, timeout, open, def, timeline)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	msgs, err := pool.Query(ctx, `SELECT queue_id, coalesce(group_id, -1), payload::text, count(*) FROM maestro_queue GROUP BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	for msgs.Next() {
		var q, g, n int
		var payload string
		if err := msgs.Scan(&q, &g, &payload, &n); err != nil {
			t.Fatal(err)
		}
		var norm any
		_ = json.Unmarshal([]byte(payload), &norm)
		b, _ := json.Marshal(norm)
		out[fmt.Sprintf("queue %d g%d %s", q, g, b)] = strconv.Itoa(n)
	}
	if err := msgs.Err(); err != nil {
		t.Fatal(err)
	}
	// Events: a dropped run's status change is one, by either path.
	evs, err := pool.Query(ctx, `SELECT workflow_id, kind, count(*) FROM maestro_event GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	for evs.Next() {
		var id string
		var kind, n int
		if err := evs.Scan(&id, &kind, &n); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("events of %s kind %d", id, kind)] = strconv.Itoa(n)
	}
	if err := evs.Err(); err != nil {
		t.Fatal(err)
	}
	ids, err := pool.Query(ctx, `SELECT workflow_id, latest_instance_id FROM workflow`)
	if err != nil {
		t.Fatal(err)
	}
	for ids.Next() {
		var id string
		var n int64
		if err := ids.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out["latest instance id of "+id] = strconv.FormatInt(n, 10)
	}
	return out
}

// A start its Authorize refuses under the lock, or that repeats a stored
// run, was counted when the ids were allocated (before the lock); its id
// goes back, and the runs created take the ids in order without a gap.
func TestBatchStartGivesBackTheIDsOfStartsLeftOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newBatchWorld(t)
	refuse := func(owner string, _ []string) error {
		if owner != "o" {
			t.Errorf("Authorize saw owner %q, want the locked row's o", owner)
		}
		return errors.New("not an operator")
	}
	starts := []BatchStart{
		timeStart("seq", "g1", 1),
		timeStart("seq", "g2", 2),
		timeStart("seq", "r-old", 3), // a stored run's duplicate
		timeStart("seq", "g4", 4),
		timeStart("par", "", 5),
	}
	starts[1].Authorize = refuse
	starts[4].Authorize = refuse
	res, err := w.svc.StartBatch(ctx, starts)
	if err != nil {
		t.Fatal(err)
	}
	var denied *DeniedError
	if res[0].InstanceID != 2 || res[0].Err != nil || !errors.As(res[1].Err, &denied) || !res[2].Duplicated || res[2].InstanceID != 1 ||
		res[3].InstanceID != 3 || res[3].Err != nil || !errors.As(res[4].Err, &denied) {
		t.Fatalf("results: %+v", res)
	}
	for id, want := range map[string]int64{"seq": 3, "par": 0} {
		var latest, runs int64
		if err := w.pool.QueryRow(ctx, `SELECT latest_instance_id, (SELECT count(*) FROM workflow_instance WHERE workflow_id = $1)
            FROM workflow WHERE workflow_id = $1`, id).Scan(&latest, &runs); err != nil {
			t.Fatal(err)
		}
		if latest != want || runs != want {
			t.Errorf("%s: latest_instance_id %d and %d runs, want %d of each", id, latest, runs, want)
		}
	}
}
