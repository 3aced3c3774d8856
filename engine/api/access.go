package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/jobtemplate"
	"github.com/maestro-aws/maestro/engine/tagpermit"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// access is what a route requires of its caller: a role and, for
// authz.Owner, the resource whose owner it means.
type access struct {
	role authz.Role
	// target finds the resource the request acts on. It may return a
	// request to use instead of r (with a body read ahead, or a decoded
	// definition in its context).
	target func(s *Server, r *http.Request) (authz.Target, *http.Request, error)
	// underLock: the handler decides, with the workflow in the path as its
	// own transaction locks it (decideUnderLock), rather than authorize
	// reading it first: a start's authorization costs no statement and
	// sees the access as of the lock.
	underLock bool
}

// routeAccess is the one table of who may call which route
// (docs/security.md). Every route is listed; a route registered without an
// entry gets defaultAccess, and a test requires an entry for every route
// that changes anything.
var routeAccess = map[string]access{
	"GET /api/v3/health":       public,
	"GET /api/v3/openapi.json": public,
	// The web UI's static files: the pages hold no data; the API calls
	// they make are checked as any other.
	"GET /ui":        public,
	"GET /ui/":       public,
	"GET /ui/{file}": public,
	// The API reference page: it renders the public openapi.json.
	"GET /api/v3/docs": public,

	// Workflow definitions: pushing a workflow that exists needs its owner.
	"POST /api/v3/workflows":                                         {role: authz.Owner, target: pushedWorkflow(workflow.DecodeJSON)},
	"POST /api/v3/workflows/yaml":                                    {role: authz.Owner, target: pushedWorkflow(workflow.DecodeYAML)},
	"PUT /api/v3/workflows/actions/validate":                         reader,
	"PUT /api/v3/workflows/actions/validate/yaml":                    reader,
	"PUT /api/v3/workflows/{id}/versions/{version}/actions/activate": workflowOwner,
	"PUT /api/v3/workflows/{id}/actions/deactivate":                  workflowOwner,
	"POST /api/v3/workflows/{id}/properties":                         workflowOwner,
	"POST /api/v3/workflows/{id}/properties/tag":                     workflowOwner,
	"DELETE /api/v3/workflows/{id}/properties/tag/{tag}":             workflowOwner,
	"DELETE /api/v3/workflows/{id}":                                  workflowOwner,

	// Runs.
	"POST /api/v3/workflows/{id}/versions/{version}/actions/start":          workflowOperatorUnderLock,
	"PUT /api/v3/workflows/{id}/instances/{iid}/actions/stop":               workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/actions/kill":               workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/stop":    workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/kill":    workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/unblock": workflowOperator,
	"PUT /api/v3/workflows/{id}/actions/stop":                               workflowOperator,
	"PUT /api/v3/workflows/{id}/actions/kill":                               workflowOperator,
	"POST /api/v3/workflows/{id}/instances/{iid}/actions/restart":           workflowOperator,
	"PUT /api/v3/workflows/{id}/actions/unblock":                            workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/actions/unblock":            workflowOperator,

	// Step actions: Maestro's act on the latest run; the run-scoped ones
	// are this API's own.
	"POST /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/restart":                        workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/stop":                            workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/kill":                            workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/skip":                            workflowOperator,
	"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/bypass":                          workflowOperator,
	"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/restart":             workflowOperator,
	"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/skip":                workflowOperator,
	"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/stop":                workflowOperator,
	"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/kill":                workflowOperator,
	"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/bypass-dependencies": workflowOperator,

	// Backfills start and stop runs of their workflow.
	"POST /api/v3/workflows/{id}/backfills": workflowOperator,
	// Moving a watermark changes what the workflow's runs process.
	"POST /api/v3/workflows/{id}/watermarks/reset":          workflowOwner,
	"POST /api/v3/backfills/{backfill_id}/actions/{action}": {role: authz.Operator, target: backfillInPath},
	"GET /api/v3/workflows/{id}/backfills":                  reader,
	"GET /api/v3/backfills/{backfill_id}":                   reader,

	// Breakpoints: the workflow is named in the body, the query or the path.
	"POST /api/v3/workflows/steps/breakpoints":   {role: authz.Operator, target: workflowInBody},
	"DELETE /api/v3/workflows/steps/breakpoints": {role: authz.Operator, target: workflowInQuery},

	"PUT /api/v3/workflows/steps/breakpoints/{id}/instances/{iid}/runs/{run}/steps/{step}/attempts/{attempt}/actions/resume": workflowOperator,

	// Tag permits: creating a new tag is open; its creator owns it.
	"POST /api/v3/tag-permits":         {role: authz.Owner, target: tagPermitInBody},
	"DELETE /api/v3/tag-permits/{tag}": {role: authz.Owner, target: tagPermitInPath},

	// Job templates: creating a new job type is open; who created its
	// first template owns it.
	"POST /api/v3/job-templates":          {role: authz.Owner, target: jobTemplateInBody(jobTemplateTypeInJSON)},
	"POST /api/v3/job-templates/yaml":     {role: authz.Owner, target: jobTemplateInBody(jobTemplateTypeInYAML)},
	"DELETE /api/v3/job-templates/{type}": {role: authz.Owner, target: jobTemplateInPath},

	// Open to every caller: the attempt's step token (which only its job
	// receives; checkStepToken) proves the caller runs the attempt;
	// signals are broadcast.
	"PUT /api/v3/output-data":       reader,
	"PUT /api/v3/step-completion":   reader,
	"POST /api/v3/signals":          reader,
	"POST /api/v3/signals/messages": reader,
	// Previewing a schedule computes and stores nothing.
	"POST /api/v3/time-triggers/preview": reader,

	// Reads.
	"GET /api/v3/workflows":                                                                                   reader,
	"GET /api/v3/workflows/{id}/versions/pagination":                                                          reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/runs":                                                         reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/steps":                                                        reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/steps/{step}":                                                 reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/inline-path":                                                  reader,
	"GET /api/v3/workflows/instances/inline-workflow-id":                                                      reader,
	"GET /api/v3/workflows/instances/action-map":                                                              reader,
	"GET /api/v3/workflows/steps/instances/action-map":                                                        reader,
	"GET /api/v3/job-templates":                                                                               reader,
	"GET /api/v3/job-templates/{type}":                                                                        reader,
	"GET /api/v3/views/flatten/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}":                        reader,
	"GET /api/v3/views/flatten/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/iterations/{iteration}": reader,
	"GET /api/v3/views/flatten/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/summary":                reader,
	"GET /api/v3/workflows/{id}/versions":                                                                     reader,
	"GET /api/v3/workflows/{id}/versions/{version}":                                                           reader,
	"GET /api/v3/workflows/{id}/overview":                                                                     reader,
	"GET /api/v3/workflows/{id}/timeline":                                                                     reader,
	"GET /api/v3/workflows/{id}/properties-snapshot/{snapshot}":                                               reader,
	"GET /api/v3/workflows/{id}/instances":                                                                    reader,
	"GET /api/v3/workflows/{id}/instances/{iid}":                                                              reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}":                                                   reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps":                                             reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/attempts/{attempt}":                   reader,
	"GET /api/v3/instances/action-map":                                                                        reader,
	"GET /api/v3/steps/instances/action-map":                                                                  reader,
	"GET /api/v3/tag-permits":                                                                                 reader,
	"GET /api/v3/tag-permits/{tag}":                                                                           reader,
	"GET /api/v3/workflows/steps/breakpoints":                                                                 reader,
	"GET /api/v3/workflows/steps/breakpoints/paused-step-attempts":                                            reader,
	"GET /api/v3/signals/{name}/instances/latest":                                                             reader,
	"GET /api/v3/signals/{name}/instances/{seq}":                                                              reader,
	"GET /api/v3/signals/{name}/instances":                                                                    reader,
	"GET /api/v3/signals/{name}/instances/{seq}/lineage":                                                      reader,
	"GET /api/v3/workflows/{id}/signal-triggers":                                                              reader,
	"GET /api/v3/workflows/{id}/watermarks":                                                                   reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/signals":                                           reader,
	"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/signals":                              reader,
}

