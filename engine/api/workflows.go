package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/jobtemplate"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/wire"
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
		{"GET /api/v3/workflows", s.listWorkflows},
		{"POST /api/v3/workflows", s.createWorkflow(workflow.DecodeJSON)},
		{"POST /api/v3/workflows/yaml", s.createWorkflow(workflow.DecodeYAML)},
		{"PUT /api/v3/workflows/actions/validate", s.validateWorkflow(workflow.DecodeJSON)},
		{"PUT /api/v3/workflows/actions/validate/yaml", s.validateWorkflow(workflow.DecodeYAML)},
		{"GET /api/v3/workflows/{id}/versions", s.listVersions},
		{"GET /api/v3/workflows/{id}/versions/pagination", s.paginateVersions},
		{"GET /api/v3/workflows/{id}/versions/{version}", s.getVersion},
		{"PUT /api/v3/workflows/{id}/versions/{version}/actions/activate", s.activateVersion},
		{"PUT /api/v3/workflows/{id}/actions/deactivate", s.deactivateWorkflow},
		{"GET /api/v3/workflows/{id}/overview", s.workflowOverview},
		{"GET /api/v3/workflows/{id}/timeline", s.workflowTimeline},
		{"POST /api/v3/workflows/{id}/properties", s.updateProperties},
		{"POST /api/v3/workflows/{id}/properties/tag", s.addWorkflowTag},
		{"DELETE /api/v3/workflows/{id}/properties/tag/{tag}", s.deleteWorkflowTag},
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

// decodeDefinition reads, decodes and validates the pushed definition,
// and dry-runs it as Maestro does at push (params.DryRun): what would fail
// every run is a 400 now, not a run that fails later.
func (s *Server) decodeDefinition(r *http.Request, decode func([]byte) (*workflow.Definition, error)) (*workflow.Definition, error) {
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	d, err := decode(data)
	if err != nil {
		return nil, err
	}
	v := definitionValidator
	templates := jobtemplate.NewStore(s.cfg.DB)
	v.JobTemplateParams = func(stepType, jobType, version string) (workflow.Params, error) {
		return templates.Params(r.Context(), stepType, jobType, version)
	}
	if err := v.Validate(d); err != nil {
		return nil, err
	}
	if err := params.DryRun(r.Context(), &d.Workflow); err != nil {
		return nil, dryRunError(err)
	}
	return d, nil
}

// dryRunError is a definition the dry run refused: Maestro's 400 with each
// problem listed.
func dryRunError(err error) error {
	var details []string
	for _, e := range unwrapAll(err) {
		details = append(details, e.Error())
	}
	return badRequest("dry run of workflow params failed: "+strings.SplitN(err.Error(), "\n", 2)[0], details...)
}

