// Package startstop runs the loops of a long-running service: Start
// launches them without blocking, Stop cancels them and waits for them,
// once.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted reports a second Start.
var ErrStarted = errors.New("service already started")

// Runner runs a service's loops. The zero Runner is ready to use.
type Runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start runs each loop in a goroutine of its own until Stop. The loops get
// a context that outlives ctx's cancellation (only Stop ends them) but
// keeps its values.
func (r *Runner) Start(ctx context.Context, loops ...func(ctx context.Context)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return ErrStarted
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Go(func() { loop(ctx) })
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return nil
}

// Stop cancels the loops and waits for them to return. Idempotent; a
// Runner never started stops at once.
func (r *Runner) Stop() {
	r.once.Do(func() {
		r.mu.Lock()
		cancel, done := r.cancel, r.done
		r.mu.Unlock()
		if cancel == nil {
			return
		}
		cancel()
		<-done
	})
}
