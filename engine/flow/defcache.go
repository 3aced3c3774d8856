package flow

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// definitionCache keeps decoded run definitions by content, so that runs
// of one definition decode it once: the iterations of a foreach (thousands
// of runs of one inline definition), the runs of a busy workflow version.
// A decoded definition and its DAG are shared by every flow that uses
// them and never written to.
type definitionCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*decodedDefinition
}

type decodedDefinition struct {
	wf  workflow.Workflow
	dag *workflow.DAG
}

// maxCachedDefinitions bounds the cache; when full it starts over, which
// costs one decode per definition still in use.
const maxCachedDefinitions = 512

func newDefinitionCache() *definitionCache {
	return &definitionCache{entries: map[[sha256.Size]byte]*decodedDefinition{}}
}

// decode returns the decoded definition and its DAG.
func (c *definitionCache) decode(raw []byte) (*decodedDefinition, error) {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	d, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	d = &decodedDefinition{}
	if err := json.Unmarshal(raw, &d.wf); err != nil {
		return nil, fmt.Errorf("decode definition: %w", err)
	}
	dag, err := workflow.BuildDAG(d.wf.Steps)
	if err != nil {
		return nil, fmt.Errorf("build dag: %w", err)
	}
	d.dag = dag
	c.mu.Lock()
	if len(c.entries) >= maxCachedDefinitions {
		clear(c.entries)
	}
	c.entries[key] = d
	c.mu.Unlock()
	return d, nil
}
