// Package schedule turns Maestro time-trigger definitions into fire times:
// cron expressions in the Unix (5 fields) and Quartz (6 or 7 fields, with
// '?', 'L', 'W', '#' and a year) forms, the predefined schedules (@daily,
// ...), intervals, a time zone per trigger with daylight-saving transitions
// handled as Vixie cron does, and Maestro's deterministic fuzzy delay.
//
// Cron fields are parsed by robfig/cron/v3; what it lacks (Quartz day-of-week
// numbering, 'L', 'W', '#' and the year) is translated or applied as a filter
// over its candidates. What cannot be honoured is refused with a *FieldError
// naming the cron field. See docs/triggers.md.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // trigger time zones, even where the system has no zoneinfo
)

// Schedule yields fire times.
type Schedule interface {
	// Next returns the first fire time strictly after t, or the zero time
	// when the schedule never fires again.
	Next(t time.Time) time.Time
}

// MinInterval is the shortest time allowed between two fire times of a
// trigger. Maestro allows two minutes; a one-minute cron ("* * * * *") is
// the most common schedule a new user tries, so it is allowed here.
const MinInterval = time.Minute

// DefaultTimezone is the zone of a trigger that names none (Maestro's).
const DefaultTimezone = "UTC"

// Kinds of trigger, as Maestro's time trigger types.
const (
	KindCron       = "CRON"
	KindPredefined = "PREDEFINED"
	KindInterval   = "INTERVAL"
)

// Trigger is a time trigger definition, field by field as in Maestro's
// JSON: Cron for CRON, Expression (such as "@daily") for PREDEFINED,
// Interval and optionally Start for INTERVAL.
type Trigger struct {
	Kind       string
	Cron       string
	Expression string
	// Interval is the INTERVAL trigger's duration as written ("3H"), Every
	// its length (the caller parses it).
	Interval string
	Every    time.Duration
	Start    string
	Timezone string
	// FuzzyMaxDelay spreads fire times over [0, FuzzyMaxDelay) by a
	// deterministic offset per trigger and workflow; zero means none.
	FuzzyMaxDelay time.Duration
	// FuzzyText is fuzzy_max_delay as Maestro prints it: the number, or the
	// string in double quotes; empty when unset. It is part of Key.
	FuzzyText string
}

// Compiled is a trigger ready to compute fire times.
type Compiled struct {
	Trigger
	// Location is the trigger's time zone.
	Location *time.Location
	sched    Schedule
	key      string
}

// Next returns the trigger's first scheduled time strictly after t, before
// the fuzzy delay is added; zero when it never fires again.
func (c *Compiled) Next(t time.Time) time.Time {
	n := c.sched.Next(t)
	if n.IsZero() {
		return n
	}
	return n.In(c.Location)
}

// Key identifies the trigger as Maestro's toString of it does; request ids,
// fuzzy delays and trigger uuids are derived from it.
func (c *Compiled) Key() string { return c.key }

// Key is Maestro's toString of a trigger, which Compiled.Key returns; it
// is defined for triggers that do not compile too.
func Key(t Trigger) string { return maestroKey(t) }

// TimezoneName returns the trigger's zone name, DefaultTimezone when it
// names none.
func (c *Compiled) TimezoneName() string {
	if c.Timezone == "" {
		return DefaultTimezone
	}
	return c.Timezone
}

// Preview returns the next n fire times after t of the trigger for the
// workflow, fuzzy delay included.
func (c *Compiled) Preview(workflowID string, after time.Time, n int) []time.Time {
	delay := c.Delay(workflowID)
	out := make([]time.Time, 0, n)
	t := after.Add(-delay)
	for len(out) < n {
		s := c.Next(t)
		if s.IsZero() {
			break
		}
		out = append(out, s.Add(delay))
		t = s
	}
	return out
}

