package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flatten"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/wire"
)

// flattenRoutes registers Maestro's foreach flatten views (its
// maestro-extensions service).
func (s *Server) flattenRoutes() {
	const base = "/api/v3/views/flatten/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}"
	s.handle("GET "+base, s.listStepIterations)
	s.handle("GET "+base+"/iterations/{iteration}", s.getStepIteration)
	s.handle("GET "+base+"/summary", s.stepIterationsSummary)
}

// stepIterations reads every iteration of the step in the run named by
// the path.
func (s *Server) stepIterations(r *http.Request) ([]flatten.Iteration, error) {
	iid, run, err := pathRun(r)
	if err != nil {
		return nil, err
	}
	inst, err := s.cfg.Runs.Run(r.Context(), r.PathValue("id"), iid, run)
	if err != nil {
		return nil, err
	}
	wf := decodeRuntime(inst.Definition)
	if wf == nil {
		return nil, fmt.Errorf("decode the runtime workflow of %s/%d/%d", inst.WorkflowID, iid, run)
	}
	return flatten.Iterations(r.Context(), s.cfg.DB, wf, inst.WorkflowID, iid, run, r.PathValue("step"))
}

// iterationView is an iteration as Maestro's StepIteration.
func iterationView(r *http.Request, it flatten.Iteration) *wire.StepIteration {
	iid, run, _ := pathRun(r)
	a := &execution.StepAttempt{WorkflowID: it.WorkflowID, InstanceID: it.InstanceID, RunID: it.RunID, StepID: it.StepID,
		AttemptID: it.AttemptID, Status: instance.StepStatus(it.Status), Timeline: it.Timeline, RuntimeState: it.RuntimeState,
		CreateTime: it.CreateTime, StartTime: it.StartTime, EndTime: it.EndTime, ModifyTime: it.ModifyTime}
	return &wire.StepIteration{WorkflowID: r.PathValue("id"), InstanceID: iid, RunID: run, StepID: it.StepID,
		IterationRank: it.Rank, StepAttemptSeq: it.AttemptSeq, LoopParams: it.LoopParams,
		LeafStepInstanceRef: &wire.StepInstanceRef{WorkflowID: it.WorkflowID, InstanceID: it.InstanceID, RunID: it.RunID,
			StepID: it.StepID, AttemptID: it.AttemptID},
		StepRuntimeState: runtimeStateView(a)}
}

// listStepIterations pages the iterations by rank: first (forward from
// the cursor) or last (backward), cursor the base64url rank of an earlier
// page's start_cursor or end_cursor, statuses a comma-separated filter,
// loopParams a base64url JSON object of loop param values to match.
func (s *Server) listStepIterations(w http.ResponseWriter, r *http.Request) error {
	pg, err := parsePagination(r, maxPaginationLimit)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var cursor string
	if c := q.Get("cursor"); c != "" {
		b, err := base64.URLEncoding.DecodeString(c)
		if err != nil {
			return badRequest("cursor must be a start_cursor or end_cursor of an earlier page")
		}
		cursor = string(b)
	}
	statuses := map[string]bool{}
	for _, st := range strings.Split(q.Get("statuses"), ",") {
		if st = strings.TrimSpace(st); st != "" {
			statuses[strings.ToUpper(st)] = true
		}
	}
	var loopParams map[string]string
	if lp := q.Get("loopParams"); lp != "" {
		b, err := base64.URLEncoding.DecodeString(lp)
		if err != nil || json.Unmarshal(b, &loopParams) != nil {
			return badRequest("loopParams must be a base64url JSON object of loop param values")
		}
	}
	all, err := s.stepIterations(r)
	if err != nil {
		return err
	}
	matched := all[:0]
	for _, it := range all {
		if len(statuses) > 0 && !statuses[it.Status] {
			continue
		}
		ok := true
		for k, v := range loopParams {
			ok = ok && it.LoopParams[k] == v
		}
		if ok {
			matched = append(matched, it)
		}
	}
	// The page: forward, the ranks after the cursor; backward, the ranks
	// before it (the last ones without a cursor).
	var page []flatten.Iteration
	more := false
	limit := int(pg.limit)
	if pg.forward {
		start := 0
		if cursor != "" {
			start, _ = slices.BinarySearchFunc(matched, cursor, func(it flatten.Iteration, c string) int {
				if it.Rank <= c {
					return -1
				}
				return 1
			})
		}
		page = matched[start:min(len(matched), start+limit)]
		more = len(matched) > start+limit
	} else {
		end := len(matched)
		if cursor != "" {
			end, _ = slices.BinarySearchFunc(matched, cursor, func(it flatten.Iteration, c string) int {
				if it.Rank < c {
					return -1
				}
				return 1
			})
		}
		page = matched[max(0, end-limit):end]
		more = end-limit > 0
	}
	if len(page) == 0 {
		writeJSON(w, http.StatusOK, emptyPage[*wire.StepIteration]())
		return nil
	}
	views := make([]*wire.StepIteration, 0, len(page))
	for _, it := range page {
		views = append(views, iterationView(r, it))
	}
	start := base64.URLEncoding.EncodeToString([]byte(page[0].Rank))
	end := base64.URLEncoding.EncodeToString([]byte(page[len(page)-1].Rank))
	info := wire.PageInfo{StartCursor: &start, EndCursor: &end}
	if pg.forward {
		info.HasNextPage, info.HasPreviousPage = more, cursor != ""
	} else {
		info.HasPreviousPage, info.HasNextPage = more, cursor != ""
	}
	writeJSON(w, http.StatusOK, wire.PaginationResult[*wire.StepIteration]{PageInfo: info, TotalCount: int64(len(views)), Elements: views})
	return nil
}