// unwrapAll lists the errors an errors.Join holds, or err itself.
func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// createWorkflow pushes a definition and answers Maestro's
// WorkflowCreateResponse (200): the new version, or the latest version
// when the push is identical to it ("created": false).
func (s *Server) createWorkflow(decode func([]byte) (*workflow.Definition, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d, err := s.pushed(r, decode)
		if err != nil {
			return err
		}
		if err := s.checkSubworkflowTargets(r.Context(), d, s.actor(r)); err != nil {
			return err
		}
		c, err := s.cfg.Definitions.CreateAs(r.Context(), d, s.actor(r))
		if err != nil {
			return err
		}
		view, err := definitionView(c.Version)
		if err != nil {
			return err
		}
		resp := wire.WorkflowCreateResponse{WorkflowDefinition: view, Created: c.New,
			ActiveVersionID: c.Version.ActiveVersion, LatestVersionID: c.Version.LatestVersion}
		if c.HandedTo != "" {
			resp.Warnings = append(resp.Warnings, fmt.Sprintf(
				"workflow %s is now owned by %s (properties.owner): only %s or an administrator may change it or act on its runs",
				d.Workflow.ID, c.HandedTo, c.HandedTo))
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
}

// validateWorkflow is Maestro's validate action: the push's checks and dry
// run without storing anything; a valid definition answers Maestro's
// VALIDATE timeline event.
func (s *Server) validateWorkflow(decode func([]byte) (*workflow.Definition, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := s.decodeDefinition(r, decode); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, wire.ActionEvent("VALIDATE", CallerFrom(r.Context()), "the workflow definition is valid."))
		return nil
	}
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := s.cfg.Definitions.Get(r.Context(), r.PathValue("id"), r.PathValue("version"))
	if err != nil {
		return err
	}
	view, err := definitionView(v)
	if err != nil {
		return err
	}
	if enriched, err := boolQuery(r, "enriched", false); err != nil {
		return err
	} else if enriched {
		if view.EnrichedExtras, err = enrichedExtras(&v.Workflow, time.Now()); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// enrichedExtras is Maestro's WorkflowDefinitionExtras: the workflow's
// params merged with the default ones, each top-level step's params merged
// with its type's defaults, and the next fire time of each time trigger.
func enrichedExtras(wf *workflow.Workflow, now time.Time) (*wire.DefinitionExtras, error) {
	defs, err := params.WorkflowDefs(params.WorkflowInput{Workflow: wf, Now: now})
	if err != nil {
		return nil, badRequest("the workflow's params do not merge: " + err.Error())
	}
	ex := &wire.DefinitionExtras{}
	if ex.WorkflowParams, err = wire.Marshal(defs); err != nil {
		return nil, err
	}
	steps := map[string]workflow.Params{}
	for i := range wf.Steps {
		n := &wf.Steps[i]
		steps[n.ID()] = params.StepDefinitionDefs(n)
	}
	if ex.StepParams, err = wire.Marshal(steps); err != nil {
		return nil, err
	}
	for _, tt := range wf.TimeTriggers {
		c, err := schedule.Compile(tt.ScheduleTrigger())
		if err != nil {
			continue
		}
		for _, f := range c.Preview(wf.ID, now, 1) {
			ms := wire.Millis(f)
			ex.NextExecutionTimes = append(ex.NextExecutionTimes, ms)
			if ex.NextExecutionTime == nil || ms < *ex.NextExecutionTime {
				ex.NextExecutionTime = &ms
			}
		}
	}
	return ex, nil
}

// boolQuery reads a true/false query parameter.
func boolQuery(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(fmt.Sprintf("%s must be true or false, got %q", name, v))
	}
	return b, nil
}

// pageParams reads the cursor and limit query parameters of this API's own
// listings.
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

// versionSummary is a version in this API's own version listing.
type versionSummary struct {
	Version     int64  `json:"workflow_version_id"`
	Active      bool   `json:"is_active"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	StepCount   int    `json:"step_count"`
	CreatedBy   string `json:"created_by"`
	CreateTime  int64  `json:"create_time"`
}

type versionsPage struct {
	WorkflowID string           `json:"workflow_id"`
	Items      []versionSummary `json:"items"`
	Next       *int64           `json:"next_cursor,omitempty"`
}

// listVersions is this API's own listing of version summaries, newest
// first (Maestro's versions/pagination returns whole definitions).
func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := s.cfg.Definitions.Versions(r.Context(), r.PathValue("id"), cursor, limit)
	if err != nil {
		return err
	}
	out := versionsPage{WorkflowID: r.PathValue("id"), Items: make([]versionSummary, 0, len(page.Items)), Next: page.Next}
	for _, v := range page.Items {
		out.Items = append(out.Items, versionSummary{Version: v.Version, Active: v.Active, Name: v.Name,
			Description: v.Description, StepCount: v.StepCount, CreatedBy: v.CreatedBy, CreateTime: wire.Millis(v.CreateTime)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// paginateVersions is Maestro's versions/pagination: whole definitions,
// newest first, paged by version number.
func (s *Server) paginateVersions(w http.ResponseWriter, r *http.Request) error {
	pg, err := parsePagination(r, maxPaginationLimit)
	if err != nil {
		return err
	}
	latest, err := s.cfg.Definitions.Get(r.Context(), r.PathValue("id"), "latest")
	if errors.Is(err, definition.ErrNotFound) {
		writeJSON(w, http.StatusOK, emptyPage[*wire.WorkflowDefinition]())
		return nil
	}
	if err != nil {
		return err
	}
	low, high := pg.rangeOf(1, latest.LatestVersion)
	versions, err := s.cfg.Definitions.VersionRange(r.Context(), r.PathValue("id"), low, high)
	if err != nil {
		return err
	}
	views := make([]*wire.WorkflowDefinition, 0, len(versions))
	for _, v := range versions {
		view, err := definitionView(v)
		if err != nil {
			return err
		}
		views = append(views, view)
	}
	writeJSON(w, http.StatusOK, pageOf(views, 1, latest.LatestVersion, func(v *wire.WorkflowDefinition) int64 { return v.Metadata.VersionID }))
	return nil
}

// activateVersion answers Maestro's WorkflowActionResponse with the
// ACTIVATE timeline event.
func (s *Server) activateVersion(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	a, err := s.cfg.Definitions.Activate(r.Context(), id, r.PathValue("version"), s.actor(r))
	if err != nil {
		return err
	}
	prev := "none"
	if a.PreviousActiveVersion != nil {
		prev = strconv.FormatInt(*a.PreviousActiveVersion, 10)
	}
	ev := wire.ActionEvent("ACTIVATE", s.actor(r).Who(),
		"Caller [%s] activates workflow version [%s][%d], previous active version is [%s]", s.actor(r).Who(), id, *a.ActiveVersion, prev)
	writeJSON(w, http.StatusOK, wire.WorkflowActionResponse{WorkflowID: id, VersionID: *a.ActiveVersion, TimelineEvent: ev,
		ActiveVersionID: a.ActiveVersion, PreviousActive: a.PreviousActiveVersion, Changed: a.Changed})
	return nil
}

// deactivateWorkflow answers Maestro's WorkflowActionResponse (version 0)
// with the DEACTIVATE timeline event.
func (s *Server) deactivateWorkflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	a, err := s.cfg.Definitions.Deactivate(r.Context(), id, s.actor(r))
	if err != nil {
		return err
	}
	last := "none"
	if a.PreviousActiveVersion != nil {
		last = strconv.FormatInt(*a.PreviousActiveVersion, 10)
	}
	ev := wire.ActionEvent("DEACTIVATE", s.actor(r).Who(),
		"Caller [%s] deactivated workflow [%s] whose last active version is [%s]", s.actor(r).Who(), id, last)
	writeJSON(w, http.StatusOK, wire.WorkflowActionResponse{WorkflowID: id, TimelineEvent: ev,
		ActiveVersionID: a.ActiveVersion, PreviousActive: a.PreviousActiveVersion, Changed: a.Changed})
	return nil
}

// nonterminal are the statuses Maestro's overview counts instances in.
var nonterminal = []instance.WorkflowStatus{instance.WorkflowCreated, instance.WorkflowInProgress, instance.WorkflowPaused}

// workflowOverview answers Maestro's WorkflowOverviewResponse; the counts
// cover the newest definition.OverviewInstanceWindow instances.
func (s *Server) workflowOverview(w http.ResponseWriter, r *http.Request) error {
	o, err := s.cfg.Definitions.Overview(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	snap, err := snapshotView(o.PropertiesSnapshot)
	if err != nil {
		return err
	}
	st := o.Instances
	out := wire.WorkflowOverviewResponse{
		WorkflowID: o.WorkflowID, ActiveVersionID: o.ActiveVersion, LatestVersionID: o.LatestVersion,
		DefaultVersionID: o.DefaultVersion, PropertiesSnapshot: snap, StepConcurrency: workflow.DefaultStepConcurrency,
		NonterminalInstances: map[string]int64{}, FailedInstances: st.StatusCounts[string(instance.WorkflowFailed)],
		LatestInstanceID: st.LatestInstanceID, Owner: o.Owner, CreatedBy: o.CreatedBy,
		CreateTime: wire.Millis(o.CreateTime), ModifyTime: wire.Millis(o.ModifyTime),
		Instances: &wire.InstanceStats{LatestInstanceID: st.LatestInstanceID, CountedFrom: st.CountedFrom,
			StatusCounts: st.StatusCounts, LatestInstanceIDs: st.LatestInstanceIDs},
	}
	for _, status := range nonterminal {
		out.NonterminalInstances[string(status)] = st.StatusCounts[string(status)]
	}
	if o.PropertiesSnapshot != nil {
		if p, err := workflow.DecodeProperties(o.PropertiesSnapshot.Properties); err == nil && p.StepConcurrency != nil {
			out.StepConcurrency = *p.StepConcurrency
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workflowTimeline answers Maestro's WorkflowTimeline: the newest events
// (up to 300), each with its author, log and timestamp; next_cursor pages
// further back.
func (s *Server) workflowTimeline(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var cursor int64
	limit := definition.MaxTimelinePage
	if c := q.Get("cursor"); c != "" {
		var err error
		if cursor, err = strconv.ParseInt(c, 10, 64); err != nil || cursor <= 0 {
			return badRequest("cursor must be a next_cursor from an earlier page, got " + strconv.Quote(c))
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > definition.MaxTimelinePage {
			return badRequest(fmt.Sprintf("limit must be a number from 1 to %d, got %q", definition.MaxTimelinePage, l))
		}
		limit = n
	}
	page, err := s.cfg.Definitions.Timeline(r.Context(), r.PathValue("id"), cursor, limit)
	if err != nil {
		return err
	}
	out := wire.WorkflowTimeline{WorkflowID: r.PathValue("id"), TimelineEvents: page.Items, NextCursor: page.Next}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// propertiesBody is Maestro's WorkflowPropertiesUpdateRequest: the
// properties fields, and flags that put some of them back to their
// defaults.
type propertiesBody struct {
	ResetRunStrategyRule     *bool `json:"reset_run_strategy_rule"`
	ResetWorkflowConcurrency *bool `json:"reset_workflow_concurrency"`
	ResetStepConcurrency     *bool `json:"reset_step_concurrency"`
}

// updateProperties applies a properties change (unset fields are left as
// they are; the reset_* flags put fields back to their defaults) as a new
// snapshot when it changes anything, and answers the current
// PropertiesSnapshot (200).
func (s *Server) updateProperties(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := decodeJSON(data, &fields, false); err != nil {
		return badRequest("malformed request body", err.Error())
	}
	var resets propertiesBody
	for _, k := range []string{"reset_run_strategy_rule", "reset_workflow_concurrency", "reset_step_concurrency"} {
		if v, ok := fields[k]; ok {
			delete(fields, k)
			var flag bool
			if err := json.Unmarshal(v, &flag); err != nil {
				return badRequest("invalid properties", k+": expected a boolean")
			}
			switch k {
			case "reset_run_strategy_rule":
				resets.ResetRunStrategyRule = &flag
			case "reset_workflow_concurrency":
				resets.ResetWorkflowConcurrency = &flag
			default:
				resets.ResetStepConcurrency = &flag
			}
		}
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	set, err := workflow.DecodeProperties(rest)
	if err != nil {
		return err
	}
	if err := definitionValidator.ValidateProperties(set); err != nil {
		return err
	}
	change := workflow.PropertiesChange{Set: set,
		ResetRunStrategyRule:     resets.ResetRunStrategyRule != nil && *resets.ResetRunStrategyRule,
		ResetWorkflowConcurrency: resets.ResetWorkflowConcurrency != nil && *resets.ResetWorkflowConcurrency,
		ResetStepConcurrency:     resets.ResetStepConcurrency != nil && *resets.ResetStepConcurrency}
	if err := change.Check(); err != nil {
		return badRequest(err.Error())
	}
	return s.changeProperties(w, r, change)
}

// changeProperties applies a change and answers the current snapshot.
func (s *Server) changeProperties(w http.ResponseWriter, r *http.Request, change workflow.PropertiesChange) error {
	u, err := s.cfg.Definitions.UpdateProperties(r.Context(), r.PathValue("id"), change, s.actor(r))
	if err != nil {
		return err
	}
	if u.New {
		// A new run strategy applies to runs already queued at once.
		s.cfg.Runs.Readmit(r.Context(), r.PathValue("id"))
	}
	view, err := snapshotView(u.Snapshot)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// addWorkflowTag is Maestro's properties/tag: the tag joins the workflow's
// properties tags in the PLATFORM namespace, with its creator and creation
// time as attributes; a tag of the same name is replaced.
func (s *Server) addWorkflowTag(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	var tagJSON json.RawMessage
	if err := decodeJSON(data, &tagJSON, false); err != nil {
		return badRequest("malformed request body", err.Error())
	}
	wrapped, err := json.Marshal(map[string][]json.RawMessage{"tags": {tagJSON}})
	if err != nil {
		return err
	}
	p, err := workflow.DecodeProperties(wrapped)
	if err != nil {
		return err
	}
	if err := definitionValidator.ValidateProperties(p); err != nil {
		return err
	}
	if len(p.Tags) != 1 {
		return badRequest("the body must be one tag: a name or {\"name\": ...}")
	}
	tag := p.Tags[0]
	if tag.Attrs == nil {
		tag.Attrs = map[string]json.RawMessage{}
	}
	tag.Attrs["creator"], _ = wire.Marshal(s.actor(r).Who())
	tag.Attrs["created_at_milli"], _ = wire.Marshal(wire.Millis(time.Now()))
	tag.Namespace = workflow.TagNamespacePlatform
	return s.changeProperties(w, r, workflow.PropertiesChange{AddTag: &tag})
}

// deleteWorkflowTag removes a tag from the workflow's properties tags.
func (s *Server) deleteWorkflowTag(w http.ResponseWriter, r *http.Request) error {
	return s.changeProperties(w, r, workflow.PropertiesChange{RemoveTag: r.PathValue("tag")})
}

func (s *Server) getPropertiesSnapshot(w http.ResponseWriter, r *http.Request) error {
	snap, err := s.cfg.Definitions.GetSnapshot(r.Context(), r.PathValue("id"), r.PathValue("snapshot"))
	if err != nil {
		return err
	}
	view, err := snapshotView(snap)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// deletionEvent is Maestro's answer to a delete, a timeline event, with
// what the deletion did beside it.
type deletionEvent struct {
	*wire.TimelineEvent
	WorkflowID  string `json:"workflow_id"`
	Status      string `json:"status"`
	DeletedRuns int64  `json:"deleted_instance_runs"`
	DeletionID  string `json:"deletion_id,omitempty"`
}

// deleteWorkflow deletes a workflow and its instances (in the background
// for large ones, "status": "DELETING") and answers Maestro's DELETE
// timeline event (200).
func (s *Server) deleteWorkflow(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cfg.Definitions.Delete(r.Context(), r.PathValue("id"), s.actor(r))
	if err != nil {
		return err
	}
	who := s.actor(r).Who()
	msg := "Workflow [%s] and all its data have been deleted by the user [%s]"
	if d.Status == definition.StatusDeleting {
		msg = "Workflow [%s] has been deleted by the user [%s]; its instances are being deleted in the background"
	}
	writeJSON(w, http.StatusOK, deletionEvent{TimelineEvent: wire.ActionEvent("DELETE", who, msg, d.WorkflowID, who),
		WorkflowID: d.WorkflowID, Status: d.Status, DeletedRuns: d.DeletedRuns, DeletionID: d.DeletionID})
	return nil
}

// listWorkflows lists and searches workflows in id order: prefix (an id
// prefix), owner, q (text in the id, name or description) filter them;
// cursor is the next_cursor of an earlier page.
func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := definition.DefaultPageSize
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > definition.MaxPageSize {
			return badRequest(fmt.Sprintf("limit must be a number from 1 to %d, got %q", definition.MaxPageSize, l))
		}
		limit = n
	}
	f := definition.WorkflowFilter{Prefix: q.Get("prefix"), Owner: q.Get("owner"), Text: q.Get("q")}
	for name, v := range map[string]string{"prefix": f.Prefix, "owner": f.Owner, "q": f.Text, "cursor": q.Get("cursor")} {
		if len(v) > workflow.MaxIDLength*4 {
			return badRequest(fmt.Sprintf("%s is longer than %d bytes", name, workflow.MaxIDLength*4))
		}
	}
	items, more, err := s.cfg.Definitions.ListWorkflows(r.Context(), f, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	out := wire.WorkflowList{Items: make([]wire.WorkflowSummary, 0, len(items))}
	for _, it := range items {
		props := map[string]json.RawMessage{}
		_ = json.Unmarshal(it.Properties, &props) // stored by this API as an object
		if rs, ok := props["run_strategy"]; ok {
			props["run_strategy"] = runStrategyObject(rs)
		}
		sum := wire.WorkflowSummary{WorkflowID: it.WorkflowID, Name: it.Name, Description: it.Description, Owner: it.Owner,
			IsActive: it.ActiveVersion != nil, ActiveVersionID: it.ActiveVersion, LatestVersionID: it.LatestVersion,
			DefaultVersionID: it.DefaultVersion(), LatestInstanceID: it.LatestInstanceID, CreatedBy: it.CreatedBy,
			CreateTime: wire.Millis(it.CreateTime), ModifyTime: wire.Millis(it.ModifyTime)}
		if string(it.Tags) != "[]" {
			sum.Tags = it.Tags
		}
		if len(props) > 0 {
			sum.Properties, _ = wire.Marshal(props)
		}
		out.Items = append(out.Items, sum)
	}
	if more {
		next := items[len(items)-1].WorkflowID
		out.Next = &next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
