package api

import (
	"encoding/json"
	"net/http"

	"github.com/maestro-aws/maestro/engine/tagpermit"
)

// tagPermitFields are the fields of Maestro's TagPermitRequest; any other
// field is kept as the permit's extra info (Maestro's "source", ...).
var tagPermitFields = map[string]bool{"tag": true, "max_allowed": true}

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
	p, err := tagpermit.NewStore(s.cfg.DB).Upsert(r.Context(), body.Tag, *body.MaxAllowed, extra, CallerFrom(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) listTagPermits(w http.ResponseWriter, r *http.Request) error {
	ps, err := tagpermit.NewStore(s.cfg.DB).List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"tag_permits": ps})
	return nil
}

func (s *Server) getTagPermit(w http.ResponseWriter, r *http.Request) error {
	p, err := tagpermit.NewStore(s.cfg.DB).Get(r.Context(), r.PathValue("tag"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// deleteTagPermit removes a tag permit: the tag is no longer limited (but
// by a permit written on a step's tag).
func (s *Server) deleteTagPermit(w http.ResponseWriter, r *http.Request) error {
	if err := tagpermit.NewStore(s.cfg.DB).Delete(r.Context(), r.PathValue("tag")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"tag": r.PathValue("tag"), "deleted": true})
	return nil
}
