package flow

// Crash stops the engine the way a killed process stops: every actor ends
// at once, nothing more is written and its groups are not released, so
// another node must wait for the leases to expire.
func (e *Engine) Crash() {
	e.once.Do(func() {
		e.cancel()
		e.worker.Stop()
		e.wg.Wait()
		e.relaxed.Close()
	})
}

// WithoutEvents makes the engine record no events, for benchmarks that
// measure what recording them costs. Call it before Start.
func (e *Engine) WithoutEvents() { e.events = false }
