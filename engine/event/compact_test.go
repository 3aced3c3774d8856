package event

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/maestro-aws/maestro/engine/instance"
)

// The step event's hand-written encoding is what encoding/json writes, for
// any id, and a stored event expands back to the event that was written.
func TestCompactStepEncoding(t *testing.T) {
	for _, id := range []string{"plain", `q"uo\te`, "ctl\x01\n", "<tag>&", "ünï©ødé", "bad\xffutf8", ""} {
		e := &StepInstanceStatusChangeEvent{WorkflowID: "wf:" + id, WorkflowInstanceID: 7, WorkflowRunID: 2, StepID: id,
			StepAttemptID: 3, WorkflowUUID: "u1", StepUUID: "u2", CorrelationID: id + ":7:2", StepInstanceID: 4, Seq: 9, SyncTime: 11,
			StatusChangeRecords: []StatusChangeRecord{
				{OldStatus: instance.StepNotCreated, NewStatus: instance.StepCreated, EventTime: 5},
				{OldStatus: instance.StepCreated, NewStatus: instance.StepInitialized, EventTime: 6}}}
		c := compactStepOf(e)
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.appendJSON(nil); string(got) != string(want) {
			t.Errorf("%q: encoded\n%s\nwant\n%s", id, got, want)
		}
		rec := NewRecord(e)
		b, err := Expand(Event{Position: Position{TX: 1, ID: 2}, Kind: rec.Kind, WorkflowID: rec.WorkflowID, Seq: rec.Seq, Payload: rec.Payload})
		if err != nil {
			t.Fatal(err)
		}
		var back StepInstanceStatusChangeEvent
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		want2 := *e
		want2.EventID = "1-2"
		if id == "bad\xffutf8" { // encoding/json writes invalid UTF-8 as U+FFFD
			want2.StepID, want2.WorkflowID, want2.CorrelationID = back.StepID, back.WorkflowID, back.CorrelationID
		}
		if !reflect.DeepEqual(back, want2) {
			t.Errorf("%q: expanded\n%+v\nwant\n%+v", id, back, want2)
		}
	}
}
