package flow

import (
	"container/list"
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
//
// A decoded definition takes about definitionFootprint times its JSON; the
// cache holds that much of the engine's memory budget for every definition
// in use (acquired and not yet released by a flow) and for those kept idle
// for the next run, up to maxIdleDefinitionBytes of them.
type definitionCache struct {
	mem     *memoryBudget
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*decodedDefinition
	// idle lists the entries no flow uses, least recently used first.
	idle      list.List
	idleBytes int64
}

type decodedDefinition struct {
	wf  workflow.Workflow
	dag *workflow.DAG

	key  [sha256.Size]byte
	size int64
	refs int
	elem *list.Element // in idle while refs == 0
}

// maxIdleDefinitionBytes bounds the budget idle definitions keep.
const maxIdleDefinitionBytes = 64 << 20

func newDefinitionCache(mem *memoryBudget) *definitionCache {
	return &definitionCache{mem: mem, entries: map[[sha256.Size]byte]*decodedDefinition{}}
}

// acquire returns the decoded definition and its DAG, counted as in use
// until release. A definition not in the cache is decoded and charged to
// the budget: with force it is charged even over the limit (a live run
// must go on); without, a definition that does not fit is errMemoryBusy,
// or ErrMemoryBudget when it could never fit.
func (c *definitionCache) acquire(raw []byte, force bool) (*decodedDefinition, error) {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	if d, ok := c.entries[key]; ok {
		c.use(d)
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()
	size := int64(definitionFootprint * len(raw))
	if !force && size > c.mem.limit {
		return nil, fmt.Errorf("a definition of %d bytes needs %s of the engine's memory, more than its budget of %s: %w",
			len(raw), mib(size), mib(c.mem.limit), ErrMemoryBudget)
	}
	if !c.mem.Reserve(size) {
		c.evictIdle(size)
		if !c.mem.Reserve(size) {
			if !force {
				return nil, errMemoryBusy
			}
			c.mem.force(size)
		}
	}
	d := &decodedDefinition{key: key, size: size}
	if err := json.Unmarshal(raw, &d.wf); err != nil {
		c.mem.Release(size)
		return nil, fmt.Errorf("decode definition: %w", err)
	}
	dag, err := workflow.BuildDAG(d.wf.Steps)
	if err != nil {
		c.mem.Release(size)
		return nil, fmt.Errorf("build dag: %w", err)
	}
	d.dag = dag
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.entries[key]; ok { // decoded concurrently
		c.mem.Release(size)
		c.use(prev)
		return prev, nil
	}
	d.refs = 1
	c.entries[key] = d
	return d, nil
}

// use counts one more user of d; c.mu is held.
func (c *definitionCache) use(d *decodedDefinition) {
	if d.refs == 0 && d.elem != nil {
		c.idle.Remove(d.elem)
		d.elem = nil
		c.idleBytes -= d.size
	}
	d.refs++
}

// release ends one use of d; an unused definition stays cached while the
// idle ones fit in maxIdleDefinitionBytes.
func (c *definitionCache) release(d *decodedDefinition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d.refs--
	if d.refs > 0 {
		return
	}
	d.elem = c.idle.PushBack(d)
	c.idleBytes += d.size
	for c.idleBytes > maxIdleDefinitionBytes {
		c.dropOldestIdle()
	}
}

// evictIdle drops idle definitions until need bytes could be reserved or
// none is left.
func (c *definitionCache) evictIdle(need int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.idle.Len() > 0 && c.mem.used.Load()+need > c.mem.limit {
		c.dropOldestIdle()
	}
}

// dropOldestIdle removes the least recently used idle definition; c.mu is
// held.
func (c *definitionCache) dropOldestIdle() {
	d := c.idle.Remove(c.idle.Front()).(*decodedDefinition)
	d.elem = nil
	c.idleBytes -= d.size
	delete(c.entries, d.key)
	c.mem.Release(d.size)
}
