package scheduler

import (
	"time"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
)

// maxCount bounds the counting of skipped fire times; beyond it the count
// is a lower bound.
const maxCount = 10000

// plan decides which scheduled times of a due trigger fire now (the
// missed-fire policy, docs/triggers.md). next is the trigger's next
// scheduled time, delay its fuzzy delay; a scheduled time s is due when
// s+delay <= now, and late by now-(s+delay).
//
//   - Due times late by at most window all fire, in order (at most max of
//     them; the rest fire in the next batch): a short outage of the
//     scheduler, a crash mid-batch or a retried invocation loses none.
//   - Due times later than that are missed. When a due time within the
//     window exists, the missed ones are skipped; otherwise only the latest
//     missed one fires, once, as Maestro does: an hour-long outage starts
//     one run of an hourly trigger, not a burst.
//
// It returns the scheduled times to fire, the trigger's next scheduled
// time after them (zero: none left), and how many were skipped.
func plan(s schedule.Schedule, next time.Time, delay time.Duration, now time.Time, window time.Duration, max int) (fire []time.Time, after time.Time, missed int64) {
	due := now.Add(-delay)     // the latest scheduled time that is due
	cutoff := due.Add(-window) // scheduled times before it are missed
	if next.Before(cutoff) {
		first := s.Next(cutoff.Add(-time.Nanosecond)) // the first at or after the cutoff
		if first.IsZero() || first.After(due) {
			latest := latestDue(s, next, due)
			return []time.Time{latest}, s.Next(latest), count(s, next, latest)
		}
		missed = count(s, next, first)
		next = first
	}
	for !next.IsZero() && !next.After(due) && len(fire) < max {
		fire = append(fire, next)
		next = s.Next(next)
	}
	return fire, next, missed
}

// latestDue is the latest scheduled time at or before due, given that from
// is one: it looks back from due over doubling spans, so that a trigger
// missed for a year costs a few dozen steps, not one per fire time.
func latestDue(s schedule.Schedule, from, due time.Time) time.Time {
	for span := time.Minute; ; span *= 2 {
		probe := due.Add(-span)
		if !probe.After(from) {
			probe = from
		}
		x := s.Next(probe.Add(-time.Nanosecond))
		if !x.IsZero() && !x.After(due) {
			for range maxCount * 10 {
				y := s.Next(x)
				if y.IsZero() || y.After(due) {
					break
				}
				x = y
			}
			return x
		}
		if probe.Equal(from) {
			return from
		}
	}
}

// count counts the scheduled times in [from, until), up to maxCount.
func count(s schedule.Schedule, from, until time.Time) int64 {
	var n int64
	for t := from; !t.IsZero() && t.Before(until) && n < maxCount; t = s.Next(t) {
		n++
	}
	return n
}
