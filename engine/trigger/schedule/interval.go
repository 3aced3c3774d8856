package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// interval fires every `every` from start, in absolute time.
type interval struct {
	every time.Duration
	start time.Time
}

func (i *interval) Next(t time.Time) time.Time {
	if t.Before(i.start) {
		return i.start
	}
	d := t.Sub(i.start)
	if d > maxIntervalSpan {
		return time.Time{} // beyond any run's lifetime; also keeps n*every from overflowing
	}
	n := d/i.every + 1
	return i.start.Add(n * i.every)
}

// maxIntervalSpan is how far after its start an interval fires.
const maxIntervalSpan = 200 * 365 * 24 * time.Hour

// newInterval builds an INTERVAL trigger: every d from start. Without start
// the fire times are aligned to the Unix epoch (an interval of an hour fires
// on the hour, UTC).
func newInterval(d time.Duration, start string) (*interval, error) {
	if d <= 0 {
		return nil, &FieldError{Field: "interval", Msg: "interval is required"}
	}
	if d < MinInterval {
		return nil, &FieldError{Field: "interval", Msg: "must be at least one minute"}
	}
	i := &interval{every: d, start: time.Unix(0, 0).UTC()}
	if strings.TrimSpace(start) != "" {
		var err error
		if i.start, err = ParseStart(start); err != nil {
			return nil, &FieldError{Field: "start", Msg: err.Error()}
		}
	}
	return i, nil
}

// zoneAbbreviations are the offsets of the zone abbreviations Maestro's
// start dates carry ("2021-03-26 16:00:18.089PST"). Go's own parser gives
// an unknown abbreviation a zero offset, which would be silently wrong.
var zoneAbbreviations = map[string]int{
	"UTC": 0, "GMT": 0, "Z": 0,
	"PST": -8, "PDT": -7, "MST": -7, "MDT": -6, "CST": -6, "CDT": -5, "EST": -5, "EDT": -4,
	"AKST": -9, "AKDT": -8, "HST": -10, "BST": 1, "CET": 1, "CEST": 2, "JST": 9,
}

var startLayouts = []string{
	"2006-01-02 15:04:05.000", "2006-01-02 15:04:05", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05",
	"01-02-2006 15:04:05.000", "01-02-2006 15:04:05", "2006-01-02",
}

// ParseStart reads an INTERVAL trigger's start: RFC 3339, epoch
// milliseconds, or a date and time followed by a zone abbreviation such as
// PST (Maestro's "yyyy-MM-dd HH:mm:ss.SSSz" and "MM-dd-yyyy hh:mm:ss.SSSz").
func ParseStart(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	body := strings.TrimRight(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	abbr := s[len(body):]
	body = strings.TrimSpace(body)
	offset := 0
	if abbr != "" {
		h, ok := zoneAbbreviations[abbr]
		if !ok {
			return time.Time{}, fmt.Errorf("start %q: unknown time zone abbreviation %q; use RFC 3339 (2021-03-26T16:00:18-08:00)", s, abbr)
		}
		offset = h * 3600
	}
	for _, layout := range startLayouts {
		if t, err := time.ParseInLocation(layout, body, time.FixedZone(abbr, offset)); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("start %q is not a date and time; use RFC 3339 (2021-03-26T16:00:18-08:00) or epoch milliseconds", s)
}
