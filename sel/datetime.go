package sel

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zone data for DateTimeZone.forID on hosts without it
)

// This file implements the Joda-Time API that SEL exposes: DateTime,
// DateTimeZone, DateTimeFormat/DateTimeFormatter, DateTime.Property and
// Days. Instants are epoch milliseconds; the default zone is UTC (Maestro's
// servers run in UTC).

// zone is a DateTimeZone.
type zone struct {
	id  string
	loc *time.Location
}

var utcZone = &zone{id: "UTC", loc: time.UTC}

var (
	zoneCache   sync.Map // id -> *zone
	zoneIDRegex = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$`)
	offsetRegex = regexp.MustCompile(`^([+-])(\d{1,2})(?::?(\d{2}))?$`)
)

// zoneForID is DateTimeZone.forID.
func zoneForID(id string) (*zone, error) {
	if id == "UTC" {
		return utcZone, nil
	}
	if z, ok := zoneCache.Load(id); ok {
		return z.(*zone), nil
	}
	if m := offsetRegex.FindStringSubmatch(id); m != nil {
		h, _ := strconv.Atoi(m[2])
		mi := 0
		if m[3] != "" {
			mi, _ = strconv.Atoi(m[3])
		}
		if h > 23 || mi > 59 {
			return nil, fmt.Errorf("The datetime zone id '%s' is not recognised", id)
		}
		off := (h*60 + mi) * 60
		if m[1] == "-" {
			off = -off
		}
		return fixedZone(off), nil
	}
	if !zoneIDRegex.MatchString(id) || id == "Local" || len(id) > 64 {
		return nil, fmt.Errorf("The datetime zone id '%s' is not recognised", id)
	}
	loc, err := time.LoadLocation(id)
	if err != nil {
		return nil, fmt.Errorf("The datetime zone id '%s' is not recognised", id)
	}
	z := &zone{id: id, loc: loc}
	zoneCache.Store(id, z)
	return z, nil
}

// fixedZone returns the zone for a fixed offset in seconds, named like Joda
// ("+05:30"); offset 0 is UTC.
func fixedZone(offSec int) *zone {
	if offSec == 0 {
		return utcZone
	}
	id := formatOffset(offSec, true)
	if z, ok := zoneCache.Load(id); ok {
		return z.(*zone)
	}
	z := &zone{id: id, loc: time.FixedZone(id, offSec)}
	zoneCache.Store(id, z)
	return z
}

func formatOffset(offSec int, colon bool) string {
	sign := '+'
	if offSec < 0 {
		sign = '-'
		offSec = -offSec
	}
	h, m := offSec/3600, offSec/60%60
	if colon {
		return fmt.Sprintf("%c%02d:%02d", sign, h, m)
	}
	return fmt.Sprintf("%c%02d%02d", sign, h, m)
}

func zoneOfLocation(loc *time.Location) *zone {
	if loc == nil || loc == time.UTC || loc.String() == "UTC" {
		return utcZone
	}
	return &zone{id: loc.String(), loc: loc}
}

func dtV(ms int64, z *zone) value { return value{k: kDateTime, n: ms, o: z} }

// Joda's supported year range.
const (
	minYear = -292275054
	maxYear = 292278993
)

// fields are the local calendar fields of an instant in a zone.
type fields struct {
	year, month, day, hour, minute, second, milli int
	weekday                                       int // 1 = Monday ... 7 = Sunday
	yearDay                                       int
	offset                                        int // seconds east of UTC
	abbrev                                        string
}

func fieldsOf(ms int64, z *zone) fields {
	t := time.UnixMilli(ms).In(z.loc)
	name, off := t.Zone()
	wd := int(t.Weekday())
	if wd == 0 {
		wd = 7
	}
	return fields{
		year: t.Year(), month: int(t.Month()), day: t.Day(),
		hour: t.Hour(), minute: t.Minute(), second: t.Second(), milli: t.Nanosecond() / 1e6,
		weekday: wd, yearDay: t.YearDay(), offset: off, abbrev: name,
	}
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysInMonth(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func daysInYear(y int) int {
	if isLeap(y) {
		return 366
	}
	return 365
}

// fieldRangeError mirrors Joda's IllegalFieldValueException message.
func fieldRangeError(field string, v, lo, hi int) error {
	return fmt.Errorf("Value %d for %s must be in the range [%d,%d]", v, field, lo, hi)
}

// compose turns local fields in z into an instant. It fails for an invalid
// field and for a local time skipped by a daylight-saving transition.
func compose(f fields, z *zone) (int64, error) {
	switch {
	case f.year < minYear || f.year > maxYear:
		return 0, fieldRangeError("year", f.year, minYear, maxYear)
	case f.month < 1 || f.month > 12:
		return 0, fieldRangeError("monthOfYear", f.month, 1, 12)
	case f.day < 1 || f.day > daysInMonth(f.year, f.month):
		return 0, fieldRangeError("dayOfMonth", f.day, 1, daysInMonth(f.year, f.month))
	case f.hour < 0 || f.hour > 23:
		return 0, fieldRangeError("hourOfDay", f.hour, 0, 23)
	case f.minute < 0 || f.minute > 59:
		return 0, fieldRangeError("minuteOfHour", f.minute, 0, 59)
	case f.second < 0 || f.second > 59:
		return 0, fieldRangeError("secondOfMinute", f.second, 0, 59)
	case f.milli < 0 || f.milli > 999:
		return 0, fieldRangeError("millisOfSecond", f.milli, 0, 999)
	}
	if z == utcZone {
		days := daysFromCivil(int64(f.year), f.month, f.day)
		return days*86_400_000 + int64(f.hour)*3_600_000 + int64(f.minute)*60_000 + int64(f.second)*1000 + int64(f.milli), nil
	}
	t := time.Date(f.year, time.Month(f.month), f.day, f.hour, f.minute, f.second, f.milli*1e6, z.loc)
	if t.Hour() != f.hour || t.Minute() != f.minute || t.Day() != f.day {
		return 0, fmt.Errorf("Illegal instant due to time zone offset transition (%s)", z.id)
	}
	return t.UnixMilli(), nil
}

// composeLenient is compose for arithmetic results: a local time in a
// daylight-saving gap moves forward as Joda does instead of failing.
func composeLenient(f fields, z *zone) (int64, error) {
	ms, err := compose(f, z)
	if err != nil && strings.HasPrefix(err.Error(), "Illegal instant") {
		t := time.Date(f.year, time.Month(f.month), f.day, f.hour, f.minute, f.second, f.milli*1e6, z.loc)
		return t.UnixMilli(), nil
	}
	return ms, err
}

// daysFromCivil returns days since 1970-01-01 for a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := int64((153*mp+2)/5 + d - 1)
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era := z
	if era < 0 {
		era -= 146096
	}
	era /= 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp)
	if mp < 10 {
		m += 3
	} else {
		m -= 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// addDays moves local fields by n calendar days.
func addDays(f fields, n int64) fields {
	y, m, d := civilFromDays(daysFromCivil(int64(f.year), f.month, f.day) + n)
	f.year, f.month, f.day = int(y), m, d
	return f
}

// addMonths moves local fields by n months, clamping the day of month.
func addMonths(f fields, n int64) fields {
	total := int64(f.year)*12 + int64(f.month-1) + n
	f.year = int(floorDiv(total, 12))
	f.month = int(total-int64(f.year)*12) + 1
	if dim := daysInMonth(f.year, f.month); f.day > dim {
		f.day = dim
	}
	return f
}

// isoWeek returns the ISO week-year and week of local fields.
func isoWeek(f fields) (int, int) {
	return time.Date(f.year, time.Month(f.month), f.day, 12, 0, 0, 0, time.UTC).ISOWeek()
}

func weeksInWeekyear(y int) int {
	_, w := time.Date(y, 12, 28, 12, 0, 0, 0, time.UTC).ISOWeek()
	return w
}

// mondayOfWeek returns the local date of Monday of ISO week w of weekyear y.
func mondayOfWeek(y, w int) (int64, int, int) {
	jan4 := daysFromCivil(int64(y), 1, 4)
	// Joda/ISO weekday of Jan 4: 1970-01-01 was a Thursday (4).
	wd := int((jan4%7+7+3)%7) + 1
	monday := jan4 - int64(wd-1) + int64(w-1)*7
	return civilFromDays(monday)
}

// now returns the evaluation's current instant in milliseconds.
func (st *state) now() int64 { return st.prog.now().UnixMilli() }

// --- DateTime construction ---

func newDateTime(st *state, p int, args []value) value {
	now := st.now()
	switch len(args) {
	case 0:
		return dtV(now, utcZone)
	case 1, 2:
		z := utcZone
		if len(args) == 2 {
			if args[1].k != kZone {
				st.fail(p, KindType, "new DateTime(instant, zone): the second argument must be a DateTimeZone, found %s", args[1].typeName())
			}
			z = args[1].zone()
		}
		a := args[0]
		switch a.k {
		case kLong:
			return dtV(a.n, z)
		case kDateTime:
			return dtV(a.n, z)
		case kZone:
			if len(args) == 1 {
				return dtV(now, a.zone())
			}
		case kString:
			ms, _, err := parseISO(a.s, z)
			if err != nil {
				st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
			}
			return dtV(ms, z)
		case kNull:
			return dtV(now, z)
		}
		st.fail(p, KindType, "no DateTime constructor for %s", a.typeName())
	}
	// new DateTime(year, month, day, hour, minute[, second[, millis]][, zone])
	n := len(args)
	z := utcZone
	if args[n-1].k == kZone {
		z = args[n-1].zone()
		n--
	}
	if n < 5 || n > 7 {
		st.fail(p, KindType, "no DateTime constructor with %d arguments", len(args))
	}
	var ints [7]int
	for i := 0; i < n; i++ {
		ints[i] = st.intArg(p, args[i], "DateTime field")
	}
	ms, err := compose(fields{year: ints[0], month: ints[1], day: ints[2], hour: ints[3], minute: ints[4], second: ints[5], milli: ints[6]}, z)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalFieldValueException: %v", err)
	}
	return dtV(ms, z)
}

var isoRegex = regexp.MustCompile(`^([+-]?\d{4,9})(?:-(\d{2})(?:-(\d{2}))?)?(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?(Z|[+-]\d{2}(?::?\d{2})?)?$`)

// parseISO parses an ISO-8601 date-time as Joda's ISODateTimeFormat parser
// does. A local time is taken in z unless the text carries an offset.
func parseISO(s string, z *zone) (ms int64, off *int, err error) {
	m := isoRegex.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, nil, fmt.Errorf("Invalid format: %q", s)
	}
	atoi := func(x string, def int) int {
		if x == "" {
			return def
		}
		n, _ := strconv.Atoi(x)
		return n
	}
	f := fields{year: atoi(m[1], 1970), month: atoi(m[2], 1), day: atoi(m[3], 1), hour: atoi(m[4], 0), minute: atoi(m[5], 0), second: atoi(m[6], 0)}
	if m[7] != "" {
		frac := (m[7] + "00")[:3]
		f.milli = atoi(frac, 0)
	}
	if m[8] != "" {
		o := 0
		if m[8] != "Z" {
			om := offsetRegex.FindStringSubmatch(m[8])
			if om == nil {
				return 0, nil, fmt.Errorf("Invalid format: %q", s)
			}
			o = (atoi(om[2], 0)*60 + atoi(om[3], 0)) * 60
			if om[1] == "-" {
				o = -o
			}
		}
		local, err := compose(f, utcZone)
		if err != nil {
			return 0, nil, fmt.Errorf("Cannot parse %q: %v", s, err)
		}
		return local - int64(o)*1000, &o, nil
	}
	ms, err = compose(f, z)
	if err != nil {
		return 0, nil, fmt.Errorf("Cannot parse %q: %v", s, err)
	}
	return ms, nil, nil
}

// isoString is DateTime.toString(): yyyy-MM-dd'T'HH:mm:ss.SSSZZ with Z for
// a zero offset.
func isoString(ms int64, z *zone) string {
	f := fieldsOf(ms, z)
	var b strings.Builder
	writeYear(&b, f.year, 4)
	fmt.Fprintf(&b, "-%02d-%02dT%02d:%02d:%02d.%03d", f.month, f.day, f.hour, f.minute, f.second, f.milli)
	if f.offset == 0 {
		b.WriteByte('Z')
	} else {
		b.WriteString(formatOffset(f.offset, true))
	}
	return b.String()
}

func writeYear(b *strings.Builder, y, width int) {
	if y < 0 {
		b.WriteByte('-')
		y = -y
	}
	s := strconv.Itoa(y)
	for i := len(s); i < width; i++ {
		b.WriteByte('0')
	}
	b.WriteString(s)
}

// --- DateTime methods ---

// dtField describes a DateTime field for properties and with/get methods.
type dtField struct {
	name string
	get  func(f fields) int
	min  func(f fields) int
	max  func(f fields) int
	set  func(f fields, v int) (fields, error)
	text func(v int, short bool) string
}

var monthNames = [...]string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
var dayNames = [...]string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

func constMin(v int) func(fields) int { return func(fields) int { return v } }

func setChecked(name string, lo, hi func(fields) int, apply func(f fields, v int) fields) func(fields, int) (fields, error) {
	return func(f fields, v int) (fields, error) {
		if v < lo(f) || v > hi(f) {
			return f, fieldRangeError(name, v, lo(f), hi(f))
		}
		return apply(f, v), nil
	}
}

var dtFields = map[string]*dtField{}

func init() {
	add := func(name string, get func(fields) int, lo, hi func(fields) int, apply func(fields, int) fields) {
		dtFields[name] = &dtField{name: name, get: get, min: lo, max: hi, set: setChecked(name, lo, hi, apply)}
	}
	add("year", func(f fields) int { return f.year }, constMin(minYear), constMin(maxYear), func(f fields, v int) fields {
		f.year = v
		if dim := daysInMonth(f.year, f.month); f.day > dim {
			f.day = dim
		}
		return f
	})
	add("monthOfYear", func(f fields) int { return f.month }, constMin(1), constMin(12), func(f fields, v int) fields {
		f.month = v
		if dim := daysInMonth(f.year, f.month); f.day > dim {
			f.day = dim
		}
		return f
	})
	add("dayOfMonth", func(f fields) int { return f.day }, constMin(1), func(f fields) int { return daysInMonth(f.year, f.month) },
		func(f fields, v int) fields { f.day = v; return f })
	add("dayOfYear", func(f fields) int { return f.yearDay }, constMin(1), func(f fields) int { return daysInYear(f.year) },
		func(f fields, v int) fields { return addDays(f, int64(v-f.yearDay)) })
	add("dayOfWeek", func(f fields) int { return f.weekday }, constMin(1), constMin(7),
		func(f fields, v int) fields { return addDays(f, int64(v-f.weekday)) })
	add("weekOfWeekyear", func(f fields) int { _, w := isoWeek(f); return w }, constMin(1),
		func(f fields) int { y, _ := isoWeek(f); return weeksInWeekyear(y) },
		func(f fields, v int) fields { _, w := isoWeek(f); return addDays(f, int64(v-w)*7) })
	add("weekyear", func(f fields) int { y, _ := isoWeek(f); return y }, constMin(minYear+1), constMin(maxYear-1),
		func(f fields, v int) fields {
			_, w := isoWeek(f)
			if max := weeksInWeekyear(v); w > max {
				w = max
			}
			y, m, d := mondayOfWeek(v, w)
			f.year, f.month, f.day = int(y), m, d
			return addDays(f, int64(f.weekday-1))
		})
	add("hourOfDay", func(f fields) int { return f.hour }, constMin(0), constMin(23), func(f fields, v int) fields { f.hour = v; return f })
	add("minuteOfHour", func(f fields) int { return f.minute }, constMin(0), constMin(59), func(f fields, v int) fields { f.minute = v; return f })
	add("minuteOfDay", func(f fields) int { return f.hour*60 + f.minute }, constMin(0), constMin(1439),
		func(f fields, v int) fields { f.hour, f.minute = v/60, v%60; return f })
	add("secondOfMinute", func(f fields) int { return f.second }, constMin(0), constMin(59), func(f fields, v int) fields { f.second = v; return f })
	add("secondOfDay", func(f fields) int { return f.hour*3600 + f.minute*60 + f.second }, constMin(0), constMin(86399),
		func(f fields, v int) fields { f.hour, f.minute, f.second = v/3600, v/60%60, v%60; return f })
	add("millisOfSecond", func(f fields) int { return f.milli }, constMin(0), constMin(999), func(f fields, v int) fields { f.milli = v; return f })
	add("millisOfDay", func(f fields) int { return ((f.hour*60+f.minute)*60+f.second)*1000 + f.milli }, constMin(0), constMin(86_399_999),
		func(f fields, v int) fields {
			f.hour, f.minute, f.second, f.milli = v/3_600_000, v/60_000%60, v/1000%60, v%1000
			return f
		})
	dtFields["monthOfYear"].text = func(v int, short bool) string {
		if short {
			return monthNames[v-1][:3]
		}
		return monthNames[v-1]
	}
	dtFields["dayOfWeek"].text = func(v int, short bool) string {
		if short {
			return dayNames[v-1][:3]
		}
		return dayNames[v-1]
	}
}

// property is a DateTime.Property: a DateTime and one of its fields.
type property struct {
	ms    int64
	z     *zone
	field *dtField
}

// withField sets a field through local fields and recomposes the instant.
func (st *state) withField(p int, ms int64, z *zone, fd *dtField, v int) value {
	f := fieldsOf(ms, z)
	nf, err := fd.set(f, v)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalFieldValueException: %v", err)
	}
	out, err := composeLenient(nf, z)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalFieldValueException: %v", err)
	}
	return dtV(out, z)
}

var plusUnits = map[string]int64{
	"Hours": 3_600_000, "Minutes": 60_000, "Seconds": 1000, "Millis": 1,
}

func (st *state) dateTimeMethod(e *callExpr, recv value, args []value) value {
	ms, z := recv.n, recv.zone()
	n := len(args)
	name := e.name
	switch {
	case n == 1 && (strings.HasPrefix(name, "plus") || strings.HasPrefix(name, "minus")):
		sign := int64(1)
		unit := strings.TrimPrefix(name, "plus")
		if strings.HasPrefix(name, "minus") {
			sign, unit = -1, strings.TrimPrefix(name, "minus")
		}
		if unit == "" {
			// plus(long durationMillis) / minus(long)
			if args[0].k != kLong {
				st.fail(e.p, KindType, "DateTime.%s needs a long duration in milliseconds", name)
			}
			return dtV(ms+sign*args[0].n, z)
		}
		amount := sign * int64(st.intArg(e.p, args[0], name+" argument"))
		if mul, ok := plusUnits[unit]; ok {
			return dtV(ms+amount*mul, z)
		}
		f := fieldsOf(ms, z)
		switch unit {
		case "Years":
			f = addMonths(f, amount*12)
		case "Months":
			f = addMonths(f, amount)
		case "Weeks":
			f = addDays(f, amount*7)
		case "Days":
			f = addDays(f, amount)
		default:
			st.noMethod(e, recv, args)
		}
		out, err := composeLenient(f, z)
		if err != nil {
			st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
		}
		return dtV(out, z)
	case n == 1 && len(name) > 4 && strings.HasPrefix(name, "with") && name != "withZone" && name != "withZoneRetainFields":
		key := strings.TrimPrefix(name, "with")
		key = strings.ToLower(key[:1]) + key[1:]
		if fd, ok := dtFields[key]; ok {
			return st.withField(e.p, ms, z, fd, st.intArg(e.p, args[0], name+" argument"))
		}
	case n == 0 && strings.HasPrefix(name, "get") && len(name) > 3:
		switch name {
		case "getMillis":
			return longV(ms)
		case "getZone":
			return value{k: kZone, o: z}
		}
		key := strings.TrimPrefix(name, "get")
		key = strings.ToLower(key[:1]) + key[1:]
		if fd, ok := dtFields[key]; ok {
			return longV(int64(fd.get(fieldsOf(ms, z))))
		}
	case n == 0:
		if fd, ok := dtFields[name]; ok {
			return value{k: kProperty, o: &property{ms: ms, z: z, field: fd}}
		}
	}
	switch name {
	case "toString":
		switch {
		case n == 0:
			return strV(isoString(ms, z))
		case n == 1 && args[0].k == kString:
			fm, err := compileJodaPattern(args[0].s)
			if err != nil {
				st.failCause(e.p, KindRuntime, err, "IllegalArgumentException: %v", err)
			}
			return strV(st.printJoda(e.p, fm, ms, z))
		case n == 1 && args[0].k == kFormatter:
			fm := args[0].o.(*formatter)
			pz := z
			if fm.zone != nil {
				pz = fm.zone
			}
			return strV(st.printJoda(e.p, fm, ms, pz))
		}
	case "withZone", "toDateTime":
		if n == 1 && args[0].k == kZone {
			return dtV(ms, args[0].zone())
		}
		if n == 0 && name == "toDateTime" {
			return recv
		}
	case "withZoneRetainFields":
		if n == 1 && args[0].k == kZone {
			nz := args[0].zone()
			out, err := composeLenient(fieldsOf(ms, z), nz)
			if err != nil {
				st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
			}
			return dtV(out, nz)
		}
	case "withTimeAtStartOfDay":
		if n == 0 {
			f := fieldsOf(ms, z)
			f.hour, f.minute, f.second, f.milli = 0, 0, 0, 0
			out, err := composeLenient(f, z)
			if err != nil {
				st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
			}
			return dtV(out, z)
		}
	case "isAfter", "isBefore", "isEqual":
		if n == 1 && args[0].k == kDateTime {
			o := args[0].n
			switch name {
			case "isAfter":
				return boolV(ms > o)
			case "isBefore":
				return boolV(ms < o)
			}
			return boolV(ms == o)
		}
		if n == 0 {
			now := st.now()
			switch name {
			case "isAfter":
				return boolV(ms > now)
			case "isBefore":
				return boolV(ms < now)
			}
			return boolV(ms == now)
		}
	case "isAfterNow", "isBeforeNow", "isEqualNow":
		if n == 0 {
			now := st.now()
			switch name {
			case "isAfterNow":
				return boolV(ms > now)
			case "isBeforeNow":
				return boolV(ms < now)
			}
			return boolV(ms == now)
		}
	case "equals":
		if n == 1 {
			return boolV(args[0].k == kDateTime && args[0].n == ms && args[0].zone().id == z.id)
		}
	case "compareTo":
		if n == 1 && args[0].k == kDateTime {
			switch {
			case ms < args[0].n:
				return longV(-1)
			case ms > args[0].n:
				return longV(1)
			}
			return longV(0)
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

func (st *state) propertyMethod(e *callExpr, recv value, args []value) value {
	pr := recv.o.(*property)
	f := fieldsOf(pr.ms, pr.z)
	fd := pr.field
	switch {
	case len(args) == 0:
		switch e.name {
		case "get":
			return longV(int64(fd.get(f)))
		case "getAsText", "getAsShortText":
			v := fd.get(f)
			if fd.text != nil {
				return strV(fd.text(v, e.name == "getAsShortText"))
			}
			return strV(strconv.Itoa(v))
		case "getAsString", "toString":
			if e.name == "toString" {
				return strV(javaString(recv))
			}
			return strV(strconv.Itoa(fd.get(f)))
		case "getName":
			return strV(fd.name)
		case "getMinimumValue", "getMinimumValueOverall":
			return longV(int64(fd.min(f)))
		case "getMaximumValue", "getMaximumValueOverall":
			return longV(int64(fd.max(f)))
		case "withMinimumValue":
			return st.withField(e.p, pr.ms, pr.z, fd, fd.min(f))
		case "withMaximumValue":
			return st.withField(e.p, pr.ms, pr.z, fd, fd.max(f))
		case "getDateTime":
			return dtV(pr.ms, pr.z)
		}
	case len(args) == 1:
		switch e.name {
		case "setCopy":
			if args[0].k == kString && fd.text != nil {
				for v := fd.min(f); v <= fd.max(f); v++ {
					if strings.EqualFold(fd.text(v, false), args[0].s) || strings.EqualFold(fd.text(v, true), args[0].s) {
						return st.withField(e.p, pr.ms, pr.z, fd, v)
					}
				}
			}
			if args[0].k == kString {
				v, err := strconv.Atoi(args[0].s)
				if err != nil {
					st.fail(e.p, KindRuntime, "IllegalFieldValueException: Value %q for %s is not supported", args[0].s, fd.name)
				}
				return st.withField(e.p, pr.ms, pr.z, fd, v)
			}
			return st.withField(e.p, pr.ms, pr.z, fd, st.intArg(e.p, args[0], "setCopy argument"))
		case "addToCopy":
			delta := st.intArg(e.p, args[0], "addToCopy argument")
			switch fd.name {
			case "year", "weekyear":
				out, err := composeLenient(addMonths(f, int64(delta)*12), pr.z)
				if err != nil {
					st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
				}
				return dtV(out, pr.z)
			case "monthOfYear":
				out, err := composeLenient(addMonths(f, int64(delta)), pr.z)
				if err != nil {
					st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
				}
				return dtV(out, pr.z)
			case "dayOfMonth", "dayOfYear", "dayOfWeek":
				out, err := composeLenient(addDays(f, int64(delta)), pr.z)
				if err != nil {
					st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
				}
				return dtV(out, pr.z)
			case "weekOfWeekyear":
				out, err := composeLenient(addDays(f, int64(delta)*7), pr.z)
				if err != nil {
					st.failCause(e.p, KindRuntime, err, "IllegalFieldValueException: %v", err)
				}
				return dtV(out, pr.z)
			case "hourOfDay":
				return dtV(pr.ms+int64(delta)*3_600_000, pr.z)
			case "minuteOfHour", "minuteOfDay":
				return dtV(pr.ms+int64(delta)*60_000, pr.z)
			case "secondOfMinute", "secondOfDay":
				return dtV(pr.ms+int64(delta)*1000, pr.z)
			default:
				return dtV(pr.ms+int64(delta), pr.z)
			}
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

func (st *state) zoneMethod(e *callExpr, recv value, args []value) value {
	z := recv.zone()
	switch e.name {
	case "getID", "toString":
		if len(args) == 0 {
			return strV(z.id)
		}
	case "getOffset":
		if len(args) == 1 {
			var ms int64
			switch args[0].k {
			case kDateTime, kLong:
				ms = args[0].n
			default:
				st.noMethod(e, recv, args)
			}
			return longV(int64(fieldsOf(ms, z).offset) * 1000)
		}
	case "forID":
		if len(args) == 1 {
			return zoneForIDValue(st, e.p, args)
		}
	case "equals":
		if len(args) == 1 {
			return boolV(args[0].k == kZone && args[0].zone().id == z.id)
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

func (st *state) daysMethod(e *callExpr, recv value, args []value) value {
	switch e.name {
	case "getDays":
		if len(args) == 0 {
			return longV(recv.n)
		}
	case "toString":
		if len(args) == 0 {
			return strV(javaString(recv))
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

// daysBetween is Days.daysBetween: whole days between two instants, counted
// in the first instant's zone.
func daysBetween(a, b value) int64 {
	z := a.zone()
	la := a.n + int64(fieldsOf(a.n, z).offset)*1000
	lb := b.n + int64(fieldsOf(b.n, z).offset)*1000
	return (lb - la) / 86_400_000
}

func zoneForIDValue(st *state, p int, args []value) value {
	if args[0].k != kString {
		st.fail(p, KindType, "DateTimeZone.forID needs a String, found %s", args[0].typeName())
	}
	z, err := zoneForID(args[0].s)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
	}
	return value{k: kZone, o: z}
}