// The common accesses.
var (
	public        = access{role: authz.Public}
	reader        = access{role: authz.Reader}
	workflowOwner = access{role: authz.Owner, target: workflowInPath}
	// workflowOperator acts on the runs of the workflow in the path: its
	// owner, an administrator or an operator it names.
	workflowOperator = access{role: authz.Operator, target: workflowInPath}
	// workflowOperatorUnderLock is workflowOperator decided by the handler
	// under the workflow's lock (access.underLock).
	workflowOperatorUnderLock = access{role: authz.Operator, target: workflowInPath, underLock: true}
)

// defaultAccess is the access of a route missing from routeAccess: reads
// are open to every authenticated caller; a change to a workflow named in
// the path needs its owner; any other change needs an administrator.
func defaultAccess(pattern string) access {
	method, path, _ := strings.Cut(pattern, " ")
	switch {
	case method == http.MethodGet || method == http.MethodHead:
		return reader
	case strings.HasPrefix(path, "/api/v3/workflows/{id}/"):
		return workflowOwner
	}
	return access{role: authz.Admin}
}

// accessFor returns the access the route needs.
func accessFor(pattern string) access {
	if a, ok := routeAccess[pattern]; ok {
		return a
	}
	return defaultAccess(pattern)
}

// authorize checks the caller against the route's access before its
// handler runs. It returns the request the handler gets.
func (s *Server) authorize(r *http.Request, a access) (*http.Request, error) {
	caller := CallerFrom(r.Context())
	if a.role == authz.Public {
		return r, nil
	}
	if a.underLock && caller != "" {
		if id := r.PathValue("id"); id != "" && instance.RootWorkflowID(id) == id {
			return r.WithContext(context.WithValue(r.Context(), underLockKey{}, a.role)), nil
		}
	}
	var target authz.Target
	if (a.role == authz.Owner || a.role == authz.Operator) && caller != "" {
		t, r2, err := a.target(s, r)
		if err != nil {
			return r, err
		}
		target, r = t, r2
	}
	if err := s.policy.Decide(caller, a.role, target); err != nil {
		return r, err
	}
	return r, nil
}

