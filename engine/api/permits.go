package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/wire"
)

// A tag permit caps how many step attempts carrying a tag run at once,
// across workflows and engine nodes. It answers as Maestro's TagPermit
// (wire.TagPermit); held counts the attempts holding a permit now.

// tagPermitColumns reads a tag_permit row with the live permits held.
const tagPermitColumns = `p.tag, p.max_allowed,
    (SELECT count(*) FROM tag_permit_held h JOIN step_instance s USING (workflow_id, instance_id, run_id, step_id, attempt_id)
     WHERE h.tag = p.tag AND s.status IN ('CREATED', 'INITIALIZED', 'PAUSED', 'WAITING_FOR_SIGNALS', 'EVALUATING_PARAMS',
         'WAITING_FOR_PERMITS', 'STARTING', 'RUNNING', 'FINISHING')),
    COALESCE(p.created_by, ''), COALESCE(p.modified_by, ''), p.create_time, p.modify_time, p.extra_info, p.timeline`

func scanTagPermit(r pgx.CollectableRow) (wire.TagPermit, error) {
	var p wire.TagPermit
	var created, modified time.Time
	err := r.Scan(&p.Tag, &p.MaxAllowed, &p.Held, &p.CreatedBy, &p.ModifiedBy, &created, &modified, &p.Extra, &p.Timeline)
	p.CreateTime, p.ModifyTime = wire.Millis(created), wire.Millis(modified)
	return p, err
}

// tagPermitFields are the fields of Maestro's TagPermitRequest; any other
// field is kept as the permit's extra info (Maestro's "source", ...).
var tagPermitFields = map[string]bool{"tag": true, "max_allowed": true}

// timelineLimit is how many events a tag permit's timeline keeps, as
// Maestro's Timeline.
const timelineLimit = 32

// sqlUpsertTagPermit creates or updates a permit, appending a LOG event
// ($5) to its timeline, which keeps the newest timelineLimit events.
const sqlUpsertTagPermit = `WITH up AS (
    INSERT INTO tag_permit (tag, max_allowed, created_by, modified_by, extra_info, timeline)
    VALUES ($1, $2, NULLIF($3, ''), NULLIF($3, ''), $4, jsonb_build_array($5::jsonb))
    ON CONFLICT (tag) DO UPDATE SET max_allowed = EXCLUDED.max_allowed, modify_time = now(),
        modified_by = EXCLUDED.modified_by, extra_info = EXCLUDED.extra_info,
        timeline = (SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb)
                    FROM jsonb_array_elements(tag_permit.timeline || jsonb_build_array($6::jsonb)) WITH ORDINALITY AS t(e, i)
                    WHERE i > jsonb_array_length(tag_permit.timeline) + 1 - $7)
    RETURNING *)
SELECT ` + tagPermitColumns + ` FROM up p`

// putTagPermit creates or updates a tag permit (Maestro's upsert) and
// answers it. Lowering max_allowed does not stop attempts holding permits;
// new ones wait until enough end.
func (s *Server) putTagPermit(w http.ResponseWriter, r *http.Request) error {
	var fields map[string]json.RawMessage
	if err := decodeStrict(r, &fields); err != nil {
		return err
	}
	var body struct {
		Tag        string
		MaxAllowed *int64
	}
	if err := json.Unmarshal(fields["tag"], &body.Tag); fields["tag"] != nil && err != nil {
		return badRequest("tag must be a string")
	}
	if fields["max_allowed"] != nil {
		if err := json.Unmarshal(fields["max_allowed"], &body.MaxAllowed); err != nil {
			return badRequest("max_allowed is required, a number from 0 to 2147483647")
		}
	}
	switch {
	case body.Tag == "" || len(body.Tag) > 128:
		return badRequest("tag is required, at most 128 characters")
	case body.MaxAllowed == nil || *body.MaxAllowed < 0 || *body.MaxAllowed > 1<<31-1:
		return badRequest("max_allowed is required, a number from 0 to 2147483647")
	case fields["timeline"] != nil:
		return badRequest("timeline is kept by Maestro and cannot be set")
	}
	extra := map[string]json.RawMessage{}
	for k, v := range fields {
		if !tagPermitFields[k] {
			extra[k] = v
		}
	}
	who := CallerFrom(r.Context())
	created := wire.LogEvent("User [%s] created the tag permit with limit [%d]", who, *body.MaxAllowed)
	updated := wire.LogEvent("User [%s] updated the tag permit to the new limit [%d]", who, *body.MaxAllowed)
	rows, err := s.cfg.DB.Query(r.Context(), sqlUpsertTagPermit, body.Tag, *body.MaxAllowed, who, extra, created, updated, timelineLimit)
	if err != nil {
		return fmt.Errorf("save tag permit: %w", err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, scanTagPermit)
	if err != nil {
		return fmt.Errorf("save tag permit: %w", err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) listTagPermits(w http.ResponseWriter, r *http.Request) error {
	rows, err := s.cfg.DB.Query(r.Context(), `SELECT `+tagPermitColumns+` FROM tag_permit p ORDER BY p.tag`)
	if err != nil {
		return fmt.Errorf("list tag permits: %w", err)
	}
	ps, err := pgx.CollectRows(rows, scanTagPermit)
	if err != nil {
		return fmt.Errorf("list tag permits: %w", err)
	}
	if ps == nil {
		ps = []wire.TagPermit{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tag_permits": ps})
	return nil
}

func (s *Server) getTagPermit(w http.ResponseWriter, r *http.Request) error {
	rows, err := s.cfg.DB.Query(r.Context(), `SELECT `+tagPermitColumns+` FROM tag_permit p WHERE p.tag = $1`, r.PathValue("tag"))
	if err != nil {
		return fmt.Errorf("read tag permit: %w", err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, scanTagPermit)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(fmt.Sprintf("tag permit %q not found", r.PathValue("tag")))
	}
	if err != nil {
		return fmt.Errorf("read tag permit: %w", err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// deleteTagPermit removes a tag permit: the tag is no longer limited (but
// by a permit written on a step's tag).
func (s *Server) deleteTagPermit(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.cfg.DB.Exec(r.Context(), `DELETE FROM tag_permit WHERE tag = $1`, r.PathValue("tag"))
	if err != nil {
		return fmt.Errorf("delete tag permit: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(fmt.Sprintf("tag permit %q not found", r.PathValue("tag")))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tag": r.PathValue("tag"), "deleted": true})
	return nil
}
