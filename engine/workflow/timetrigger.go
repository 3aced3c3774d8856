package workflow

import (
	"strconv"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
)

// ScheduleTrigger returns the trigger as engine/trigger/schedule reads it. A value
// that does not parse (an interval, a fuzzy delay) is left zero; validation
// reports it.
func (t *TimeTrigger) ScheduleTrigger() schedule.Trigger {
	st := schedule.Trigger{
		Kind: string(t.EffectiveType()), Cron: t.Cron, Expression: t.Expression,
		Interval: t.Interval, Start: t.Start, Timezone: t.Timezone,
	}
	if st.Kind == string(TimeTriggerInterval) {
		if d, err := ParseDuration(t.Interval); err == nil {
			st.Every = d
		}
	}
	if f := t.FuzzyMaxDelay; f != nil {
		// Maestro prints a ParsableLong as the number, or the string quoted.
		if f.IsText() {
			st.FuzzyText = `"` + f.Text + `"`
		} else {
			st.FuzzyText = strconv.FormatInt(f.Seconds, 10)
		}
		if d, err := f.Resolve(); err == nil && d > 0 {
			st.FuzzyMaxDelay = d
		}
	}
	return st
}