type underLockKey struct{}

// workflowTarget looks up the owner of a workflow. Iteration runs of a
// foreach or while step (wf:1:loop) belong to their root workflow. A
// workflow that does not exist has no owner: the handler answers 404, or
// creates it.
func (s *Server) workflowTarget(ctx context.Context, id string) (authz.Target, error) {
	id = instance.RootWorkflowID(id)
	t := authz.Target{Kind: "workflow", ID: id}
	if id == "" {
		return t, nil
	}
	acc, err := s.cfg.Definitions.Access(ctx, id)
	switch {
	case errors.Is(err, definition.ErrNotFound):
		return t, nil
	case err != nil:
		return t, err
	}
	t.Exists, t.Owner, t.Operators = true, acc.Owner, acc.Operators
	return t, nil
}

func workflowInPath(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	t, err := s.workflowTarget(r.Context(), r.PathValue("id"))
	return t, r, err
}

func workflowInQuery(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	q := r.URL.Query()
	id := q.Get("workflowId")
	if id == "" {
		id = q.Get("workflow_id")
	}
	t, err := s.workflowTarget(r.Context(), id)
	return t, r, err
}

// workflowInBody reads the body ahead for its workflow_id, decoded as the
// handler decodes it, and hands the handler the same bytes.
func workflowInBody(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	var body struct {
		WorkflowID string `json:"workflow_id"`
	}
	r, err := peekBody(r, &body)
	if err != nil {
		return authz.Target{}, r, err
	}
	t, err := s.workflowTarget(r.Context(), body.WorkflowID)
	return t, r, err
}

