package flow_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
)

// groupOwners is how many groups each node owns.
func (e *env) groupOwners() map[string]int {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT owner, count(*) FROM flow_group WHERE owner IS NOT NULL GROUP BY owner`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var owner string
		var n int
		if err := rows.Scan(&owner, &n); err != nil {
			e.t.Fatal(err)
		}
		got[owner] = n
	}
	return got
}

// waitOwners waits until the groups are spread exactly as want.
func (e *env) waitOwners(want map[string]int, within time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	for {
		got := e.groupOwners()
		if maps.Equal(got, want) {
			return time.Since(start)
		}
		if time.Since(start) > within {
			e.t.Fatalf("group owners %v after %s, want %v", got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 18: nodes joining while runs are in flight take their fair share
// of the groups from the node that held them all (16 groups over three
// nodes: 6/5/5, the extra one to the first node by id), a node that stops
// hands its groups to the others at its stop rather than when its lease
// would have run out, and through every hand-over each run finishes with
// one attempt per step, never two actors on one attempt.
func TestNodesShareGroupsWhileRunsAreInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := &exclusive{hold: 100 * time.Millisecond}
	e.push(fmt.Sprintf(chainDef, "share"))
	// Runs spread over all sixteen groups, so every hand-over moves live
	// flows.
	runs := execution.New(e.pool, e.defs, 16)
	start := func() *execution.Instance {
		res, err := runs.Start(context.Background(), execution.StartRequest{WorkflowID: "share", Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Instance
	}
	cfg := func(node string) flow.Config {
		// A long lease: a group taken before it ran out was handed over.
		return flow.Config{NodeID: node, Runtimes: exclusiveRuntimes(x), GroupCount: 16, Lease: 10 * time.Second,
			HeartbeatInterval: 200 * time.Millisecond}
	}
	e.engine(cfg("node-a"))
	e.waitOwners(map[string]int{"node-a": 16}, 5*time.Second)
	var insts []*execution.Instance
	for range 64 {
		insts = append(insts, start())
	}
	e.engine(cfg("node-b"))
	c := e.engine(cfg("node-c"))
	took := e.waitOwners(map[string]int{"node-a": 6, "node-b": 5, "node-c": 5}, 5*time.Second)
	t.Logf("three nodes hold 6/5/5 of 16 groups %s after the last joined", took)
	for range 32 {
		insts = append(insts, start())
	}
	c.Stop()
	took = e.waitOwners(map[string]int{"node-a": 8, "node-b": 8}, 5*time.Second)
	t.Logf("two nodes hold 8/8 %s after the third stopped", took)
	checkExactlyOnce(t, e, insts)
	var moved int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'share' AND generation > 1`).Scan(&moved); err != nil {
		t.Fatal(err)
	}
	if moved == 0 {
		t.Error("no run was handed over to another node: the test proves nothing")
	}
	t.Logf("%d of %d runs were handed over between nodes", moved, len(insts))
	if n := x.maxSeen.Load(); n != 1 {
		t.Errorf("an attempt ran on %d actors at once", n)
	}
}
