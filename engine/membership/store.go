package membership

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// store holds the SQL of flow groups (flow_group) and of the engine nodes'
// membership (engine_node, migration 00081). A claim or a release moves a
// group's generation on; every state write of the flow engine is fenced by
// it (engine/flow/internal/flowstore's writer).
type store struct {
	db *pgxpool.Pool
}

// Claim is a flow group this node holds at a generation.
type Claim struct {
	ID         int32
	Generation int64
}

// Member is a live engine node.
type Member struct {
	NodeID string
	// ExpiresIn is how long the node stays live without renewing.
	ExpiresIn time.Duration
	// Draining: an operator drains the node (maestro ops drain): it holds
	// no group and the others share the groups out without it.
	Draining bool
}

const ensureGroupsSQL = `INSERT INTO flow_group (group_id) SELECT g FROM generate_series(0, $1 - 1) AS g ON CONFLICT DO NOTHING`

// ensureGroups creates the rows of groups 0..count-1 that do not exist yet.
func (s store) ensureGroups(ctx context.Context, count int) error {
	if _, err := s.db.Exec(ctx, ensureGroupsSQL, count); err != nil {
		return fmt.Errorf("create flow groups: %w", err)
	}
	return nil
}

const claimGroupsSQL = `
UPDATE flow_group SET owner = $1, generation = generation + 1, heartbeat_at = now(), expires_at = now() + $2::interval
WHERE group_id IN (
    SELECT group_id FROM flow_group
    WHERE group_id < $4 AND (owner IS NULL OR expires_at IS NULL OR expires_at < now())
    ORDER BY group_id
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
RETURNING group_id, generation`

// claim takes up to limit free or expired groups below count.
func (s store) claim(ctx context.Context, node string, lease time.Duration, limit, count int) ([]Claim, error) {
	return s.claims(ctx, "claim flow groups", claimGroupsSQL, node, lease, limit, count)
}

const reclaimOwnGroupsSQL = `
UPDATE flow_group SET generation = generation + 1, heartbeat_at = now(), expires_at = now() + $2::interval
WHERE group_id IN (
    SELECT group_id FROM flow_group
    WHERE owner = $1 AND group_id < $4
    ORDER BY group_id
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
RETURNING group_id, generation`

// reclaimOwn takes back, with a new generation, up to limit groups below
// count still leased under node: a restarted engine's earlier process left
// them.
func (s store) reclaimOwn(ctx context.Context, node string, lease time.Duration, limit, count int) ([]Claim, error) {
	return s.claims(ctx, "reclaim own flow groups", reclaimOwnGroupsSQL, node, lease, limit, count)
}

func (s store) claims(ctx context.Context, what, sql string, args ...any) ([]Claim, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claim, error) {
		var c Claim
		err := r.Scan(&c.ID, &c.Generation)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return claims, nil
}

// heartbeatSQL extends the leases of the groups a node holds, locking
// them in group order. Its FOR NO KEY UPDATE does not conflict with the
// FOR KEY SHARE of the writers' fences: a heartbeat neither waits for the
// writes in flight nor holds them up.
const heartbeatSQL = `
UPDATE flow_group g SET heartbeat_at = now(), expires_at = now() + $2::interval
FROM (SELECT f.group_id FROM flow_group f
      JOIN unnest($3::integer[], $4::bigint[]) AS h(group_id, generation)
        ON f.group_id = h.group_id AND f.generation = h.generation
      WHERE f.owner = $1
      ORDER BY f.group_id
      FOR NO KEY UPDATE OF f) l
WHERE g.group_id = l.group_id
RETURNING g.group_id`

