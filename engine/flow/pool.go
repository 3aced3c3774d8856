package flow

import (
	"context"
	"fmt"

	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// workerPool runs step runtime calls, which may block on AWS or HTTP, on a
// bounded number of goroutines so that actors never block on them.
type workerPool struct {
	slots chan struct{}
}

func newWorkerPool(size int) *workerPool {
	return &workerPool{slots: make(chan struct{}, size)}
}

// submit runs call on the pool and delivers its result with done. A
// panicking runtime becomes a platform error, not a crash. A call whose
// context ends while it waits for a worker is not started; done is told
// so (the attempt was stopped, or its flow is gone and nobody listens).
// finished runs once the call has returned (or was never started).
func (p *workerPool) submit(ctx context.Context, finished func(), call func(context.Context) stepruntime.Result, done func(stepruntime.Result)) {
	go func() {
		defer finished()
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			done(stepruntime.Result{State: stepruntime.Stopped, Message: "the call was cancelled before it started"})
			return
		}
		defer func() { <-p.slots }()
		// Both cases may have been ready at once, and select picks either:
		// a call whose context has ended never starts (its group may have
		// been handed to another node).
		if ctx.Err() != nil {
			done(stepruntime.Result{State: stepruntime.Stopped, Message: "the call was cancelled before it started"})
			return
		}
		done(safeCall(func() stepruntime.Result { return call(ctx) }))
	}()
}

// safeCall runs a runtime call; a panic becomes a platform error.
func safeCall(call func() stepruntime.Result) (res stepruntime.Result) {
	defer func() {
		if v := recover(); v != nil {
			res = stepruntime.Result{State: stepruntime.PlatformError, Message: fmt.Sprintf("step runtime panicked: %v", v)}
		}
	}()
	return call()
}
