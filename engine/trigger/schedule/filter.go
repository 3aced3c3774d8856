package schedule

import "time"

// maxSteps bounds the candidates a filtered or daylight-saving-aware
// schedule looks at for one Next; a schedule that finds nothing within it
// never fires again.
const maxSteps = 20000

// filtered applies what robfig cannot express to its candidates: a day rule
// ('L', 'W', '#') and the Quartz year field. A rejected candidate skips to
// the next day (or the next allowed year), so a search costs at most a few
// steps per day.
type filtered struct {
	inner Schedule
	loc   *time.Location
	day   func(y int, m time.Month, d int) bool
	years []bool
}

func (f *filtered) Next(t time.Time) time.Time {
	for range maxSteps {
		c := f.inner.Next(t)
		if c.IsZero() {
			return c
		}
		lc := c.In(f.loc)
		y, m, d := lc.Date()
		if f.years != nil && (y < minYear || y > maxYear || !f.years[y-minYear]) {
			ny := f.nextYear(y)
			if ny == 0 {
				return time.Time{}
			}
			t = startOfDay(ny, time.January, 1, f.loc).Add(-time.Second)
			continue
		}
		if f.day != nil && !f.day(y, m, d) {
			t = startOfDay(y, m, d+1, f.loc).Add(-time.Second)
			continue
		}
		return c
	}
	return time.Time{}
}

// nextYear is the first allowed year after y, 0 when there is none.
func (f *filtered) nextYear(y int) int {
	for n := max(y+1, minYear); n <= maxYear; n++ {
		if f.years[n-minYear] {
			return n
		}
	}
	return 0
}

// startOfDay is the first instant of a local date (normalised, so day 32 is
// the next month's first), which is not midnight where a daylight-saving
// change skips midnight.
func startOfDay(y int, m time.Month, d int, loc *time.Location) time.Time {
	want := time.Date(y, m, d, 12, 0, 0, 0, time.UTC) // the normalised date
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	for range 48 {
		ly, lm, ld := t.In(loc).Date()
		if !time.Date(ly, lm, ld, 12, 0, 0, 0, time.UTC).Before(want) {
			return t
		}
		t = t.Add(30 * time.Minute)
	}
	return t
}
