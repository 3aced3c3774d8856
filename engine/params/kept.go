package params

import "sync"

// keptLimit bounds each of the package's kept maps (compiled programs,
// compiled validators): past it a map starts again. Their keys come from
// definitions (an expression's or a validator's text), which pushes can
// add without end over an engine's life; the programs in use are
// compiled again on their next evaluation.
const keptLimit = 2048

// keptMap is a map shared by every evaluation of the process, bounded by
// keptLimit.
type keptMap[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *keptMap[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

func (c *keptMap[K, V]) put(k K, v V) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= keptLimit {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	c.mu.Unlock()
}

// len is how many values are kept.
func (c *keptMap[K, V]) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
