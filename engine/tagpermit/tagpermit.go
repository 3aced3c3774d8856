// Package tagpermit stores tag permits: a permit caps how many step
// attempts carrying a tag run at once, across workflows and engine nodes.
// The engine acquires and releases permits (engine/flow); this store is
// the REST API's view: create or update, read, list, delete, and who owns
// a permit. A permit reads as Maestro's TagPermit (wire.TagPermit), with
// held counting the attempts holding a permit now.
package tagpermit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/wire"
)

// ErrNotFound reports a tag without a permit.
var ErrNotFound = errors.New("not found")

// TimelineLimit is how many events a tag permit's timeline keeps, as
// Maestro's Timeline.
const TimelineLimit = 32

// Store reads and writes tag permits.
type Store struct{ db *pgxpool.Pool }

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// sqlColumns reads a tag_permit row (as p) with the live permits held.
const sqlColumns = `p.tag, p.max_allowed,
    (SELECT count(*) FROM tag_permit_held h JOIN step_instance s USING (workflow_id, instance_id, run_id, step_id, attempt_id)
     WHERE h.tag = p.tag AND s.status IN ('CREATED', 'INITIALIZED', 'PAUSED', 'WAITING_FOR_SIGNALS', 'EVALUATING_PARAMS',
         'WAITING_FOR_PERMITS', 'STARTING', 'RUNNING', 'FINISHING')),
    COALESCE(p.created_by, ''), COALESCE(p.modified_by, ''), p.create_time, p.modify_time, p.extra_info, p.timeline`

// sqlUpsert creates or updates a permit, appending a LOG event ($5 when
// created, $6 when updated) to its timeline, which keeps the newest $7
// events.
const sqlUpsert = `WITH up AS (
    INSERT INTO tag_permit (tag, max_allowed, created_by, modified_by, extra_info, timeline)
    VALUES ($1, $2, NULLIF($3, ''), NULLIF($3, ''), $4, jsonb_build_array($5::jsonb))
    ON CONFLICT (tag) DO UPDATE SET max_allowed = EXCLUDED.max_allowed, modify_time = now(),
        modified_by = EXCLUDED.modified_by, extra_info = EXCLUDED.extra_info,
        timeline = (SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb)
                    FROM jsonb_array_elements(tag_permit.timeline || jsonb_build_array($6::jsonb)) WITH ORDINALITY AS t(e, i)
                    WHERE i > jsonb_array_length(tag_permit.timeline) + 1 - $7)
    RETURNING *)
SELECT ` + sqlColumns + ` FROM up p`

const (
	sqlList   = `SELECT ` + sqlColumns + ` FROM tag_permit p ORDER BY p.tag`
	sqlGet    = `SELECT ` + sqlColumns + ` FROM tag_permit p WHERE p.tag = $1`
	sqlDelete = `DELETE FROM tag_permit WHERE tag = $1`
	sqlOwner  = `SELECT COALESCE(created_by, '') FROM tag_permit WHERE tag = $1`
)

func scan(r pgx.CollectableRow) (wire.TagPermit, error) {
	var p wire.TagPermit
	var created, modified time.Time
	err := r.Scan(&p.Tag, &p.MaxAllowed, &p.Held, &p.CreatedBy, &p.ModifiedBy, &created, &modified, &p.Extra, &p.Timeline)
	p.CreateTime, p.ModifyTime = wire.Millis(created), wire.Millis(modified)
	return p, err
}

// Upsert creates or updates the permit of tag with maxAllowed and extra
// (Maestro's extra fields, e.g. source), noting who did it on its
// timeline, and returns it. Lowering max_allowed does not stop attempts
// holding permits; new ones wait until enough end.
func (s *Store) Upsert(ctx context.Context, tag string, maxAllowed int64, extra map[string]json.RawMessage, who string) (wire.TagPermit, error) {
	if extra == nil {
		extra = map[string]json.RawMessage{}
	}
	created := wire.LogEvent("User [%s] created the tag permit with limit [%d]", who, maxAllowed)
	updated := wire.LogEvent("User [%s] updated the tag permit to the new limit [%d]", who, maxAllowed)
	rows, err := s.db.Query(ctx, sqlUpsert, tag, maxAllowed, who, extra, created, updated, TimelineLimit)
	if err != nil {
		return wire.TagPermit{}, fmt.Errorf("save tag permit %q: %w", tag, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, scan)
	if err != nil {
		return wire.TagPermit{}, fmt.Errorf("save tag permit %q: %w", tag, err)
	}
	return p, nil
}

// List returns every permit, by tag.
func (s *Store) List(ctx context.Context) ([]wire.TagPermit, error) {
	rows, err := s.db.Query(ctx, sqlList)
	if err != nil {
		return nil, fmt.Errorf("list tag permits: %w", err)
	}
	ps, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list tag permits: %w", err)
	}
	if ps == nil {
		ps = []wire.TagPermit{}
	}
	return ps, nil
}

// Get returns the permit of tag; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, tag string) (wire.TagPermit, error) {
	rows, err := s.db.Query(ctx, sqlGet, tag)
	if err != nil {
		return wire.TagPermit{}, fmt.Errorf("read tag permit %q: %w", tag, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return wire.TagPermit{}, notFound(tag)
	}
	if err != nil {
		return wire.TagPermit{}, fmt.Errorf("read tag permit %q: %w", tag, err)
	}
	return p, nil
}

// Delete removes the permit of tag: the tag is no longer limited (but by a
// permit written on a step's tag). ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, tag string) error {
	res, err := s.db.Exec(ctx, sqlDelete, tag)
	if err != nil {
		return fmt.Errorf("delete tag permit %q: %w", tag, err)
	}
	if res.RowsAffected() == 0 {
		return notFound(tag)
	}
	return nil
}

// Owner returns who created the permit of tag, and whether there is one.
func (s *Store) Owner(ctx context.Context, tag string) (owner string, ok bool, err error) {
	err = s.db.QueryRow(ctx, sqlOwner, tag).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("read tag permit %q: %w", tag, err)
	}
	return owner, true, nil
}

func notFound(tag string) error {
	return fmt.Errorf("tag permit %q not found: %w", tag, ErrNotFound)
}
