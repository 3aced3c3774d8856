package trigger

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is a time trigger's state.
type State string

// States of a time trigger. A trigger that has no row (its workflow has no
// active version, or the active version does not have it) is "".
const (
	// StateActive: it fires at next_fire_at.
	StateActive State = "ACTIVE"
	// StateDisabled: the workflow's properties set time_trigger_disabled.
	StateDisabled State = "DISABLED"
	// StateExhausted: its schedule has no fire time left (a Quartz year
	// in the past).
	StateExhausted State = "EXHAUSTED"
	// StateInvalid: its stored definition does not compile any more (a
	// form earlier versions accepted); it never fires.
	StateInvalid State = "INVALID"
)

// transitions lists the states each state may become; "" is no row.
var transitions = map[State][]State{
	"":             {StateActive, StateDisabled, StateExhausted, StateInvalid},
	StateActive:    {StateActive, StateDisabled, StateExhausted, StateInvalid, ""},
	StateDisabled:  {StateDisabled, StateActive, StateExhausted, ""},
	StateExhausted: {StateExhausted, StateDisabled, ""},
	StateInvalid:   {StateInvalid, ""},
}

// ErrInvalidTransition reports a state change the lifecycle does not allow.
var ErrInvalidTransition = errors.New("invalid time trigger transition")

// Transition checks that from may become to.
func Transition(from, to State) error {
	if !slices.Contains(transitions[from], to) {
		return fmt.Errorf("%w: %q to %q", ErrInvalidTransition, from, to)
	}
	return nil
}

// Trigger is one stored time trigger.
type Trigger struct {
	WorkflowID string `json:"workflow_id"`
	Index      int    `json:"trigger_index"`
	Version    int64  `json:"workflow_version_id"`
	// Key is Maestro's toString of the trigger; request ids derive from it.
	Key string `json:"trigger_key"`
	// UUID is Maestro's time trigger uuid of the version, carried by the
	// TIME initiators of the runs the trigger starts.
	UUID       string          `json:"trigger_uuid"`
	Definition json.RawMessage `json:"time_trigger"`
	Timezone   string          `json:"timezone"`
	State      State           `json:"state"`
	// Error says why an INVALID trigger does not compile, or why the last
	// start it attempted was refused.
	Error string `json:"error,omitempty"`
	// DelaySeconds is the trigger's fuzzy delay for this workflow.
	DelaySeconds int `json:"fuzzy_delay_seconds"`
	// NextSchedule is the next scheduled time, NextFire when it is due
	// (NextSchedule plus the delay); both nil unless ACTIVE.
	NextSchedule *time.Time `json:"next_schedule_time,omitempty"`
	NextFire     *time.Time `json:"next_fire_time,omitempty"`
	// LastFire is the fire time of the last run the trigger started,
	// LastInstanceID that run, LastFiredAt when it was started.
	LastFire       *time.Time `json:"last_fire_time,omitempty"`
	LastInstanceID *int64     `json:"last_workflow_instance_id,omitempty"`
	LastFiredAt    *time.Time `json:"last_fired_at,omitempty"`
	// Missed counts the fire times the missed-fire policy skipped.
	Missed int64 `json:"missed_fire_times"`
}
