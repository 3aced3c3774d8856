package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/breakpoint"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/jobtemplate"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/tagpermit"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Every store error answers through the one table, wrapped as the stores
// wrap them.
func TestAsError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err       error
		status    int
		code      string
		message   string
		retryable bool
	}{
		{fmt.Errorf("workflow wf does not exist: %w", definition.ErrNotFound), 404, "NOT_FOUND", "workflow wf does not exist", false},
		{fmt.Errorf("version %q is bad: %w", "x", definition.ErrInvalidSelector), 400, "BAD_REQUEST", `version "x" is bad`, false},
		{fmt.Errorf("not yours: %w", definition.ErrForbidden), 403, "FORBIDDEN", "not yours", false},
		{fmt.Errorf("wf: %w", definition.ErrDeleting), 409, "CONFLICT", "wf", true},
		{fmt.Errorf("changed: %w", definition.ErrConflict), 409, "CONFLICT", "changed", false},
		{fmt.Errorf("workflow instance wf/1 run 1: %w", execution.ErrNotFound), 404, "NOT_FOUND", "workflow instance wf/1 run 1: not found", false},
		{fmt.Errorf("%w: bad policy", execution.ErrInvalid), 400, "BAD_REQUEST", "invalid request: bad policy", false},
		{fmt.Errorf("%w: already SUCCEEDED", execution.ErrConflict), 400, "BAD_REQUEST", "conflict: already SUCCEEDED", false},
		{fmt.Errorf("no template: %w", jobtemplate.ErrNotFound), 404, "NOT_FOUND", "no template", false},
		{fmt.Errorf("%w: cycle", jobtemplate.ErrInvalid), 400, "BAD_REQUEST", "invalid job template: cycle", false},
		{fmt.Errorf("%w: name", signal.ErrInvalid), 400, "BAD_REQUEST", "invalid signal: name", false},
		{fmt.Errorf("signal %q: %w", "s", signal.ErrNotFound), 404, "NOT_FOUND", `signal "s": signal instance not found`, false},
		{completion.ErrForbidden, 403, "FORBIDDEN", completion.ErrForbidden.Error(), false},
		{fmt.Errorf("%w: no", completion.ErrConflict), 409, "CONFLICT", "step attempt does not accept a completion: no", false},
		{fmt.Errorf("step attempt is SUCCEEDED: %w", completion.ErrNotRunning), 409, "CONFLICT",
			"step attempt is SUCCEEDED: output params can be set only while the step attempt is RUNNING", false},
		{fmt.Errorf("too big: %w", completion.ErrOutputsTooLarge), 400, "BAD_REQUEST", "too big", false},
		{fmt.Errorf("tag permit %q not found: %w", "gpu", tagpermit.ErrNotFound), 404, "NOT_FOUND", `tag permit "gpu" not found`, false},
		{fmt.Errorf("no breakpoint on step s of workflow wf: %w", breakpoint.ErrNotFound), 404, "NOT_FOUND", "no breakpoint on step s of workflow wf", false},
		{fmt.Errorf("no caller: %w", authz.ErrUnauthenticated), 401, "UNAUTHORIZED", "no caller", false},
		{fmt.Errorf("bob may not: %w", authz.ErrForbidden), 403, "FORBIDDEN", "bob may not", false},
		{event.ErrNoStream, 500, "INTERNAL_ERROR", "internal error", false},
		{&workflow.ValidationError{Problems: []workflow.Problem{{Path: "workflow.id", Message: "required"}}}, 400, "BAD_REQUEST",
			"invalid workflow definition: 1 problem", false},
		{fmt.Errorf("read body: %w", &http.MaxBytesError{Limit: 1}), 413, "PAYLOAD_TOO_LARGE",
			fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes), false},
		{fmt.Errorf("wrapped: %w", badRequest("mine")), 400, "BAD_REQUEST", "mine", false},
		{errors.New("something else"), 500, "INTERNAL_ERROR", "internal error", false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			e := asError(tc.err)
			if e.HTTPStatus != tc.status || e.Code != tc.code || e.Message != tc.message || e.Retryable != tc.retryable {
				t.Errorf("asError = %d %s %q retryable=%v, want %d %s %q retryable=%v",
					e.HTTPStatus, e.Code, e.Message, e.Retryable, tc.status, tc.code, tc.message, tc.retryable)
			}
		})
	}
}
