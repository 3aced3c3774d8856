package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/wire"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func (s *Server) instanceRoutes() {
	for _, rt := range s.instanceRouteTable() {
		s.handle(rt.pattern, rt.handler)
	}
	s.runControlRoutes()
}

func (s *Server) instanceRouteTable() []route {
	return []route{
		{"POST /api/v3/workflows/{id}/versions/{version}/actions/start", s.startRun},
		{"GET /api/v3/workflows/{id}/instances", s.listInstances},
		{"GET /api/v3/workflows/{id}/instances/{iid}", s.getInstance},
		{"GET /api/v3/workflows/{id}/instances/{iid}/runs", s.listRuns},
		{"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}", s.getInstance},
		{"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps", s.listSteps},
		{"GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/attempts/{attempt}", s.getAttempt},
		{"GET /api/v3/workflows/{id}/instances/{iid}/steps", s.listLatestSteps},
		{"GET /api/v3/workflows/{id}/instances/{iid}/steps/{step}", s.getLatestStep},
		{"GET /api/v3/workflows/{id}/instances/{iid}/inline-path", s.inlinePath},
		{"GET /api/v3/workflows/{id}/instances/{iid}/archive", s.getArchivedRun},
		{"GET /api/v3/workflows/instances/inline-workflow-id", s.inlineWorkflowID},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/stop", s.actOn(run.ActionStop)},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/kill", s.actOn(run.ActionKill)},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/stop", s.actOn(run.ActionStop)},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/kill", s.actOn(run.ActionKill)},
		{"PUT /api/v3/workflows/{id}/actions/stop", s.actOnAll(run.ActionStop)},
		{"PUT /api/v3/workflows/{id}/actions/kill", s.actOnAll(run.ActionKill)},
	}
}

// startBody is the body of a start request: Maestro's WorkflowStartRequest.
// Unknown fields are refused.
type startBody struct {
	RunParams workflow.Params `json:"run_params"`
	RequestID string          `json:"request_id"`
	// Initiator may only say MANUAL: its user is the caller, whatever the
	// body claims (manualInitiator).
	Initiator map[string]any `json:"initiator"`
	// RequestTime (epoch milliseconds) is accepted as Maestro clients send
	// it; the run's create_time is the server's clock.
	RequestTime *int64 `json:"request_time"`
	// PersistFailedRun is accepted: a run whose params fail to evaluate is
	// always kept, FAILED, with the reason on its timeline.
	PersistFailedRun *bool `json:"persist_failed_run"`
	// RuntimeTags are added to the run's workflow tags and kept in its
	// run_config, Artifacts kept as the run's artifacts, as Maestro does.
	RuntimeTags workflow.Tags   `json:"runtime_tags"`
	Artifacts   json.RawMessage `json:"artifacts"`
}

// unsupported refuses a non-empty value of a Maestro field that is not
// implemented.
func unsupported(field string, raw json.RawMessage) error {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "[]", "{}":
		return nil
	}
	return badRequest(field + " is not supported by this Maestro implementation; send it empty or leave it out")
}

// manualInitiator is the initiator of a run a caller starts or restarts
// through the API: Maestro's MANUAL initiator with the caller as its user.
// A body may name the type (any case) but never the user: a user in the
// body is replaced by the caller. Other initiator types are set by Maestro
// itself (triggers, subworkflows, foreach and while).
func manualInitiator(body map[string]any, caller string) (map[string]any, error) {
	if t, ok := body["type"]; ok {
		name, _ := t.(string)
		if !strings.EqualFold(name, "MANUAL") {
			return nil, badRequest(fmt.Sprintf("initiator.type %v cannot be set through the API; a run started or restarted by a caller is MANUAL", t))
		}
	}
	return execution.ManualInitiator(caller), nil
}