// heartbeat extends the lease of the held groups and returns those still
// held.
func (s store) heartbeat(ctx context.Context, node string, lease time.Duration, held []Claim) (map[int32]bool, error) {
	ids := make([]int32, len(held))
	gens := make([]int64, len(held))
	for i, c := range held {
		ids[i], gens[i] = c.ID, c.Generation
	}
	rows, err := s.db.Query(ctx, heartbeatSQL, node, lease, ids, gens)
	if err != nil {
		return nil, fmt.Errorf("heartbeat flow groups: %w", err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("heartbeat flow groups: %w", err)
	}
	out := make(map[int32]bool, len(kept))
	for _, id := range kept {
		out[id] = true
	}
	return out, nil
}

// registerNodeSQL renews this node's membership and reads the live nodes
// with how long each stays live without another renewal (itself included:
// a data-modifying CTE's row is not visible to the statement's own
// SELECT). Rows dead for an hour are swept.
const registerNodeSQL = `
WITH me AS (
    INSERT INTO engine_node (node_id, heartbeat_at, expires_at) VALUES ($1, now(), now() + $2::interval)
    ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at
    RETURNING node_id, expires_at, draining),
swept AS (
    DELETE FROM engine_node WHERE expires_at < now() - interval '1 hour' AND node_id <> $1)
SELECT node_id, extract(epoch FROM expires_at - now())::float8, (SELECT group_count FROM flow_group_count), draining
FROM engine_node WHERE expires_at > now() AND node_id <> $1
UNION ALL
SELECT node_id, extract(epoch FROM expires_at - now())::float8, (SELECT group_count FROM flow_group_count), draining FROM me
ORDER BY 1`

// register renews node's membership for lease and returns the live nodes,
// sorted by id, node among them, and the flow group count recorded in the
// database (0 when none is).
func (s store) register(ctx context.Context, node string, lease time.Duration) ([]Member, int, error) {
	rows, err := s.db.Query(ctx, registerNodeSQL, node, lease)
	if err != nil {
		return nil, 0, fmt.Errorf("register engine node: %w", err)
	}
	var recorded *int32
	live, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		var secs float64
		err := r.Scan(&m.NodeID, &secs, &recorded, &m.Draining)
		m.ExpiresIn = time.Duration(secs * float64(time.Second))
		return m, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("register engine node: %w", err)
	}
	if recorded == nil {
		return live, 0, nil
	}
	return live, int(*recorded), nil
}

const deregisterNodeSQL = `DELETE FROM engine_node WHERE node_id = $1`

// deregister ends node's membership, so the others count it out at their
// next heartbeat rather than when its row expires.
func (s store) deregister(ctx context.Context, node string) error {
	if _, err := s.db.Exec(ctx, deregisterNodeSQL, node); err != nil {
		return fmt.Errorf("deregister engine node: %w", err)
	}
	return nil
}

// releaseGroupsSQL frees groups a node holds. The generation moves on, so
// that a write the node might still make for them is refused even before
// another node claims them; like every statement that moves a generation,
// it locks the rows FOR UPDATE, so it waits for the writes in flight that
// hold them FOR KEY SHARE (their fence).
const releaseGroupsSQL = `
UPDATE flow_group SET owner = NULL, expires_at = NULL, generation = generation + 1
WHERE group_id IN (
    SELECT group_id FROM flow_group WHERE owner = $1 AND group_id = ANY ($2::integer[])
    ORDER BY group_id
    FOR UPDATE)`

// release hands groups back so another node can take them at once.
func (s store) release(ctx context.Context, node string, held []Claim) error {
	ids := make([]int32, len(held))
	for i, c := range held {
		ids[i] = c.ID
	}
	if _, err := s.db.Exec(ctx, releaseGroupsSQL, node, ids); err != nil {
		return fmt.Errorf("release flow groups: %w", err)
	}
	return nil
}

const unownedGroupsSQL = `
SELECT count(*) FROM flow_group
WHERE group_id < $1 AND (owner IS NULL OR expires_at IS NULL OR expires_at < now())`

// unowned counts the groups below count that no node holds under a live
// lease (free or expired).
func (s store) unowned(ctx context.Context, count int) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, unownedGroupsSQL, count).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unowned flow groups: %w", err)
	}
	return n, nil
}
