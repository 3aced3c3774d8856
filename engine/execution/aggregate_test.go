package execution

import (
	"testing"

	"github.com/maestro-aws/maestro/engine/instance"
)

func TestAggregateStatus(t *testing.T) {
	t.Parallel()
	view := func(ss ...instance.StepStatus) map[string]StepAggregatedView {
		m := map[string]StepAggregatedView{}
		for i, s := range ss {
			m[string(rune('a'+i))] = StepAggregatedView{Status: s}
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		latest instance.WorkflowStatus
		views  map[string]StepAggregatedView
		want   instance.WorkflowStatus
	}{
		{"live run", instance.WorkflowInProgress, view(instance.StepFatallyFailed), instance.WorkflowInProgress},
		{"all complete over runs", instance.WorkflowSucceeded, view(instance.StepSucceeded, instance.StepSkipped), instance.WorkflowSucceeded},
		{"a failed step", instance.WorkflowFailed, view(instance.StepSucceeded, instance.StepFatallyFailed, notCreated), instance.WorkflowFailed},
		{"only stopped", instance.WorkflowStopped, view(instance.StepSucceeded, instance.StepStopped), instance.WorkflowStopped},
		{"not reached", instance.WorkflowStopped, view(instance.StepSucceeded, notCreated), instance.WorkflowStopped},
		{"no steps", instance.WorkflowStopped, view(), instance.WorkflowStopped},
	} {
		if got := aggregateStatus(tc.latest, tc.views); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
