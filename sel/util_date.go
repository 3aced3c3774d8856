package sel

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// This file implements Maestro's Util helpers. A "date int" is a yyyyMMdd
// date given as a long or a String; dates are UTC; every range excludes its
// end bound.

const msPerDay = 86_400_000

var dateIntFormat, dateIntHourFormat *formatter

func init() {
	dateIntFormat, _ = compileJodaPattern("YYYYMMdd")
	dateIntHourFormat, _ = compileJodaPattern("YYYYMMddHH")
}

// selString converts a long or String argument to text, as SEL's String
// constructor does for the Util helpers.
func (st *state) selString(p int, v value, what string) string {
	switch v.k {
	case kString:
		return v.s
	case kLong:
		return strconv.FormatInt(v.n, 10)
	}
	st.fail(p, KindType, "Util: invalid %s %s (want a long or a String)", what, javaString(v))
	return ""
}

// selLong converts a long or numeric String argument, as SEL's Long
// constructor does.
func (st *state) selLong(p int, v value, what string) int64 {
	switch v.k {
	case kLong:
		return v.n
	case kString:
		return st.parseJavaLong(p, v.s, 10, false)
	}
	st.fail(p, KindType, "Util: invalid %s %s (want a long or a String)", what, javaString(v))
	return 0
}

// parseDateInt parses a yyyyMMdd date int to days since the epoch.
func (st *state) parseDateInt(p int, v value) int64 {
	ms, _, err := st.parseJoda(dateIntFormat, st.selString(p, v, "date int"))
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
	}
	return floorDiv(ms, msPerDay)
}

func dateIntOf(days int64) int64 {
	y, m, d := civilFromDays(days)
	return y*10000 + int64(m)*100 + int64(d)
}

func dateIntString(days int64) string {
	y, m, d := civilFromDays(days)
	if y <= 0 {
		y = 1 - y // YYYY is the year of era
	}
	return fmt.Sprintf("%04d%02d%02d", y, m, d)
}

// utilDateIntToTs is Util.dateIntToTs(dateInt): epoch millis of UTC midnight.
func utilDateIntToTs(st *state, p int, a []value) value {
	return longV(st.parseDateInt(p, a[0]) * msPerDay)
}

// utilTsToDateInt is Util.tsToDateInt(ts): the UTC yyyyMMdd String.
func utilTsToDateInt(st *state, p int, a []value) value {
	ts := st.selLong(p, a[0], "timestamp")
	return strV(dateIntString(floorDiv(ts, msPerDay)))
}

// utilIncrementDateInt is Util.incrementDateInt(dateInt, days): a String.
func utilIncrementDateInt(st *state, p int, a []value) value {
	if a[1].k != kLong {
		st.fail(p, KindType, "Util.incrementDateInt: days must be a long, found %s", a[1].typeName())
	}
	days := int64(int32(a[1].n)) // Maestro passes an int
	return strV(dateIntString(st.parseDateInt(p, a[0]) + days))
}

// utilDateIntsBetween is Util.dateIntsBetween(from, to, step): the date ints
// from `from` (inclusive) to `to` (exclusive). A negative step walks the
// same days as Maestro does: the range [to, from) reversed, so the first
// element is the day before `from`.
func utilDateIntsBetween(st *state, p int, a []value) value {
	var inc int64
	switch a[2].k {
	case kLong, kString:
		s := javaString(a[2])
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			numberFormatError(st, p, s)
		}
		inc = n
	default:
		numberFormatError(st, p, javaString(a[2]))
	}
	from, to := a[0], a[1]
	switch {
	case inc < 0:
		from, to = to, from
	case inc == 0:
		st.fail(p, KindRuntime, "IllegalArgumentException: Invalid incremental interval value: 0")
	}
	d1, d2 := st.parseDateInt(p, from), st.parseDateInt(p, to)
	step := inc
	if step < 0 {
		step = -step
	}
	days := d2 - d1
	count := int64(0)
	if days > 0 {
		count = (days + step - 1) / step
	}
	st.checkArrayLen(p, int(min(count, int64(st.lim.MaxArrayLength))))
	arr := &array{elem: kLong, v: make([]value, count)}
	for i := int64(0); i < count; i++ {
		arr.v[i] = longV(dateIntOf(d1 + i*step))
	}
	if inc < 0 {
		for i, j := 0, len(arr.v)-1; i < j; i, j = i+1, j-1 {
			arr.v[i], arr.v[j] = arr.v[j], arr.v[i]
		}
	}
	return value{k: kArray, o: arr}
}

