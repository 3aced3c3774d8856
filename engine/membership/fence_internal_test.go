package membership

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// fenceSQL is the lock every fenced write takes on its flow groups' rows
// (flowstore's lockGroupsSQL, the run-creating statement of engine/run,
// StartFlow and activate), held here in a transaction of the test's own.
const fenceSQL = `SELECT group_id FROM flow_group WHERE group_id = ANY($1::integer[]) ORDER BY group_id FOR KEY SHARE`

// While a write holds its fence, the owner's heartbeat renews the lease
// without waiting, and no statement that moves the generation gets through:
// another node's claim skips the rows, the owner's release waits for the
// write to end. Once it has, the claim takes the groups.
func TestFenceExcludesClaimsButNotHeartbeats(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	ctx := t.Context()
	s := store{db: db}
	if err := s.ensureGroups(ctx, 2); err != nil {
		t.Fatal(err)
	}
	held, err := s.claim(ctx, "a", time.Minute, 2, 2)
	if err != nil || len(held) != 2 {
		t.Fatalf("claim: %v %v", held, err)
	}
	fence, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fence.Rollback(context.Background())
	if _, err := fence.Exec(ctx, fenceSQL, []int32{0, 1}); err != nil {
		t.Fatal(err)
	}

	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	kept, err := s.heartbeat(hctx, "a", time.Minute, held)
	cancel()
	if err != nil || len(kept) != 2 {
		t.Fatalf("heartbeat while a fence is held: kept %v, %v (it must not wait for the write)", kept, err)
	}

	// The leases run out; another node tries to take the groups.
	if _, err := db.Exec(ctx, `UPDATE flow_group SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if got, err := s.claim(ctx, "b", time.Minute, 2, 2); err != nil || len(got) != 0 {
		t.Fatalf("claim while a fence is held: %v %v, want nothing", got, err)
	}

	released := make(chan error, 1)
	go func() { released <- s.release(context.Background(), "a", held) }()
	select {
	case err := <-released:
		t.Fatalf("release moved the generation under a held fence (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := fence.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	got, err := s.claim(ctx, "b", time.Minute, 2, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim after the write ended: %v %v", got, err)
	}
	for i, c := range got {
		if c.Generation <= held[i].Generation+1 {
			t.Errorf("group %d: generation %d after a release and a claim of %d", c.ID, c.Generation, held[i].Generation)
		}
	}
}
