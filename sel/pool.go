package sel

import (
	"context"
	"errors"
)

// MemoryPool is memory shared by many evaluations, such as all those of an
// engine process. An evaluation run under a context carrying a pool
// (WithMemoryPool) reserves what it allocates, in chunks of PoolChunk
// bytes, on top of its own MaxMemoryBytes limit, and releases it all when it
// returns. When the pool refuses a reservation the evaluation fails with a
// KindLimit error whose cause is ErrPoolExhausted: the process keeps its
// memory budget however many expressions run at once.
type MemoryPool interface {
	// Reserve takes n bytes from the pool, or reports false and takes
	// nothing.
	Reserve(n int64) bool
	// Release returns n bytes taken by Reserve.
	Release(n int64)
}

// PoolChunk is the unit in which an evaluation reserves pool memory.
const PoolChunk = 1 << 20

// ErrPoolExhausted is the cause of the error of an evaluation that its
// MemoryPool refused: memory is short now, not necessarily for good.
var ErrPoolExhausted = errors.New("shared expression memory exhausted")

type poolKey struct{}

// WithMemoryPool returns a context whose evaluations draw from pool.
func WithMemoryPool(ctx context.Context, pool MemoryPool) context.Context {
	return context.WithValue(ctx, poolKey{}, pool)
}

func poolFrom(ctx context.Context) MemoryPool {
	p, _ := ctx.Value(poolKey{}).(MemoryPool)
	return p
}
