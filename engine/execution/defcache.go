package execution

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// startDefinitions keeps, per workflow, the decoded definition of the
// version its starts last ran, keyed by the version's fingerprint (the
// sha256 of its canonical JSON, workflow_version.fingerprint): a start
// passes the fingerprint to its first statement (run.LockForStart), which
// sends the definition back only when the version it resolves has another
// one. The definition is thus read and decoded once per version a process
// starts, not once per start. A cached definition is shared by every start
// that uses it and never written to (withRuntimeTags copies it).
type startDefinitions struct {
	mu      sync.Mutex
	entries map[string]*startDefinition
	// decodes counts the definitions decoded, for tests.
	decodes atomic.Int64
}

// startDefinition is one workflow's cached version definition.
type startDefinition struct {
	fingerprint []byte
	raw         []byte
	wf          *workflow.Workflow
}

// maxStartDefinitions bounds the workflows whose definition is kept; past
// it the cache starts over (a start then reads its definition once more).
const maxStartDefinitions = 4096

func newStartDefinitions() *startDefinitions {
	return &startDefinitions{entries: map[string]*startDefinition{}}
}

// known is the fingerprint of the definition cached for workflowID, nil
// when none is.
func (c *startDefinitions) known(workflowID string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[workflowID]; e != nil {
		return e.fingerprint
	}
	return nil
}

// resolve returns the decoded definition with fingerprint: raw decoded
// and cached when the statement sent it, else the cached one; ok is false
// when it sent none and the cache no longer has that fingerprint (a
// concurrent start replaced it), and the caller reads it again.
func (c *startDefinitions) resolve(workflowID string, version int64, fingerprint, raw []byte) (*startDefinition, bool, error) {
	if raw == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e := c.entries[workflowID]; e != nil && bytes.Equal(e.fingerprint, fingerprint) {
			return e, true, nil
		}
		return nil, false, nil
	}
	e := &startDefinition{fingerprint: fingerprint, raw: raw, wf: &workflow.Workflow{}}
	if err := json.Unmarshal(raw, e.wf); err != nil {
		return nil, false, fmt.Errorf("decode workflow %s version %d: %w", workflowID, version, err)
	}
	c.decodes.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxStartDefinitions {
		clear(c.entries)
	}
	c.entries[workflowID] = e
	return e, true, nil
}