// startRun starts a run and answers Maestro's WorkflowStartResponse (200):
// CREATED, DUPLICATED for a repeated request_id (the first run), or
// STOPPED when the FIRST_ONLY run strategy dropped it.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request) error {
	var body startBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := workflowParamsValid(body.RunParams); err != nil {
		return err
	}
	initiator, err := manualInitiator(body.Initiator, CallerFrom(r.Context()))
	if err != nil {
		return err
	}
	res, err := s.cfg.Runs.Start(r.Context(), execution.StartRequest{
		WorkflowID: r.PathValue("id"), Version: r.PathValue("version"),
		RunParams: body.RunParams, RequestID: body.RequestID, Initiator: initiator,
		RuntimeTags: body.RuntimeTags, Artifacts: body.Artifacts, Authorize: s.decideUnderLock(r),
	})
	if err != nil {
		return err
	}
	status := wire.RunCreated
	if res.Duplicated {
		status = wire.RunDuplicated
	} else if res.Instance.Status == instance.WorkflowStopped {
		status = wire.RunStopped // dropped by the FIRST_ONLY run strategy
	}
	writeJSON(w, http.StatusOK, startResponse(res.Instance, status,
		wire.LogEvent("Manually run a new workflow instance by a user [%s]", CallerFrom(r.Context()))))
	return nil
}

// decideUnderLock returns the authorization authorize left to the handler
// (access.underLock): a func that decides the caller's role on the
// workflow in the path, given its owner and operators as the handler's
// transaction locked it. It is nil when authorize decided already (no
// caller, an administrator's route, ...). A workflow the lock does not
// find is not decided: the handler answers 404, as it would after
// authorize.
func (s *Server) decideUnderLock(r *http.Request) func(owner string, operators []string) error {
	role, ok := r.Context().Value(underLockKey{}).(authz.Role)
	if !ok {
		return nil
	}
	caller, id := CallerFrom(r.Context()), r.PathValue("id")
	return func(owner string, operators []string) error {
		return s.policy.Decide(caller, role, authz.Target{Kind: "workflow", ID: id, Exists: true, Owner: owner, Operators: operators})
	}
}

// startResponse is Maestro's answer to a start or a restart.
func startResponse(inst *execution.Instance, status string, ev *wire.TimelineEvent) wire.WorkflowStartResponse {
	return wire.WorkflowStartResponse{WorkflowID: inst.WorkflowID, VersionID: inst.Version, InstanceID: inst.InstanceID,
		RunID: inst.RunID, UUID: inst.UUID, Status: status, TimelineEvent: ev}
}

// workflowParamsValid checks run params' shape: types known, one of value
// or expression.
func workflowParamsValid(ps workflow.Params) error {
	if len(ps) == 0 {
		return nil
	}
	d := &workflow.Definition{Workflow: workflow.Workflow{ID: "run_params", Params: ps, Steps: []workflow.StepNode{{Step: &workflow.Step{StepCommon: workflow.StepCommon{ID: "s"}, Type: "NoOp"}}}}}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		var ve *workflow.ValidationError
		if errors.As(err, &ve) {
			details := make([]string, 0, len(ve.Problems))
			for _, p := range ve.Problems {
				details = append(details, p.Path+": "+p.Message)
			}
			return badRequest("invalid run_params", details...)
		}
		return badRequest("invalid run_params: " + err.Error())
	}
	return nil
}

