package event_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/maestro-aws/maestro/engine/event"
)

// Every event carries its type, workflow and cluster; the others only when
// the event has them, with the data types filter policies match on.
func TestAttributes(t *testing.T) {
	step := event.Meta{Type: event.StepInstanceStatusChange, WorkflowID: "wf", InstanceID: 12, StepID: "s1",
		Statuses: []string{"RUNNING", "SUCCEEDED"}}
	got := step.Attributes("prod")
	want := map[string]event.Attribute{
		event.AttributeType:        {DataType: "String", Value: string(event.StepInstanceStatusChange)},
		event.AttributeWorkflowID:  {DataType: "String", Value: "wf"},
		event.AttributeClusterName: {DataType: "String", Value: "prod"},
		event.AttributeInstanceID:  {DataType: "Number", Value: "12"},
		event.AttributeStepID:      {DataType: "String", Value: "s1"},
		event.AttributeStatus:      {DataType: "String.Array", Value: `["RUNNING","SUCCEEDED"]`},
	}
	if !maps.Equal(got, want) {
		t.Errorf("step event attributes %v, want %v", got, want)
	}
	alert := event.Meta{Type: event.Alert, WorkflowID: "wf", AlertType: "STEP_FAILURE"}.Attributes("prod")
	if len(alert) != 4 || alert[event.AttributeAlertType].Value != "STEP_FAILURE" {
		t.Errorf("alert attributes %v", alert)
	}
	def := event.Meta{Type: event.WorkflowDefinitionChange, WorkflowID: "wf"}.Attributes("prod")
	if names := slices.Sorted(maps.Keys(def)); !slices.Equal(names, []string{"cluster_name", "type", "workflow_id"}) {
		t.Errorf("definition change attributes %v", names)
	}
	all := event.AttributeNames()
	for name := range maps.Keys(got) {
		if !slices.Contains(all, name) {
			t.Errorf("%s is not in AttributeNames", name)
		}
	}
	if len(all) != 7 {
		t.Errorf("AttributeNames %v", all)
	}
}
