package api

import (
	"strings"
	"testing"
)

// maestroEndpoints are the public endpoints of Maestro's REST API (its
// controllers in maestro-server and the foreach flatten views of
// maestro-extensions), at Maestro's methods and paths with Maestro's
// path variable names. The engine-internal /api/v3/groups/... callbacks
// are left out (docs/maestro-compatibility.md).
var maestroEndpoints = []string{
	// WorkflowController
	"POST /api/v3/workflows",
	"POST /api/v3/workflows/yaml",
	"POST /api/v3/workflows/{workflowId}/properties",
	"POST /api/v3/workflows/{workflowId}/properties/tag",
	"DELETE /api/v3/workflows/{workflowId}/properties/tag/{workflowTagName}",
	"DELETE /api/v3/workflows/{workflowId}",
	"GET /api/v3/workflows/{workflowId}/versions/{version}",
	"GET /api/v3/workflows/{workflowId}/properties-snapshot/{snapshotId}",
	"GET /api/v3/workflows/{workflowId}/overview",
	"GET /api/v3/workflows/{workflowId}/timeline",
	"GET /api/v3/workflows/{workflowId}/versions/pagination",
	// WorkflowActionController
	"POST /api/v3/workflows/{workflowId}/versions/{version}/actions/start",
	"PUT /api/v3/workflows/actions/validate",
	"PUT /api/v3/workflows/actions/validate/yaml",
	"PUT /api/v3/workflows/{workflowId}/actions/deactivate",
	"PUT /api/v3/workflows/{workflowId}/versions/{version}/actions/activate",
	"PUT /api/v3/workflows/{workflowId}/actions/stop",
	"PUT /api/v3/workflows/{workflowId}/actions/kill",
	"PUT /api/v3/workflows/{workflowId}/actions/unblock",
	// WorkflowInstanceController
	"GET /api/v3/workflows/instances/action-map",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRun}",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs",
	"GET /api/v3/workflows/{workflowId}/instances",
	"GET /api/v3/workflows/instances/inline-workflow-id",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/inline-path",
	// WorkflowInstanceActionController
	"POST /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/actions/restart",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/actions/stop",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/actions/kill",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/actions/unblock",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/actions/stop",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/actions/kill",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/actions/unblock",
	// StepInstanceController
	"GET /api/v3/workflows/steps/instances/action-map",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps/{stepId}",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/steps/{stepId}/attempts/{attempt}",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps",
	"GET /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/steps",
	// StepInstanceActionController
	"POST /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps/{stepId}/actions/restart",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps/{stepId}/actions/stop",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps/{stepId}/actions/kill",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps/{stepId}/actions/skip",
	"PUT /api/v3/workflows/{workflowId}/instances/{workflowInstanceId}/steps/{stepId}/actions/bypass",
	// StepBreakpointController
	"POST /api/v3/workflows/steps/breakpoints",
	"DELETE /api/v3/workflows/steps/breakpoints",
	"GET /api/v3/workflows/steps/breakpoints",
	"GET /api/v3/workflows/steps/breakpoints/paused-step-attempts",
	"PUT /api/v3/workflows/steps/breakpoints/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRun}/steps/{stepId}/attempts/{stepAttemptId}/actions/resume",
	// TagPermitController
	"POST /api/v3/tag-permits",
	"GET /api/v3/tag-permits/{tag}",
	"DELETE /api/v3/tag-permits/{tag}",
	// OutputDataController
	"PUT /api/v3/output-data",
	// SignalController
	"POST /api/v3/signals",
	"GET /api/v3/signals/{signalName}/instances/{seq}",
	// JobTemplateController
	"POST /api/v3/job-templates",
	"POST /api/v3/job-templates/yaml",
	"GET /api/v3/job-templates/{type}",
	"DELETE /api/v3/job-templates/{type}",
	"GET /api/v3/job-templates",
	// ForeachFlattenController (maestro-extensions)
	"GET /api/v3/views/flatten/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/steps/{stepId}",
	"GET /api/v3/views/flatten/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/steps/{stepId}/iterations/{iterationId}",
	"GET /api/v3/views/flatten/workflows/{workflowId}/instances/{workflowInstanceId}/runs/{workflowRunId}/steps/{stepId}/summary",
}

// TestMaestroEndpointsAnswer requires every Maestro endpoint to be served
// by a route of its own at Maestro's method and path (not the catch-all
// 404, not a route that reads a literal segment as a path value).
func TestMaestroEndpointsAnswer(t *testing.T) {
	s := offlineServer(t)
	served := 0
	for _, ep := range maestroEndpoints {
		method, path, _ := strings.Cut(ep, " ")
		pattern := s.matched(method, path)
		if pattern == "" || pattern == "/" || !sameShape(pattern, ep) {
			t.Errorf("%s is served by %q", ep, pattern)
			continue
		}
		served++
	}
	t.Logf("%d of %d Maestro endpoints answer at Maestro's method and path", served, len(maestroEndpoints))
}

// sameShape reports whether a mux pattern has the endpoint's literal
// segments where the endpoint has them (wildcard names may differ).
func sameShape(pattern, endpoint string) bool {
	pm, pp, _ := strings.Cut(pattern, " ")
	em, ep, _ := strings.Cut(endpoint, " ")
	if pm != em {
		return false
	}
	ps, es := strings.Split(pp, "/"), strings.Split(ep, "/")
	if len(ps) != len(es) {
		return false
	}
	for i := range ps {
		pw, ew := strings.HasPrefix(ps[i], "{"), strings.HasPrefix(es[i], "{")
		if pw != ew || (!pw && ps[i] != es[i]) {
			return false
		}
	}
	return true
}
