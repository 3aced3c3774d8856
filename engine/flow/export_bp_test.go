package flow

// BreakpointCache reports what the engine cached for a workflow id: whether
// it has breakpoints, and whether that is known at all.
func (e *Engine) BreakpointCache(workflowID string) (has, known bool) {
	e.breakpoints.mu.Lock()
	defer e.breakpoints.mu.Unlock()
	has, known = e.breakpoints.has[workflowID]
	return has, known
}
