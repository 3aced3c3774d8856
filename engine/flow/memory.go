package flow

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultMemoryBudget is Config.MemoryBudget's default.
const DefaultMemoryBudget = 512 << 20

// ErrMemoryBudget reports a run or a step attempt that needs more of the
// engine's memory budget than there is (Config.MemoryBudget): the run fails,
// or the attempt fails as a user error; the engine and its other runs go on.
var ErrMemoryBudget = errors.New("over the engine's memory budget")

// errMemoryBusy reports that the budget is in use by other runs now: a
// start waits (its message is offered again after the queue's retry delay)
// instead of failing.
var errMemoryBusy = errors.New("the engine's memory budget is in use by other runs; the start is retried shortly")

// Footprint factors: bytes of memory a flow holds per byte of what it was
// built from, measured with runtime.MemStats (a decoded definition and its
// DAG take about 14 times its JSON; evaluated params about twice theirs).
const (
	definitionFootprint = 14
	flowFootprint       = 2 // a flow's own structures per byte of its definition
	paramsFootprint     = 2
)

// memoryBudget bounds the memory a node's flows hold for what their input
// decides: decoded definitions, params (evaluated, loaded and merged with
// outputs) and SEL evaluation. A legal but enormous run therefore fails
// alone, and many large runs wait their turn, instead of the process
// growing until the kernel kills it and every engine that adopts the run
// after it (docs/limits.md). It is the sel.MemoryPool of every expression
// the engine evaluates.
type memoryBudget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
}

func newMemoryBudget(limit int64) *memoryBudget { return &memoryBudget{limit: limit} }

// Reserve takes n bytes, or reports false and takes nothing.
func (b *memoryBudget) Reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			b.notePeak(u + n)
			return true
		}
	}
}

// force takes n bytes even over the limit: a run adopted from another
// node is live and must go on; it only makes new work wait.
func (b *memoryBudget) force(n int64) { b.notePeak(b.used.Add(n)) }

// Release returns n bytes.
func (b *memoryBudget) Release(n int64) { b.used.Add(-n) }

func (b *memoryBudget) notePeak(u int64) {
	for {
		p := b.peak.Load()
		if u <= p || b.peak.CompareAndSwap(p, u) {
			return
		}
	}
}

// MemoryInUse returns the bytes of the engine's memory budget in use and
// the most ever in use.
func (e *Engine) MemoryInUse() (used, peak int64) { return e.mem.used.Load(), e.mem.peak.Load() }

// flowMemory is what one flow holds of the budget: its base (definition,
// run params) and the params of each step's latest attempt. It is released
// when the flow ends or leaves memory.
type flowMemory struct {
	budget *memoryBudget
	mu     sync.Mutex
	base   int64
	steps  map[string]int64
}

// chargeStep sets what a step's attempt holds: the step's previous charge
// is returned first. It fails with ErrMemoryBudget when the budget cannot
// cover it.
func (m *flowMemory) chargeStep(step string, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.steps[step]
	if n <= prev {
		return nil
	}
	if !m.budget.Reserve(n - prev) {
		return fmt.Errorf("step %s needs %s more of the engine's memory, %s of %s is in use: %w",
			step, mib(n-prev), mib(m.budget.used.Load()), mib(m.budget.limit), ErrMemoryBudget)
	}
	if m.steps == nil {
		m.steps = map[string]int64{}
	}
	m.steps[step] = n
	return nil
}

// forceStep records what a step holds without refusing (adoption).
func (m *flowMemory) forceStep(step string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n <= m.steps[step] {
		return
	}
	m.budget.force(n - m.steps[step])
	if m.steps == nil {
		m.steps = map[string]int64{}
	}
	m.steps[step] = n
}

// release returns everything the flow holds. Idempotent.
func (m *flowMemory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := m.base
	for _, n := range m.steps {
		total += n
	}
	m.base, m.steps = 0, nil
	m.budget.Release(total)
}

// runFootprint is what a flow holds besides its steps: its own structures
// and its run params (the shared decoded definition is the cache's).
func runFootprint(definitionBytes, paramsBytes int) int64 {
	return int64(flowFootprint*definitionBytes + paramsFootprint*paramsBytes)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
