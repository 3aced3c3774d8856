package external

import "time"

// Backoff is the delay before the next poll of a job that has been
// running for elapsed: base while the job is young, then a tenth of its
// age (a job an hour old is looked at every six minutes at most), capped
// at max. It needs no state of its own, so a poll writes nothing to the
// attempt's row, and a new owner after a takeover goes on at the same
// pace. Jobs whose service reports their end by an event need no poll at
// all; this is the fallback.
func Backoff(base, max, elapsed time.Duration) time.Duration {
	d := elapsed / 10
	if d < base {
		d = base
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// LaunchedFor is how long ago the attempt's launch was intended, read from
// its runtime data (KeyIntendedAt); zero when unknown.
func LaunchedFor(data map[string]any, now time.Time) time.Duration {
	s, _ := data[KeyIntendedAt].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || now.Before(t) {
		return 0
	}
	return now.Sub(t)
}
