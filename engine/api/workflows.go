package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// route is one endpoint: a Go 1.22 method pattern and its handler.
type route struct {
	pattern string
	handler handlerFunc
}

// workflowRoutes registers the workflow definition endpoints (docs/api.md).
func (s *Server) workflowRoutes() {
	for _, rt := range s.workflowRouteTable() {
		s.handle(rt.pattern, rt.handler)
	}
}

// workflowRouteTable lists the workflow definition endpoints and the
// OpenAPI document.
func (s *Server) workflowRouteTable() []route {
	return []route{
		{"POST /api/v3/workflows", s.createWorkflow(workflow.DecodeJSON)},
		{"POST /api/v3/workflows/yaml", s.createWorkflow(workflow.DecodeYAML)},
		{"PUT /api/v3/workflows/actions/validate", s.validateWorkflow(workflow.DecodeJSON)},
		{"PUT /api/v3/workflows/actions/validate/yaml", s.validateWorkflow(workflow.DecodeYAML)},
		{"GET /api/v3/workflows/{id}/versions", s.listVersions},
		{"GET /api/v3/workflows/{id}/versions/{version}", s.getVersion},
		{"PUT /api/v3/workflows/{id}/versions/{version}/actions/activate", s.activateVersion},
		{"PUT /api/v3/workflows/{id}/actions/deactivate", s.deactivateWorkflow},
		{"GET /api/v3/workflows/{id}/overview", s.workflowOverview},
		{"GET /api/v3/workflows/{id}/timeline", s.workflowTimeline},
		{"POST /api/v3/workflows/{id}/properties", s.updateProperties},
		{"GET /api/v3/workflows/{id}/properties-snapshot/{snapshot}", s.getPropertiesSnapshot},
		{"DELETE /api/v3/workflows/{id}", s.deleteWorkflow},
		{"GET /api/v3/openapi.json", s.openAPI},
	}
}

// definitionValidator checks pushed definitions; SEL expressions are
// compiled to catch syntax and static errors before anything is stored.
var definitionValidator = workflow.Validator{
	CheckExpression: func(expr string) error { _, err := sel.Compile(expr); return err },
	CheckParams:     params.Check,
}

// definitionError maps engine/definition and engine/workflow errors to
// responses, in one place. Errors it does not know stay internal errors.
func definitionError(err error) error {
	var ve *workflow.ValidationError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &ve):
		return invalidDefinition(ve)
	case errors.As(err, &tooBig):
		return tooLarge(fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
	case errors.Is(err, definition.ErrNotFound):
		return notFound(message(err, definition.ErrNotFound))
	case errors.Is(err, definition.ErrInvalidSelector):
		return badRequest(message(err, definition.ErrInvalidSelector))
	case errors.Is(err, definition.ErrForbidden):
		return forbidden(message(err, definition.ErrForbidden))
	case errors.Is(err, definition.ErrDeleting):
		e := conflict(message(err, definition.ErrDeleting))
		e.Retryable = true
		return e
	case errors.Is(err, definition.ErrConflict):
		return conflict(message(err, definition.ErrConflict))
	}
	return err
}

// message is err's text without the sentinel's name at its end: the store
// words its errors to read well on their own.
func message(err, sentinel error) string {
	return strings.TrimSuffix(err.Error(), ": "+sentinel.Error())
}

// invalidDefinition lists every problem as "path: message".
func invalidDefinition(ve *workflow.ValidationError) *Error {
	details := make([]string, 0, len(ve.Problems))
	for _, p := range ve.Problems {
		details = append(details, p.String())
	}
	msg := "invalid workflow definition: 1 problem"
	if len(details) != 1 {
		msg = fmt.Sprintf("invalid workflow definition: %d problems", len(details))
	}
	return badRequest(msg, details...)
}

// actor is the caller of r as the definitions store sees it.
func (s *Server) actor(r *http.Request) definition.Actor {
	a := definition.Actor{Name: CallerFrom(r.Context())}
	a.Admin = s.policy.IsAdmin(a.Who())
	return a
}

// decodeDefinition reads, decodes and validates the pushed definition.
func decodeDefinition(r *http.Request, decode func([]byte) (*workflow.Definition, error)) (*workflow.Definition, error) {
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	d, err := decode(data)
	if err != nil {
		return nil, definitionError(err)
	}
	if err := definitionValidator.Validate(d); err != nil {
		return nil, definitionError(err)
	}
	return d, nil
}

// versionView is a workflow version as the API shows it.
type versionView struct {
	WorkflowID string `json:"workflow_id"`
	Version    int64  `json:"workflow_version_id"`
	// Created is set on pushes only.
	Created            *bool                `json:"created,omitempty"`
	IsActive           bool                 `json:"is_active"`
	ActiveVersion      *int64               `json:"active_version_id"`
	LatestVersion      int64                `json:"latest_version_id"`
	CreatedBy          string               `json:"created_by"`
	CreateTime         time.Time            `json:"create_time"`
	Definition         json.RawMessage      `json:"definition"`
	PropertiesSnapshot *definition.Snapshot `json:"properties_snapshot"`
}

func newVersionView(v *definition.Version, created *bool) (*versionView, error) {
	// Re-encode from the model: the stored JSONB has lost the field order.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // SEL conditions are full of < and >
	if err := enc.Encode(&v.Workflow); err != nil {
		return nil, fmt.Errorf("encode workflow %s version %d: %w", v.WorkflowID, v.Version, err)
	}
	return &versionView{
		WorkflowID: v.WorkflowID, Version: v.Version, Created: created, IsActive: v.Active,
		ActiveVersion: v.ActiveVersion, LatestVersion: v.LatestVersion, CreatedBy: v.CreatedBy,
		CreateTime: v.CreatedAt, Definition: bytes.TrimSpace(buf.Bytes()), PropertiesSnapshot: v.Snapshot,
	}, nil
}