// pushedWorkflow decodes and validates a pushed definition ahead of the
// handler (which takes it from the context) to learn which workflow it
// changes.
func pushedWorkflow(decode func([]byte) (*workflow.Definition, error)) func(*Server, *http.Request) (authz.Target, *http.Request, error) {
	return func(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
		d, err := s.decodeDefinition(r, decode)
		if err != nil {
			return authz.Target{}, r, err
		}
		t, err := s.workflowTarget(r.Context(), d.Workflow.ID)
		return t, r.WithContext(context.WithValue(r.Context(), definitionKey{}, d)), err
	}
}

type definitionKey struct{}

// pushed returns the definition pushedWorkflow decoded, or decodes it.
func (s *Server) pushed(r *http.Request, decode func([]byte) (*workflow.Definition, error)) (*workflow.Definition, error) {
	if d, ok := r.Context().Value(definitionKey{}).(*workflow.Definition); ok {
		return d, nil
	}
	return s.decodeDefinition(r, decode)
}

// tagPermitTarget looks up who created a tag permit: its owner.
func (s *Server) tagPermitTarget(ctx context.Context, tag string) (authz.Target, error) {
	t := authz.Target{Kind: "tag permit", ID: tag}
	owner, ok, err := tagpermit.NewStore(s.cfg.DB).Owner(ctx, tag)
	if err != nil || !ok {
		return t, err
	}
	t.Exists, t.Owner = true, owner
	return t, nil
}

func tagPermitInPath(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	t, err := s.tagPermitTarget(r.Context(), r.PathValue("tag"))
	return t, r, err
}

func tagPermitInBody(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	var body struct {
		Tag string `json:"tag"`
	}
	r, err := peekBody(r, &body)
	if err != nil {
		return authz.Target{}, r, err
	}
	t, err := s.tagPermitTarget(r.Context(), body.Tag)
	return t, r, err
}

// peekBody decodes the body into v as the handler will (decodeJSON; a body
// the handler refuses may leave v empty) and returns a request whose body
// reads the same bytes again.
func peekBody(r *http.Request, v any) (*http.Request, error) {
	data, err := readRaw(r)
	if err != nil {
		return r, err
	}
	_ = decodeJSON(data, v, false) // the handler reports what is wrong with it
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(data))
	return r2, nil
}

// jobTemplateTarget looks up who owns a job type's templates.
func (s *Server) jobTemplateTarget(ctx context.Context, jobType string) (authz.Target, error) {
	t := authz.Target{Kind: "job template", ID: jobType}
	owner, ok, err := jobtemplate.NewStore(s.cfg.DB).Owner(ctx, jobType)
	if err != nil || !ok {
		return t, err
	}
	t.Exists, t.Owner = true, owner
	return t, nil
}

func jobTemplateInPath(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	t, err := s.jobTemplateTarget(r.Context(), r.PathValue("type"))
	return t, r, err
}

// jobTemplateTypeInJSON and jobTemplateTypeInYAML read the job type a
// job template request names (empty when it names none).
func jobTemplateTypeInJSON(data []byte) string {
	var body struct {
		Definition struct {
			JobType string `json:"job_type"`
		} `json:"definition"`
	}
	_ = decodeJSON(data, &body, false) // the handler reports what is wrong with it
	return body.Definition.JobType
}

func jobTemplateTypeInYAML(data []byte) string {
	var body struct {
		Definition struct {
			JobType string `yaml:"job_type"`
		} `yaml:"definition"`
	}
	_ = yaml.Unmarshal(data, &body) // the handler reports what is wrong with it
	return body.Definition.JobType
}

// jobTemplateInBody reads the body ahead for the job type it names.
func jobTemplateInBody(jobType func([]byte) string) func(*Server, *http.Request) (authz.Target, *http.Request, error) {
	return func(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
		data, err := readRaw(r)
		if err != nil {
			return authz.Target{}, r, err
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(data))
		t, err := s.jobTemplateTarget(r.Context(), jobType(data))
		return t, r2, err
	}
}