// getStepIteration is one iteration, named by its iteration numbers from
// the outermost foreach in ("3" or "1-12").
func (s *Server) getStepIteration(w http.ResponseWriter, r *http.Request) error {
	rank, err := flatten.RankOf(r.PathValue("iteration"))
	if err != nil {
		return badRequest(err.Error())
	}
	all, err := s.stepIterations(r)
	if err != nil {
		return err
	}
	for _, it := range all {
		if it.Rank == rank {
			writeJSON(w, http.StatusOK, iterationView(r, it))
			return nil
		}
	}
	return notFound(fmt.Sprintf("Step iteration is not found for workflowId=[%s], instanceId=[%s], runId=[%s], stepId=[%s], iterationId=[%s]",
		r.PathValue("id"), r.PathValue("iid"), r.PathValue("run"), r.PathValue("step"), r.PathValue("iteration")))
}

// stepIterationsSummary is Maestro's StepIterationsSummary: counts by
// status (statusCount=true), the representative iteration (the one whose
// status matters most; representative=false leaves it out) and up to
// valueCount distinct values of each loop param.
func (s *Server) stepIterationsSummary(w http.ResponseWriter, r *http.Request) error {
	statusCount, err := boolQuery(r, "statusCount", false)
	if err != nil {
		return err
	}
	representative, err := boolQuery(r, "representative", true)
	if err != nil {
		return err
	}
	valueCount := 5
	if v := r.URL.Query().Get("valueCount"); v != "" {
		if valueCount, err = strconv.Atoi(v); err != nil || valueCount < 0 || valueCount > 1000 {
			return badRequest("valueCount must be a number from 0 to 1000")
		}
	}
	all, err := s.stepIterations(r)
	if err != nil {
		return err
	}
	out := wire.StepIterationsSummary{}
	if statusCount {
		out.CountByStatus = map[string]int64{}
		for _, it := range all {
			out.CountByStatus[it.Status]++
		}
	}
	if representative && len(all) > 0 {
		best := all[0]
		for _, it := range all[1:] {
			if flatten.Priority[it.Status] > flatten.Priority[best.Status] {
				best = it
			}
		}
		out.RepresentativeIteration = iterationView(r, best)
	}
	if valueCount > 0 && len(all) > 0 {
		out.LoopParamValues = map[string][]string{}
		for _, it := range all {
			for _, k := range slices.Sorted(maps.Keys(it.LoopParams)) {
				vs := out.LoopParamValues[k]
				if len(vs) < valueCount && !slices.Contains(vs, it.LoopParams[k]) {
					out.LoopParamValues[k] = append(vs, it.LoopParams[k])
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
