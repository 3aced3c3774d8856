package flow

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// stepTimeout is the step's own timeout clock.
type stepTimeout struct {
	// deadline is when the step's own timeout fires (zero when it has
	// none), after the timeout itself.
	deadline time.Time
	after    time.Duration
	timer    *time.Timer
}

// armTimeout starts the step's own timeout clock from its start time.
func (a *stepActor) armTimeout() {
	if a.timeout.timer != nil {
		return
	}
	c := a.node.Common()
	if c.Timeout == nil {
		return
	}
	d, err := c.Timeout.Resolve()
	if errors.Is(err, workflow.ErrNeedsParams) {
		d, err = a.paramTimeout(c.Timeout.Text)
	}
	if err != nil || d <= 0 {
		return
	}
	start := a.started
	if start.IsZero() {
		start = time.Now()
	}
	a.timeout.deadline, a.timeout.after = start.Add(d), d
	a.timeout.timer = time.AfterFunc(time.Until(a.timeout.deadline), func() {
		a.inbox.send(stepMsg{kind: msgTimeout, reason: a.timeoutReason()})
	})
}

func (a *stepActor) timeoutReason() string {
	return fmt.Sprintf("step timed out after %s", a.timeout.after)
}

// paramTimeout resolves a timeout written with params ("${hours}h") from
// the attempt's params and the workflow's.
func (a *stepActor) paramTimeout(text string) (time.Duration, error) {
	vals := maps.Clone(a.f.plain())
	if vals == nil {
		vals = map[string]any{}
	}
	maps.Copy(vals, a.params.Plain())
	s, err := params.Interpolate(text, vals)
	if err != nil {
		return 0, err
	}
	return workflow.ParseDuration(s)
}
