package schedule

import "time"

// dstRule applies Vixie cron's rule for daylight-saving changes to a job at
// a particular time (neither its minute nor its hour is a wildcard): a fire
// time that falls in the hour skipped when clocks go forward fires once, at
// the first instant after the change; a fire time in the hour repeated when
// clocks go back fires once, at its first occurrence. Wildcard jobs
// (every N minutes, hourly) follow the wall clock unchanged: they fire in
// both passes of a repeated hour and not in a skipped one, which keeps
// their spacing in real time.
type dstRule struct {
	inner Schedule // the schedule in loc
	wall  Schedule // the same schedule on wall-clock time (UTC)
	loc   *time.Location
}

func (s *dstRule) Next(t time.Time) time.Time {
	c := s.inner.Next(t)
	for range maxSteps {
		if c.IsZero() || !s.repeated(c) {
			break
		}
		c = s.inner.Next(c)
	}
	if g := s.skipped(t, c); !g.IsZero() {
		return g
	}
	return c
}

// repeated reports whether c's wall-clock time already occurred earlier,
// before the clocks went back.
func (s *dstRule) repeated(c time.Time) bool {
	lc := c.In(s.loc)
	start, _ := lc.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := lc.Zone()
	_, before := start.Add(-time.Nanosecond).In(s.loc).Zone()
	return before > now && c.Sub(start) < time.Duration(before-now)*time.Second
}

// skipped returns the first forward change in (t, c] whose skipped wall
// times include one the schedule names, or zero. Without c it looks five
// years ahead.
func (s *dstRule) skipped(t, c time.Time) time.Time {
	limit := c
	if limit.IsZero() {
		limit = t.AddDate(5, 0, 0)
	}
	cur := t
	for range 1000 {
		_, end := cur.In(s.loc).ZoneBounds()
		if end.IsZero() || end.After(limit) {
			return time.Time{}
		}
		_, before := end.Add(-time.Nanosecond).In(s.loc).Zone()
		_, after := end.In(s.loc).Zone()
		if after > before && end.After(t) {
			gapStart := wallClock(end, before)
			gapEnd := wallClock(end, after)
			if w := s.wall.Next(gapStart.Add(-time.Second)); !w.IsZero() && w.Before(gapEnd) {
				return end.In(s.loc)
			}
		}
		cur = end
	}
	return time.Time{}
}

// wallClock is the wall-clock reading of instant t at a UTC offset, as a
// UTC time.
func wallClock(t time.Time, offsetSeconds int) time.Time {
	return t.Add(time.Duration(offsetSeconds) * time.Second).UTC()
}