// createWorkflow pushes a definition: 201 with a new version, 200 with the
// latest version when the definition is unchanged.
func (s *Server) createWorkflow(decode func([]byte) (*workflow.Definition, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d, err := pushed(r, decode)
		if err != nil {
			return err
		}
		c, err := s.cfg.Definitions.CreateAs(r.Context(), d, s.actor(r))
		if err != nil {
			return definitionError(err)
		}
		view, err := newVersionView(c.Version, &c.New)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if c.New {
			status = http.StatusCreated
		}
		writeJSON(w, status, view)
		return nil
	}
}

// validateWorkflow is a dry run of a push: nothing is stored.
func (s *Server) validateWorkflow(decode func([]byte) (*workflow.Definition, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d, err := decodeDefinition(r, decode)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"valid": true, "workflow_id": d.Workflow.ID})
		return nil
	}
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := s.cfg.Definitions.Get(r.Context(), r.PathValue("id"), r.PathValue("version"))
	if err != nil {
		return definitionError(err)
	}
	view, err := newVersionView(v, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// pageParams reads the cursor and limit query parameters.
func pageParams(r *http.Request) (cursor int64, limit int, err error) {
	q := r.URL.Query()
	if c := q.Get("cursor"); c != "" {
		if cursor, err = strconv.ParseInt(c, 10, 64); err != nil || cursor <= 0 {
			return 0, 0, badRequest("cursor must be a next_cursor from an earlier page, got " + strconv.Quote(c))
		}
	}
	limit = definition.DefaultPageSize
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit <= 0 || limit > definition.MaxPageSize {
			return 0, 0, badRequest(fmt.Sprintf("limit must be a number from 1 to %d, got %q", definition.MaxPageSize, l))
		}
	}
	return cursor, limit, nil
}

type versionsPage struct {
	WorkflowID string `json:"workflow_id"`
	*definition.Page[definition.VersionSummary]
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := s.cfg.Definitions.Versions(r.Context(), r.PathValue("id"), cursor, limit)
	if err != nil {
		return definitionError(err)
	}
	writeJSON(w, http.StatusOK, versionsPage{WorkflowID: r.PathValue("id"), Page: page})
	return nil
}

func (s *Server) activateVersion(w http.ResponseWriter, r *http.Request) error {
	a, err := s.cfg.Definitions.Activate(r.Context(), r.PathValue("id"), r.PathValue("version"), s.actor(r))
	if err != nil {
		return definitionError(err)
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) deactivateWorkflow(w http.ResponseWriter, r *http.Request) error {
	a, err := s.cfg.Definitions.Deactivate(r.Context(), r.PathValue("id"), s.actor(r))
	if err != nil {
		return definitionError(err)
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) workflowOverview(w http.ResponseWriter, r *http.Request) error {
	o, err := s.cfg.Definitions.Overview(r.Context(), r.PathValue("id"))
	if err != nil {
		return definitionError(err)
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

type timelinePage struct {
	WorkflowID string `json:"workflow_id"`
	*definition.Page[definition.TimelineEvent]
}

func (s *Server) workflowTimeline(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := s.cfg.Definitions.Timeline(r.Context(), r.PathValue("id"), cursor, limit)
	if err != nil {
		return definitionError(err)
	}
	writeJSON(w, http.StatusOK, timelinePage{WorkflowID: r.PathValue("id"), Page: page})
	return nil
}

// snapshotView is the answer to a properties change.
type snapshotView struct {
	WorkflowID         string               `json:"workflow_id"`
	Created            bool                 `json:"created"`
	PropertiesSnapshot *definition.Snapshot `json:"properties_snapshot"`
}

// updateProperties merges a properties change set (Maestro's properties
// object; unset fields are left as they are) into a new snapshot: 201 when
// one was added, 200 when nothing changed.
func (s *Server) updateProperties(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	change, err := workflow.DecodeProperties(data)
	if err != nil {
		return definitionError(err)
	}
	if err := definitionValidator.ValidateProperties(change); err != nil {
		return definitionError(err)
	}
	u, err := s.cfg.Definitions.UpdateProperties(r.Context(), r.PathValue("id"), change, s.actor(r))
	if err != nil {
		return definitionError(err)
	}
	status := http.StatusOK
	if u.New {
		status = http.StatusCreated
		// A new run strategy applies to runs already queued at once.
		s.cfg.Runs.Readmit(r.Context(), r.PathValue("id"))
	}
	writeJSON(w, status, snapshotView{WorkflowID: r.PathValue("id"), Created: u.New, PropertiesSnapshot: u.Snapshot})
	return nil
}

func (s *Server) getPropertiesSnapshot(w http.ResponseWriter, r *http.Request) error {
	snap, err := s.cfg.Definitions.GetSnapshot(r.Context(), r.PathValue("id"), r.PathValue("snapshot"))
	if err != nil {
		return definitionError(err)
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

// deleteWorkflow answers 200 when everything is gone and 202 when the
// instances are being deleted in the background.
func (s *Server) deleteWorkflow(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cfg.Definitions.Delete(r.Context(), r.PathValue("id"), s.actor(r))
	if err != nil {
		return definitionError(err)
	}
	status := http.StatusOK
	if d.Status == definition.StatusDeleting {
		status = http.StatusAccepted
	}
	writeJSON(w, status, d)
	return nil
}