// getInstance answers Maestro's WorkflowInstance: the latest run with the
// aggregated view of all runs (instances/{iid}), or one run (runs/{run},
// a number or latest; its aggregated view with ?aggregated=true).
func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	var run int64
	aggregated := true
	if r.PathValue("run") != "" {
		if r.PathValue("run") != "latest" {
			if run, err = pathInt(r, "run"); err != nil {
				return err
			}
		}
		if aggregated, err = boolQuery(r, "aggregated", false); err != nil {
			return err
		}
	}
	inst, err := s.cfg.Runs.Detail(r.Context(), r.PathValue("id"), iid, run)
	if errors.Is(err, execution.ErrNotFound) && s.cfg.Archive != nil {
		return s.archivedInstance(w, r, r.PathValue("id"), iid, run, err)
	}
	if err != nil {
		return err
	}
	if !aggregated {
		inst.AggregatedInfo = nil
	}
	view, err := instanceView(inst)
	if err != nil {
		return err
	}
	if view.InternalID, err = s.internalID(r.Context(), inst.WorkflowID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// internalID is the internal id of the workflow a run belongs to (of the
// root workflow for a foreach or while iteration's run); nil when the
// workflow is gone.
func (s *Server) internalID(ctx context.Context, workflowID string) (*int64, error) {
	id, err := s.cfg.Definitions.InternalID(ctx, instance.RootWorkflowID(workflowID))
	if errors.Is(err, definition.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// instancePage is a PaginationResult of runs, each with its aggregated
// view when aggregated is set.
func (s *Server) instancePage(r *http.Request, runs []*execution.Instance, aggregated bool, earliest, latest int64,
	idOf func(*wire.WorkflowInstance) int64) (wire.PaginationResult[*wire.WorkflowInstance], error) {
	views := make([]*wire.WorkflowInstance, 0, len(runs))
	internalIDs := map[string]*int64{} // by workflow id: a page is mostly one workflow's runs
	for _, inst := range runs {
		if aggregated {
			var err error
			if inst.AggregatedInfo, err = s.cfg.Runs.Aggregate(r.Context(), inst); err != nil {
				return wire.PaginationResult[*wire.WorkflowInstance]{}, err
			}
		}
		view, err := instanceView(inst)
		if err != nil {
			return wire.PaginationResult[*wire.WorkflowInstance]{}, err
		}
		id, seen := internalIDs[inst.WorkflowID]
		if !seen {
			if id, err = s.internalID(r.Context(), inst.WorkflowID); err != nil {
				return wire.PaginationResult[*wire.WorkflowInstance]{}, err
			}
			internalIDs[inst.WorkflowID] = id
		}
		view.InternalID = id
		views = append(views, view)
	}
	return pageOf(views, earliest, latest, idOf), nil
}

// listInstances is Maestro's instance listing: the latest run of each
// instance, a PaginationResult paged by instance id (first, last, cursor;
// this API also takes limit), with their aggregated views unless
// aggregated=false.
func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) error {
	pg, err := parsePagination(r, maxPaginationLimit)
	if err != nil {
		return err
	}
	aggregated, err := boolQuery(r, "aggregated", true)
	if err != nil {
		return err
	}
	b, err := s.cfg.Runs.InstanceBounds(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.answerInstancePage(w, r, pg, b, aggregated, func(low, high int64) ([]*execution.Instance, error) {
		return s.cfg.Runs.InstancesBetween(r.Context(), r.PathValue("id"), low, high)
	}, func(v *wire.WorkflowInstance) int64 { return v.InstanceID })
}

// answerInstancePage answers the page pg asks for of the ids in b as
// Maestro's PaginationResult of WorkflowInstance: between reads the runs
// of an id range, key is the id a run is paged by.
func (s *Server) answerInstancePage(w http.ResponseWriter, r *http.Request, pg pagination, b execution.Bounds, aggregated bool,
	between func(low, high int64) ([]*execution.Instance, error), key func(*wire.WorkflowInstance) int64) error {
	if b.High == 0 {
		writeJSON(w, http.StatusOK, emptyPage[*wire.WorkflowInstance]())
		return nil
	}
	low, high := pg.rangeOf(b.Low, b.High)
	runs, err := between(low, high)
	if err != nil {
		return err
	}
	page, err := s.instancePage(r, runs, aggregated, b.Low, b.High, key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// listRuns is Maestro's listing of an instance's runs, paged by run id.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	pg, err := parsePagination(r, maxPaginationLimit)
	if err != nil {
		return err
	}
	b, err := s.cfg.Runs.RunBounds(r.Context(), r.PathValue("id"), iid)
	if err != nil {
		return err
	}
	return s.answerInstancePage(w, r, pg, b, false, func(low, high int64) ([]*execution.Instance, error) {
		return s.cfg.Runs.RunsBetween(r.Context(), r.PathValue("id"), iid, low, high)
	}, func(v *wire.WorkflowInstance) int64 { return v.RunID })
}

// stepViews turns attempts into Maestro's StepInstances, sorted by step
// ordinal (step_instance_id). Each attempt's run is read once.
func (s *Server) stepViews(r *http.Request, attempts []*execution.StepAttempt) ([]*wire.StepInstance, error) {
	out := make([]*wire.StepInstance, 0, len(attempts))
	if len(attempts) == 0 {
		return out, nil
	}
	owner, err := s.cfg.Definitions.Owner(r.Context(), instance.RootWorkflowID(attempts[0].WorkflowID))
	if err != nil && !errors.Is(err, definition.ErrNotFound) {
		return nil, err
	}
	runs := map[int64]*stepContext{}
	for _, a := range attempts {
		c, ok := runs[a.RunID]
		if !ok {
			run, err := s.cfg.Runs.Run(r.Context(), a.WorkflowID, a.InstanceID, a.RunID)
			if err != nil {
				return nil, err
			}
			c = newStepContext(run, owner)
			if err := s.loadSignalOutputs(r.Context(), c); err != nil {
				return nil, err
			}
			runs[a.RunID] = c
		}
		out = append(out, c.stepView(a))
	}
	slices.SortStableFunc(out, func(a, b *wire.StepInstance) int {
		switch {
		case a.StepInstanceID != b.StepInstanceID:
			return int(a.StepInstanceID - b.StepInstanceID)
		}
		return strings.Compare(a.StepID, b.StepID)
	})
	return out, nil
}

// listSteps is Maestro's step instances of a run: the latest attempt of
// each step, a JSON array.
func (s *Server) listSteps(w http.ResponseWriter, r *http.Request) error {
	iid, run, err := pathRun(r)
	if err != nil {
		return err
	}
	return s.answerSteps(w, r, iid, run, func(ctx context.Context) ([]*execution.StepAttempt, error) {
		return s.cfg.Runs.Steps(ctx, r.PathValue("id"), iid, run)
	})
}

// answerSteps answers the steps load reads of run (0: the latest) of an
// instance as a JSON array of Maestro's StepInstance; 404 when there is
// no such run.
func (s *Server) answerSteps(w http.ResponseWriter, r *http.Request, iid, runID int64,
	load func(context.Context) ([]*execution.StepAttempt, error)) error {
	if _, err := s.cfg.Runs.Run(r.Context(), r.PathValue("id"), iid, runID); err != nil {
		return err
	}
	steps, err := load(r.Context())
	if err != nil {
		return err
	}
	views, err := s.stepViews(r, steps)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, views)
	return nil
}

// listLatestSteps is Maestro's step instances of an instance: each step's
// newest attempt across all runs.
func (s *Server) listLatestSteps(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	return s.answerSteps(w, r, iid, 0, func(ctx context.Context) ([]*execution.StepAttempt, error) {
		return s.cfg.Runs.LatestSteps(ctx, r.PathValue("id"), iid, "")
	})
}

// getLatestStep is Maestro's step instance view: a step's newest attempt
// across all runs of the instance.
func (s *Server) getLatestStep(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	steps, err := s.cfg.Runs.LatestSteps(r.Context(), r.PathValue("id"), iid, r.PathValue("step"))
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		return notFound(fmt.Sprintf("step %s of workflow instance %s/%d not found", r.PathValue("step"), r.PathValue("id"), iid))
	}
	views, err := s.stepViews(r, steps)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, views[0])
	return nil
}

// getAttempt is Maestro's step instance: one attempt (a number or latest).
func (s *Server) getAttempt(w http.ResponseWriter, r *http.Request) error {
	iid, run, err := pathRun(r)
	if err != nil {
		return err
	}
	var attempt int64
	if r.PathValue("attempt") != "latest" {
		if attempt, err = pathInt(r, "attempt"); err != nil {
			return err
		}
	}
	a, err := s.cfg.Runs.Attempt(r.Context(), r.PathValue("id"), iid, run, r.PathValue("step"), attempt)
	if err != nil {
		return err
	}
	views, err := s.stepViews(r, []*execution.StepAttempt{a})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, views[0])
	return nil
}