// FieldError is a trigger definition that cannot be honoured: Field names
// the trigger's JSON field (cron, expression, interval, start, timezone)
// and, within a cron expression, Part names the cron field.
type FieldError struct {
	Field string
	Part  string
	// Value is the cron field's text, when Part names one.
	Value string
	Msg   string
}

func (e *FieldError) Error() string {
	switch {
	case e.Part != "" && e.Value != "":
		return fmt.Sprintf("%s field %q: %s", e.Part, e.Value, e.Msg)
	case e.Part != "":
		return e.Part + " field: " + e.Msg
	}
	return e.Msg
}

// Compile parses and checks a trigger. A *FieldError says what is wrong.
func Compile(t Trigger) (*Compiled, error) {
	c := &Compiled{Trigger: t}
	loc, err := loadLocation(t.Timezone)
	if err != nil {
		return nil, &FieldError{Field: "timezone", Msg: err.Error()}
	}
	c.Location = loc
	switch t.Kind {
	case KindCron:
		s, err := ParseCron(t.Cron, loc)
		if err != nil {
			return nil, withField(err, "cron")
		}
		c.sched = s
	case KindPredefined:
		spec, ok := Predefined(t.Expression)
		if !ok {
			return nil, &FieldError{Field: "expression", Msg: fmt.Sprintf(
				"unknown schedule %q; expected @hourly, @daily, @weekly, @monthly or @yearly", t.Expression)}
		}
		s, err := ParseCron(spec, loc)
		if err != nil {
			return nil, withField(err, "expression")
		}
		c.sched = s
	case KindInterval:
		if t.Timezone != "" {
			return nil, &FieldError{Field: "timezone", Msg: "not allowed for INTERVAL triggers: an interval is absolute time"}
		}
		s, err := newInterval(t.Every, t.Start)
		if err != nil {
			return nil, err
		}
		c.sched = s
	default:
		return nil, &FieldError{Field: "type", Msg: fmt.Sprintf("unknown trigger type %q; expected CRON, INTERVAL or PREDEFINED", t.Kind)}
	}
	if err := checkInterval(c.sched); err != nil {
		f := map[string]string{KindCron: "cron", KindPredefined: "expression", KindInterval: "interval"}[t.Kind]
		return nil, &FieldError{Field: f, Msg: err.Error()}
	}
	c.key = maestroKey(t)
	return c, nil
}

func withField(err error, field string) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.Field = field
		return fe
	}
	return &FieldError{Field: field, Msg: err.Error()}
}

// loadLocation loads a zone; empty is DefaultTimezone.
func loadLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if strings.EqualFold(tz, "local") {
		return nil, fmt.Errorf("time zone %q is the server's zone, not a fixed one; name a zone such as UTC or US/Pacific", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", tz)
	}
	return loc, nil
}

// checkInterval refuses a schedule whose fire times come closer than
// MinInterval, looking at its first ten fire times after a fixed date (so
// that validation is deterministic).
func checkInterval(s Schedule) error {
	t := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := s.Next(t)
	for range 10 {
		if prev.IsZero() {
			return nil
		}
		next := s.Next(prev)
		if next.IsZero() {
			return nil
		}
		if next.Sub(prev) < MinInterval {
			return fmt.Errorf("fires more often than once a minute (%s then %s)",
				prev.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339))
		}
		prev = next
	}
	return nil
}

// Predefined returns the Unix cron of a predefined schedule (@hourly,
// @daily, @weekly, @monthly, @yearly; the '@' is optional, case ignored), as
// Maestro defines them.
func Predefined(name string) (string, bool) {
	spec, ok := predefined[strings.ToLower(strings.TrimPrefix(strings.TrimSpace(name), "@"))]
	return spec, ok
}

var predefined = map[string]string{
	"hourly":  "0 * * * *",
	"daily":   "0 0 * * *",
	"weekly":  "0 0 * * 0",
	"monthly": "0 0 1 * *",
	"yearly":  "0 0 1 1 *",
}
