package sel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/maestro-aws/maestro/sel"
)

// testPool is a MemoryPool of a fixed size.
type testPool struct {
	limit, used, peak atomic.Int64
}

func (p *testPool) Reserve(n int64) bool {
	for {
		u := p.used.Load()
		if u+n > p.limit.Load() {
			return false
		}
		if p.used.CompareAndSwap(u, u+n) {
			if u+n > p.peak.Load() {
				p.peak.Store(u + n)
			}
			return true
		}
	}
}

func (p *testPool) Release(n int64) { p.used.Add(-n) }

// Evaluations draw from the pool of their context and give everything
// back when they end, whether they succeed or fail.
func TestMemoryPoolIsSharedAndReturned(t *testing.T) {
	t.Parallel()
	pool := &testPool{}
	pool.limit.Store(64 << 20)
	ctx := sel.WithMemoryPool(context.Background(), pool)
	// 20 strings of 1 MB: about 21 MB each, so three fit at once, not four.
	prog, err := sel.Compile(`String[] a = new String[20]; for (int i = 0; i < 20; i++) { a[i] = "x".repeat(1000000) + i; } return a.length;`)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := prog.Eval(ctx, nil); err != nil || v != int64(20) {
		t.Fatalf("alone: %v %v", v, err)
	}
	if pool.used.Load() != 0 {
		t.Fatalf("%d bytes still reserved after the evaluation", pool.used.Load())
	}
	var wg sync.WaitGroup
	var exhausted, ok atomic.Int32
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			_, err := prog.Eval(ctx, nil)
			var se *sel.Error
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &se) && se.Kind == sel.KindLimit && errors.Is(err, sel.ErrPoolExhausted):
				exhausted.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	// Which of the racing evaluations win depends on scheduling (all eight
	// may each hold a slice when the pool runs dry); what must hold is that
	// each either finished or was refused by the pool, never more than the
	// pool was lent, and everything came back.
	if ok.Load()+exhausted.Load() != 8 {
		t.Fatalf("ok %d, exhausted %d", ok.Load(), exhausted.Load())
	}
	if pool.peak.Load() > pool.limit.Load() || pool.used.Load() != 0 {
		t.Fatalf("peak %d of %d, %d left", pool.peak.Load(), pool.limit.Load(), pool.used.Load())
	}
	// The pool is whole again: a lone evaluation fits, and one larger than
	// the pool is refused.
	if v, err := prog.Eval(ctx, nil); err != nil || v != int64(20) {
		t.Fatalf("after the race: %v %v", v, err)
	}
	small := &testPool{}
	small.limit.Store(8 << 20)
	if _, err := prog.Eval(sel.WithMemoryPool(context.Background(), small), nil); !errors.Is(err, sel.ErrPoolExhausted) {
		t.Fatalf("a pool too small for the evaluation: %v", err)
	}
	if small.used.Load() != 0 {
		t.Fatalf("%d bytes still reserved after a refused evaluation", small.used.Load())
	}
	// Without a pool in the context nothing is reserved.
	if _, err := prog.Eval(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
