package workflow

import (
	"slices"
	"strings"
	"testing"
)

// Every list of step types derives from the table: the validator's
// defaults, the normalized spellings, the refusals of Maestro's types this
// deployment does not run and the job params.
func TestStepTypeTableDrivesValidation(t *testing.T) {
	t.Parallel()
	var runnable []string
	for _, s := range StepTypes() {
		st := StepType(strings.ToLower(string(s.Type)))
		st.normalize()
		if st != s.Type {
			t.Errorf("%q normalizes to %q, want %q", strings.ToLower(string(s.Type)), st, s.Type)
		}
		if s.Runs() {
			runnable = append(runnable, string(s.Type))
			if unbuiltStepType(string(s.Type)) != "" {
				t.Errorf("%s runs, yet is refused as unbuilt", s.Type)
			}
		} else if got := unbuiltStepType(strings.ToUpper(string(s.Type))); got != s.Instead {
			t.Errorf("%s refused with %q, want %q", s.Type, got, s.Instead)
		}
		if s.Config != nil && DefaultStepConfig()[string(s.Type)] == nil {
			t.Errorf("%s's config fields are not in DefaultStepConfig", s.Type)
		}
	}
	if !slices.Equal(DefaultStepTypes(), runnable) {
		t.Errorf("DefaultStepTypes = %v, want the table's runnable %v", DefaultStepTypes(), runnable)
	}
	if !slices.Equal(StepTypeNames()[:2], []string{"NoOp", "Sleep"}) || len(StepTypeNames()) != len(StepTypes()) {
		t.Errorf("StepTypeNames = %v", StepTypeNames())
	}
	if unbuiltStepType("Join") == "" || unbuiltStepType("Whatever") != "" {
		t.Error("join is refused with advice, an unknown type without")
	}
}
