package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// TagPermit caps how many step attempts carrying a tag run at once, across
// workflows and engine nodes. Held counts the attempts holding a permit now.
type TagPermit struct {
	Tag        string    `json:"tag"`
	MaxAllowed int64     `json:"max_allowed"`
	Held       int64     `json:"held"`
	CreatedBy  string    `json:"created_by,omitempty"`
	ModifiedBy string    `json:"modified_by,omitempty"`
	CreateTime time.Time `json:"create_time"`
	ModifyTime time.Time `json:"modify_time"`
}

// tagPermitColumns reads a tag_permit row with the live permits held.
const tagPermitColumns = `p.tag, p.max_allowed,
    (SELECT count(*) FROM tag_permit_held h JOIN step_instance s USING (workflow_id, instance_id, run_id, step_id, attempt_id)
     WHERE h.tag = p.tag AND s.status IN ('CREATED', 'INITIALIZED', 'PAUSED', 'WAITING_FOR_SIGNALS', 'EVALUATING_PARAMS',
         'WAITING_FOR_PERMITS', 'STARTING', 'RUNNING', 'FINISHING')),
    COALESCE(p.created_by, ''), COALESCE(p.modified_by, ''), p.create_time, p.modify_time`

func scanTagPermit(r pgx.CollectableRow) (TagPermit, error) {
	var p TagPermit
	err := r.Scan(&p.Tag, &p.MaxAllowed, &p.Held, &p.CreatedBy, &p.ModifiedBy, &p.CreateTime, &p.ModifyTime)
	return p, err
}

type tagPermitBody struct {
	Tag        string `json:"tag"`
	MaxAllowed *int64 `json:"max_allowed"`
}

// putTagPermit creates or updates a tag permit. Lowering max_allowed does
// not stop attempts holding permits; new ones wait until enough end.
func (s *Server) putTagPermit(w http.ResponseWriter, r *http.Request) error {
	var body tagPermitBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	switch {
	case body.Tag == "" || len(body.Tag) > 128:
		return badRequest("tag is required, at most 128 characters")
	case body.MaxAllowed == nil || *body.MaxAllowed < 0 || *body.MaxAllowed > 1<<31-1:
		return badRequest("max_allowed is required, a number from 0 to 2147483647")
	}
	rows, err := s.cfg.DB.Query(r.Context(), `WITH up AS (
            INSERT INTO tag_permit (tag, max_allowed, created_by, modified_by) VALUES ($1, $2, NULLIF($3, ''), NULLIF($3, ''))
            ON CONFLICT (tag) DO UPDATE SET max_allowed = EXCLUDED.max_allowed, modify_time = now(),
                modified_by = EXCLUDED.modified_by
            RETURNING *)
        SELECT `+tagPermitColumns+` FROM up p`, body.Tag, *body.MaxAllowed, CallerFrom(r.Context()))
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
		ps = []TagPermit{}
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