// utilIntsBetween is Util.intsBetween(from, to, step): from inclusive, to
// exclusive, counting down for a negative step. Arguments are ints.
func utilIntsBetween(st *state, p int, a []value) value {
	from := int64(int32(st.selLong(p, a[0], "from")))
	to := int64(int32(st.selLong(p, a[1], "to")))
	inc := int64(int32(st.selLong(p, a[2], "step")))
	var count int64
	switch {
	case inc > 0 && from < to:
		count = (to - from + inc - 1) / inc
	case inc < 0 && from > to:
		count = (from - to - inc - 1) / -inc
	case inc == 0 && from < to:
		st.fail(p, KindLimit, "Util.intsBetween with step 0 never ends (array limit %d)", st.lim.MaxArrayLength)
	}
	st.checkArrayLen(p, int(min(count, int64(st.lim.MaxArrayLength))))
	arr := &array{elem: kLong, v: make([]value, count)}
	for i := int64(0); i < count; i++ {
		arr.v[i] = longV(from + i*inc)
	}
	return value{k: kArray, o: arr}
}

// utilDateIntHourToTs is Util.dateIntHourToTs(dateInt, hour, zone,
// dayOffset, hourOffset): the instant of dateInt+hour in zone, minus the
// offsets.
func utilDateIntHourToTs(st *state, p int, a []value) value {
	text := st.selString(p, a[0], "date int") + st.selString(p, a[1], "hour")
	if a[2].k != kString {
		st.fail(p, KindType, "Util.dateIntHourToTs: the zone must be a String, found %s", a[2].typeName())
	}
	z, err := zoneForID(a[2].s)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
	}
	fm := *dateIntHourFormat
	fm.zone = z
	ms, _, err := st.parseJoda(&fm, text)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
	}
	dayOff := int64(int32(st.selLong(p, a[3], "day offset")))
	hourOff := int64(int32(st.selLong(p, a[4], "hour offset")))
	f := addDays(fieldsOf(ms, z), -dayOff)
	ms, err = composeLenient(f, z)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalFieldValueException: %v", err)
	}
	return longV(ms - hourOff*3_600_000)
}

// utilTimeoutForDateTimeDeadline is Util.timeoutForDateTimeDeadline(dt,
// "1 day"): the milliseconds left until dt plus the duration, never
// negative, as "N milliseconds".
func utilTimeoutForDateTimeDeadline(st *state, p int, a []value) value {
	if a[0].k != kDateTime || a[1].k != kString {
		st.fail(p, KindType, "Util.timeoutForDateTimeDeadline needs (DateTime, String), found (%s, %s)", a[0].typeName(), a[1].typeName())
	}
	return st.timeoutFor(p, a[0].n, a[1].s)
}

// utilTimeoutForDateIntDeadline is Util.timeoutForDateIntDeadline(dateInt,
// "1 day"), counting from UTC midnight of dateInt.
func utilTimeoutForDateIntDeadline(st *state, p int, a []value) value {
	if a[1].k != kString {
		st.fail(p, KindType, "Util.timeoutForDateIntDeadline: the duration must be a String, found %s", a[1].typeName())
	}
	return st.timeoutFor(p, st.parseDateInt(p, a[0])*msPerDay, a[1].s)
}

func (st *state) timeoutFor(p int, start int64, duration string) value {
	d, err := parseWordPeriod(duration)
	if err != nil {
		st.failCause(p, KindRuntime, err, "%v", err)
	}
	remaining := start + d - st.now()
	if remaining < 0 {
		remaining = 0
	}
	return strV(strconv.FormatInt(remaining, 10) + " milliseconds")
}

var periodToken = regexp.MustCompile(`^\s*(-?\d+)\s+([A-Za-z]+)\s*(?:,\s*(?:and\s+)?|and\s+)?`)

var periodUnits = map[string]int64{
	"week": 7 * msPerDay, "day": msPerDay, "hour": 3_600_000, "minute": 60_000,
	"second": 1000, "millisecond": 1,
}

// parseWordPeriod parses Joda's English word-based period format ("1 day",
// "2 hours and 30 minutes", "1 week, 2 days and 3 hours") into milliseconds
// with standard 24-hour days. Years and months have no standard length and
// are rejected, as Joda's toStandardDuration does.
func parseWordPeriod(s string) (int64, error) {
	rest := s
	var total int64
	n := 0
	for strings.TrimSpace(rest) != "" {
		m := periodToken.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("IllegalArgumentException: Invalid format: %q is malformed at %q", s, strings.TrimSpace(rest))
		}
		v, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("IllegalArgumentException: Invalid format: %q", s)
		}
		unit := strings.TrimSuffix(strings.ToLower(m[2]), "s")
		switch unit {
		case "year", "month":
			return 0, fmt.Errorf("UnsupportedOperationException: Cannot convert to Duration as this period contains %ss and %ss vary in length", unit, unit)
		}
		mul, ok := periodUnits[unit]
		if !ok {
			return 0, fmt.Errorf("IllegalArgumentException: Invalid format: %q is malformed at %q", s, strings.TrimSpace(rest))
		}
		total += v * mul
		rest = rest[len(m[0]):]
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("IllegalArgumentException: Invalid format: %q", s)
	}
	return total, nil
}
