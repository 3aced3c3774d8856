package execution

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// MaxArtifactsBytes bounds the artifacts a start request gives a run.
const MaxArtifactsBytes = 64 << 10

const sqlSetArtifacts = `UPDATE workflow_instance SET artifacts = $4
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`

// withRuntimeTags applies a start's runtime_tags as Maestro does: merged
// into the run's workflow tags (the runtime workflow and the run's events
// carry them) and kept in the run's run_config.
func withRuntimeTags(n *run.New, tags workflow.Tags) error {
	if len(tags) == 0 {
		return nil
	}
	if err := workflow.CheckTags(tags, "runtime_tags"); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	wf := *n.Workflow
	wf.Tags = workflow.MergeTags(n.Workflow.Tags, tags)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(n.Definition, &fields); err != nil {
		return fmt.Errorf("decode the definition of %s: %w", n.Ref.WorkflowID, err)
	}
	encoded, err := json.Marshal(wf.Tags)
	if err != nil {
		return fmt.Errorf("encode runtime tags: %w", err)
	}
	fields["tags"] = encoded
	if n.Definition, err = json.Marshal(fields); err != nil {
		return fmt.Errorf("encode the definition of %s: %w", n.Ref.WorkflowID, err)
	}
	n.Workflow = &wf
	cfg := map[string]any{"policy": "START", "runtime_tags": tags}
	if n.RunConfig, err = json.Marshal(cfg); err != nil {
		return fmt.Errorf("encode run config: %w", err)
	}
	return nil
}

// encodeArtifacts checks a start's artifacts: a JSON object whose values
// are objects (Maestro's Artifact, its kind in "type" when given), within
// MaxArtifactsBytes. nil for none.
func encodeArtifacts(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if len(raw) > MaxArtifactsBytes {
		return nil, fmt.Errorf("%w: artifacts are %d bytes; the limit is %d", ErrInvalid, len(raw), MaxArtifactsBytes)
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, fmt.Errorf("%w: artifacts must be an object of artifacts by name: %w", ErrInvalid, err)
	}
	if len(byName) == 0 {
		return nil, nil
	}
	for name, a := range byName {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(a, &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("%w: artifacts.%s must be an object", ErrInvalid, name)
		}
		if t, ok := fields["type"]; ok {
			var s string
			if json.Unmarshal(t, &s) != nil || s == "" {
				return nil, fmt.Errorf("%w: artifacts.%s.type must be a name such as DEFAULT", ErrInvalid, name)
			}
		}
	}
	return json.Marshal(byName)
}