// actionStatus is the status a stop or kill ends a run in.
var actionStatus = map[run.Action]instance.WorkflowStatus{run.ActionStop: instance.WorkflowStopped, run.ActionKill: instance.WorkflowFailed}

// actOn stops or kills the latest run of an instance (runs/{run}: that
// run, which must be the latest) and answers Maestro's
// WorkflowInstanceActionResponse: accepted and still running, or done
// already when the run is in the action's status.
func (s *Server) actOn(action run.Action) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		iid, err := pathInt(r, "iid")
		if err != nil {
			return err
		}
		latest, err := s.latestRunToAct(r, iid, strings.ToUpper(string(action)))
		if err != nil {
			return err
		}
		ev := wire.LogEvent("User [%s] take an action to %s the running workflow instance run",
			CallerFrom(r.Context()), strings.ToUpper(string(action)))
		resp := wire.WorkflowInstanceActionResponse{WorkflowID: latest.WorkflowID, InstanceID: latest.InstanceID,
			RunID: latest.RunID, TimelineEvent: ev}
		if latest.Status == actionStatus[action] {
			resp.InstanceStatus, resp.Info, resp.Completed = string(latest.Status), wire.InfoCompleted, true
			writeJSON(w, http.StatusOK, resp)
			return nil
		}
		inst, err := s.cfg.Runs.Act(r.Context(), r.PathValue("id"), iid, latest.RunID, action)
		if err != nil {
			return err
		}
		resp.InstanceStatus, resp.Info = string(inst.Status), wire.InfoAccepted
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
}

