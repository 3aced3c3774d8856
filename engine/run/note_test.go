package run_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// A first run created with its version's definition is announced with
// its run in a notification of its own (run.StartNote): what the engine
// would read of it, and the sha256 of its definition as a read returns
// it; so is each of a few runs created in one call. A restart (run 2,
// whose carried steps come after the insert), a run with a definition of
// its own and the runs of a call creating more than 100 are announced
// without.
func TestCreateNotesALoneStartInItsNotification(t *testing.T) {
	pool := dbtest.Pool(t)
	ctx := context.Background()
	push(t, pool, "n", `{"run_strategy":"PARALLEL"}`)
	conn := dbtest.Listen(t, pool, queue.Channel)
	notified := func() []queue.Message {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := queue.ParseNotifications(n.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}

	out, _ := create(t, pool, []run.New{start("n", "")}, run.Options{})
	ms := notified()
	if len(ms) != 1 || ms[0].Note == nil {
		t.Fatalf("lone start: %+v, want one message with a note", ms)
	}
	var note run.StartNote
	if err := json.Unmarshal(ms[0].Note, &note); err != nil {
		t.Fatal(err)
	}
	var def []byte
	if err := pool.QueryRow(ctx, `SELECT definition FROM workflow_instance WHERE workflow_id = 'n' AND instance_id = $1`,
		out[0].Ref.InstanceID).Scan(&def); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(def)
	want := run.Ref{WorkflowID: "n", InstanceID: out[0].Ref.InstanceID, RunID: 1}
	if note.Ref != want || note.Group != out[0].GroupID || note.Version != 1 || note.GroupCount != 4 || note.UUID != out[0].UUID ||
		note.Timeout != 60 || note.Correlation != "n:1:1" || note.Owner != "tester" || !bytes.Equal(note.DefinitionSHA256, sum[:]) {
		t.Errorf("note %+v; want %v in group %d, version 1, uuid %s, owner tester, the definition's sha256 %x",
			note, want, out[0].GroupID, out[0].UUID, sum)
	}
	var rc map[string]string
	if err := json.Unmarshal(note.RunConfig, &rc); err != nil || rc["policy"] != "START" {
		t.Errorf("run config %s (%v), want a start's", note.RunConfig, err)
	}

	two, _ := create(t, pool, []run.New{start("n", ""), start("n", "")}, run.Options{})
	ms = drain(t, conn, notified)
	noted := map[int64]bool{}
	for _, m := range ms {
		var n run.StartNote
		if err := json.Unmarshal(m.Note, &n); err != nil || !bytes.Equal(n.DefinitionSHA256, sum[:]) {
			t.Fatalf("two runs: message %d noted %s (%v), want its run's note", m.ID, m.Note, err)
		}
		noted[n.InstanceID] = true
	}
	if len(ms) != 2 || !noted[two[0].Ref.InstanceID] || !noted[two[1].Ref.InstanceID] {
		t.Errorf("two runs: %d messages noted %v, want one each for %d and %d", len(ms), noted,
			two[0].Ref.InstanceID, two[1].Ref.InstanceID)
	}

	push(t, pool, "wide", `{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}}`)
	many := make([]run.New, 101)
	for i := range many {
		many[i] = start("wide", "")
	}
	for what, runs := range map[string][]run.New{
		"101 runs":    many,
		"a restart":   {{Ref: run.Ref{WorkflowID: "n", InstanceID: out[0].Ref.InstanceID, RunID: 2}, Version: 1, GroupCount: 4, TimeoutSeconds: 60}},
		"its own def": {{Ref: run.Ref{WorkflowID: "n"}, Version: 1, Definition: def, GroupCount: 4, TimeoutSeconds: 60}},
	} {
		create(t, pool, runs, run.Options{})
		for _, m := range drain(t, conn, notified) {
			if m.Note != nil {
				t.Errorf("%s: message %d noted %s, want no note", what, m.ID, m.Note)
			}
		}
	}
}

// drain returns the messages of the notifications waiting on conn (at
// least one).
func drain(t *testing.T, conn *pgxpool.Conn, notified func() []queue.Message) []queue.Message {
	t.Helper()
	ms := notified()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		n, err := conn.Conn().WaitForNotification(ctx)
		cancel()
		if err != nil {
			return ms
		}
		more, err := queue.ParseNotifications(n.Payload)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, more...)
	}
}
