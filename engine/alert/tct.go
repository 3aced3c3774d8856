package alert

import (
	"fmt"
	"strconv"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// targetRunDate is the run param that names the date a run is for
// (yyyyMMdd); a completed_by_hour TCT counts from its midnight.
const targetRunDate = "TARGET_RUN_DATE"

// Deadline is a run's target completion time (Maestro's completed_by_ts):
//   - completed_by_ts: that instant;
//   - duration_minutes: the run's time (RUN_TS) plus the duration;
//   - completed_by_hour: that hour of the run's date, less a second, in tz
//     (the TCT's own, else the workflow's first time trigger's, else UTC).
//     The run's date is its TARGET_RUN_DATE param when it has one, else
//     the date of RUN_TS in tz.
//
// RUN_TS is the run's RUN_TS param; created stands in when it has none.
func Deadline(t *workflow.Tct, vals params.Values, created time.Time) (time.Time, error) {
	runTS := created
	if v, ok := vals[params.RunTS]; ok {
		if ms, ok := asInt(v.Value); ok {
			runTS = time.UnixMilli(ms)
		}
	}
	switch {
	case t.CompletedByTs != nil:
		return time.UnixMilli(*t.CompletedByTs), nil
	case t.DurationMinutes != nil:
		return runTS.Add(time.Duration(*t.DurationMinutes) * time.Minute), nil
	case t.CompletedByHour != nil:
		tz := t.Tz
		if tz == "" {
			if v, ok := vals[params.FirstTimeTriggerTimezone]; ok {
				tz, _ = v.Value.(string)
			}
		}
		if tz == "" {
			tz = "UTC"
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return time.Time{}, fmt.Errorf("tct time zone %q: %w", tz, err)
		}
		y, m, d := runTS.In(loc).Date()
		if v, ok := vals[targetRunDate]; ok {
			if day, err := parseDate(v.Value, loc); err == nil {
				y, m, d = day.Date()
			}
		}
		return time.Date(y, m, d, 0, 0, 0, 0, loc).Add(time.Duration(*t.CompletedByHour)*time.Hour - time.Second), nil
	}
	return time.Time{}, fmt.Errorf("tct sets no time")
}

func parseDate(v any, loc *time.Location) (time.Time, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	default:
		n, ok := asInt(v)
		if !ok {
			return time.Time{}, fmt.Errorf("not a date: %v", v)
		}
		s = strconv.FormatInt(n, 10)
	}
	return time.ParseInLocation("20060102", s, loc)
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}