// actOnAll stops or kills every live run of a workflow and answers
// Maestro's timeline event (202); info is how many runs it acted on.
func (s *Server) actOnAll(action run.Action) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := s.cfg.Definitions.Get(r.Context(), r.PathValue("id"), "latest"); err != nil {
			return err
		}
		n, err := s.cfg.Runs.ActOnAll(r.Context(), r.PathValue("id"), action)
		if err != nil {
			return err
		}
		count := int64(n)
		ev := wire.ActionEvent(strings.ToUpper(string(action)), CallerFrom(r.Context()),
			"Terminated [%d] workflow instances for workflow [%s] by the user [%s] with the action [%s]",
			n, r.PathValue("id"), CallerFrom(r.Context()), strings.ToUpper(string(action)))
		ev.Info = &count
		writeJSON(w, http.StatusAccepted, ev)
		return nil
	}
}

func pathInt(r *http.Request, name string) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest(name + " must be a positive integer, got " + strconv.Quote(r.PathValue(name)))
	}
	return n, nil
}

// pathRunOrLatest is pathRun where the run may be "latest" or absent (a
// route without {run}): run 0, the latest.
func pathRunOrLatest(r *http.Request) (iid, runID int64, err error) {
	if iid, err = pathInt(r, "iid"); err != nil {
		return 0, 0, err
	}
	if v := r.PathValue("run"); v != "latest" && v != "" {
		if runID, err = pathInt(r, "run"); err != nil {
			return 0, 0, err
		}
	}
	return iid, runID, nil
}

// pathRun reads the {iid} and {run} path values.
func pathRun(r *http.Request) (iid, runID int64, err error) {
	if iid, err = pathInt(r, "iid"); err != nil {
		return 0, 0, err
	}
	if runID, err = pathInt(r, "run"); err != nil {
		return 0, 0, err
	}
	return iid, runID, nil
}
