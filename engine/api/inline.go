package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/maestro-aws/maestro/engine/flatten"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/wire"
)

// Inline runs are the iterations of foreach and while steps; their
// workflow ids extend their parent's ("wf:1:loop", instance.RootWorkflowID).

// maxInlineDepth bounds the walk up an inline run's ancestors.
const maxInlineDepth = 64

// parentInfo is the parent an inline run records (run.Parent).
type parentInfo struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"instance_id"`
	RunID      int64  `json:"run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"attempt_id"`
}

// inlinePath is Maestro's inline-path: for a foreach iteration run, the
// path of runs from its closest non-inline ancestor down to it.
func (s *Server) inlinePath(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	inst, err := s.cfg.Runs.Run(r.Context(), r.PathValue("id"), iid, 0)
	if err != nil {
		return err
	}
	var ini struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(inst.Initiator, &ini) // an unreadable initiator is not FOREACH
	if !strings.EqualFold(ini.Type, "FOREACH") {
		return badRequest("This endpoint only supports getting ForeachInitiator for an inline workflow instance.")
	}
	path := []wire.UpstreamInfo{{WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID}}
	cur := inst
	for range maxInlineDepth {
		var p parentInfo
		if err := json.Unmarshal(cur.Parent, &p); err != nil || p.WorkflowID == "" {
			return fmt.Errorf("read the parent of %s/%d/%d", cur.WorkflowID, cur.InstanceID, cur.RunID)
		}
		path = append([]wire.UpstreamInfo{{WorkflowID: p.WorkflowID, InstanceID: p.InstanceID, RunID: p.RunID,
			StepID: p.StepID, StepAttemptID: p.AttemptID}}, path...)
		if !strings.Contains(p.WorkflowID, ":") {
			writeJSON(w, http.StatusOK, path)
			return nil
		}
		if cur, err = s.cfg.Runs.Run(r.Context(), p.WorkflowID, p.InstanceID, p.RunID); err != nil {
			return err
		}
	}
	return fmt.Errorf("the ancestors of %s/%d are more than %d deep", inst.WorkflowID, iid, maxInlineDepth)
}

// inlineWorkflowID is Maestro's inline-workflow-id: the body is a node
// path (JSON array) from a root instance ({workflow_id, instance_id})
// through foreach iterations ({instance_id}) to a step ({step_id}); the
// answer is the workflow id (a JSON string) of the iteration runs holding
// that step.
func (s *Server) inlineWorkflowID(w http.ResponseWriter, r *http.Request) error {
	var nodes []wire.UpstreamInfo
	if err := decodeStrict(r, &nodes); err != nil {
		return err
	}
	if len(nodes) < 2 {
		return badRequest("the node path must hold the root instance and at least one more node")
	}
	root, target := nodes[0], nodes[len(nodes)-1]
	if root.WorkflowID == "" || root.InstanceID <= 0 || target.StepID == "" {
		return badRequest("the node path must start with a workflow_id and instance_id and end with a step_id")
	}
	inst, err := s.cfg.Runs.Run(r.Context(), instance.RootWorkflowID(root.WorkflowID), root.InstanceID, 0)
	if err != nil {
		return err
	}
	wf := decodeRuntime(inst.Definition)
	if wf == nil {
		return fmt.Errorf("decode the runtime workflow of %s/%d", inst.WorkflowID, inst.InstanceID)
	}
	foreaches, ok := flatten.Path(wf, target.StepID)
	if !ok || len(foreaches)+1 != len(nodes) {
		return badRequest(fmt.Sprintf("Inline workflow step path %v is invalid for the input path of %d nodes", append(foreaches, target.StepID), len(nodes)))
	}
	id := inst.WorkflowID
	for i, f := range foreaches {
		if nodes[i].InstanceID <= 0 {
			return badRequest(fmt.Sprintf("node %d of the path needs an instance_id", i))
		}
		id = fmt.Sprintf("%s:%d:%s", id, nodes[i].InstanceID, f)
	}
	writeJSON(w, http.StatusOK, id)
	return nil
}
