package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// hugeArrayExpr builds a 98 MB string array (25,000 references to one
// 3.9 KB string) inside every SEL limit.
const hugeArrayExpr = `String s = \"x\".repeat(3900); String[] a = new String[25000]; for (int i = 0; i < 25000; i++) { a[i] = s; } return a;`

// cappedEngine runs `maestro engine` in a memory cgroup of limit bytes; it
// reports on exited when the process ends.
type cappedEngine struct {
	pid    int
	exited chan error
	rss    *rssWatch
	cap    *memCap
}

func startCappedEngine(t *testing.T, limit int64, dsn, node string, env ...string) *cappedEngine {
	t.Helper()
	c := newMemCap(t, limit)
	cmd := c.command(maestroBinary(t), "engine")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "MAESTRO_NODE_ID="+node, "MAESTRO_GROUP_COUNT=4", "MAESTRO_LEASE=2s")
	cmd.Env = append(cmd.Env, env...)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &cappedEngine{pid: cmd.Process.Pid, exited: make(chan error, 1), rss: watchRSS(cmd.Process.Pid), cap: c}
	go func() { e.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
		}
	})
	return e
}

// alive fails the test if the engine has exited.
func (e *cappedEngine) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-e.exited:
		e.exited <- err
		t.Fatalf("the engine exited (%v); the kernel killed %d processes of its cgroup for memory", err, e.cap.ooms())
	default:
	}
}

// Issue 15, defect 1: one legal run whose param is a 98 MB string array
// used to cost the engine ~1 GB; at the production task size (1 GiB) it
// was OOM-killed again after every restart. Now the run fails alone and the
// engine, capped at 1 GiB, carries on with the other runs.
func TestHugeParamRunUnderAOneGiBCap(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	ctx := context.Background()
	pool := openPool(t, dsn)
	defs := definition.NewStore(pool)
	pushDefinitions(t, defs,
		`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"huge",
			"params":{"big":{"type":"STRING_ARRAY","expression":"`+hugeArrayExpr+`"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`,
		`{"workflow":{"id":"plain","steps":[{"step":{"id":"s","type":"Sleep","sleep_seconds":0.2}}]}}`)
	runs := execution.New(pool, defs, 4)
	var insts []*execution.Instance
	for _, id := range []string{"huge", "huge", "huge", "plain"} {
		res, err := runs.Start(ctx, execution.StartRequest{WorkflowID: id, Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, res.Instance)
	}
	eng := startCappedEngine(t, 1<<30, dsn, "capped")
	deadline := time.Now().Add(90 * time.Second)
	for _, inst := range insts {
		for {
			eng.alive(t)
			got, err := runs.Instance(ctx, inst.WorkflowID, inst.InstanceID, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.IsTerminal() {
				want := map[string]string{"huge": "FAILED", "plain": "SUCCEEDED"}[inst.WorkflowID]
				if string(got.Status) != want || (want == "FAILED" && !strings.Contains(string(got.Timeline), "750000")) {
					t.Fatalf("%s run %d: %s %s", inst.WorkflowID, inst.InstanceID, got.Status, got.Timeline)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s run %d still %s", inst.WorkflowID, inst.InstanceID, got.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eng.alive(t)
	if rss := eng.rss.Max(); rss >= 1<<30 || eng.cap.ooms() != 0 {
		t.Fatalf("engine RSS peaked at %d MB; %d OOM kills", rss>>20, eng.cap.ooms())
	} else {
		t.Logf("engine RSS peaked at %d MB under a 1 GiB cap", rss>>20)
	}
}
