package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
)

// Steps of a workflow without breakpoints skip the breakpoint query, but a
// breakpoint set later, by any writer, is seen by the next step that
// reaches it: the database's notification clears the engine's cache.
func TestBreakpointSetAfterTheCacheLearnedNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"bpcache","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	if got := e.wait(e.start("bpcache", nil), 10*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("first run ended %s", got.Status)
	}
	if _, err := e.pool.Exec(context.Background(),
		`INSERT INTO step_breakpoint (workflow_id, step_id) VALUES ('bpcache', 's')`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the notification's way to the engine
	second := e.start("bpcache", nil)
	e.waitStep(second, "s", instance.StepPaused)
}
