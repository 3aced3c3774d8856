package sel

import (
	"crypto/rand"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// staticMethods are the Class.method built-ins, keyed "Class.method".
var staticMethods map[string]staticMethod

// staticFields are the Class.FIELD constants.
var staticFields = map[string]value{
	"Integer.MAX_VALUE":           longV(math.MaxInt32),
	"Integer.MIN_VALUE":           longV(math.MinInt32),
	"Long.MAX_VALUE":              longV(math.MaxInt64),
	"Long.MIN_VALUE":              longV(math.MinInt64),
	"Double.MAX_VALUE":            doubleV(math.MaxFloat64),
	"Double.MIN_VALUE":            doubleV(math.SmallestNonzeroFloat64),
	"Double.NaN":                  doubleV(math.NaN()),
	"Double.POSITIVE_INFINITY":    doubleV(math.Inf(1)),
	"Double.NEGATIVE_INFINITY":    doubleV(math.Inf(-1)),
	"Boolean.TRUE":                trueV,
	"Boolean.FALSE":               falseV,
	"Math.PI":                     doubleV(math.Pi),
	"Math.E":                      doubleV(math.E),
	"DateTimeZone.UTC":            {k: kZone, o: utcZone},
	"DateTimeConstants.MONDAY":    longV(1),
	"DateTimeConstants.TUESDAY":   longV(2),
	"DateTimeConstants.WEDNESDAY": longV(3),
	"DateTimeConstants.THURSDAY":  longV(4),
	"DateTimeConstants.FRIDAY":    longV(5),
	"DateTimeConstants.SATURDAY":  longV(6),
	"DateTimeConstants.SUNDAY":    longV(7),
	"DateTimeConstants.AM":        longV(0),
	"DateTimeConstants.PM":        longV(1),

	"DateTimeConstants.MILLIS_PER_SECOND":  longV(1000),
	"DateTimeConstants.MILLIS_PER_MINUTE":  longV(60_000),
	"DateTimeConstants.MILLIS_PER_HOUR":    longV(3_600_000),
	"DateTimeConstants.MILLIS_PER_DAY":     longV(86_400_000),
	"DateTimeConstants.MILLIS_PER_WEEK":    longV(604_800_000),
	"DateTimeConstants.SECONDS_PER_MINUTE": longV(60),
	"DateTimeConstants.SECONDS_PER_HOUR":   longV(3600),
	"DateTimeConstants.SECONDS_PER_DAY":    longV(86_400),
	"DateTimeConstants.SECONDS_PER_WEEK":   longV(604_800),
	"DateTimeConstants.MINUTES_PER_HOUR":   longV(60),
	"DateTimeConstants.MINUTES_PER_DAY":    longV(1440),
	"DateTimeConstants.MINUTES_PER_WEEK":   longV(10_080),
	"DateTimeConstants.HOURS_PER_DAY":      longV(24),
	"DateTimeConstants.HOURS_PER_WEEK":     longV(168),
	"DateTimeConstants.DAYS_PER_WEEK":      longV(7),
}

func init() {
	for i, m := range monthNames {
		staticFields["DateTimeConstants."+strings.ToUpper(m)] = longV(int64(i + 1))
	}
	fixed := func(n int, fn staticFn) staticMethod { return staticMethod{fn: fn, minArgs: n, maxArgs: n} }
	between := func(lo, hi int, fn staticFn) staticMethod { return staticMethod{fn: fn, minArgs: lo, maxArgs: hi} }
	variadic := func(lo int, fn staticFn) staticMethod { return staticMethod{fn: fn, minArgs: lo, maxArgs: -1} }
	staticMethods = map[string]staticMethod{
		"Math.min":      fixed(2, mathMinMax(false)),
		"Math.max":      fixed(2, mathMinMax(true)),
		"Math.abs":      fixed(1, mathAbs),
		"Math.pow":      fixed(2, mathPow),
		"Math.random":   fixed(0, func(st *state, p int, a []value) value { return doubleV(mrand.Float64()) }),
		"Math.floor":    fixed(1, mathUnary(math.Floor)),
		"Math.ceil":     fixed(1, mathUnary(math.Ceil)),
		"Math.sqrt":     fixed(1, mathUnary(math.Sqrt)),
		"Math.log":      fixed(1, mathUnary(math.Log)),
		"Math.log10":    fixed(1, mathUnary(math.Log10)),
		"Math.exp":      fixed(1, mathUnary(math.Exp)),
		"Math.round":    fixed(1, mathRound),
		"Math.floorDiv": fixed(2, mathFloorDivMod(false)),
		"Math.floorMod": fixed(2, mathFloorDivMod(true)),

		"Long.parseLong":     between(1, 2, parseLongFn(false)),
		"Long.valueOf":       fixed(1, valueOfLong),
		"Long.toString":      fixed(1, toStringOf(kLong)),
		"Integer.parseInt":   between(1, 2, parseLongFn(true)),
		"Integer.valueOf":    fixed(1, valueOfLong),
		"Integer.toString":   fixed(1, toStringOf(kLong)),
		"Double.parseDouble": fixed(1, parseDoubleFn),
		"Double.valueOf":     fixed(1, valueOfDouble),
		"Double.toString":    fixed(1, toStringOf(kDouble)),
		"Double.isNaN":       fixed(1, func(st *state, p int, a []value) value { return boolV(st.numArg(p, a[0]) != st.numArg(p, a[0])) }),
		"Boolean.parseBoolean": fixed(1, func(st *state, p int, a []value) value {
			return boolV(a[0].k == kString && strings.EqualFold(a[0].s, "true"))
		}),
		"Boolean.valueOf":  fixed(1, valueOfBool),
		"Boolean.toString": fixed(1, toStringOf(kBool)),
		"String.format":    variadic(1, stringFormat),
		"String.join":      variadic(1, stringJoin),
		"String.valueOf":   fixed(1, func(st *state, p int, a []value) value { return strV(javaString(a[0])) }),

		"System.currentTimeMillis": fixed(0, func(st *state, p int, a []value) value { return longV(st.now()) }),
		"Arrays.asList":            variadic(1, arraysAsList),
		"Arrays.toString":          fixed(1, func(st *state, p int, a []value) value { return strV(javaString(a[0])) }),
		"UUID.randomUUID":          fixed(0, func(st *state, p int, a []value) value { return value{k: kUUID, s: randomUUID()} }),

		"DateTime.now":       between(0, 1, func(st *state, p int, a []value) value { return newDateTime(st, p, a) }),
		"DateTime.parse":     between(1, 2, dateTimeParse),
		"DateTimeZone.forID": fixed(1, zoneForIDValue),
		"DateTimeZone.forOffsetHours": fixed(1, func(st *state, p int, a []value) value {
			return offsetZoneValue(st, p, st.intArg(p, a[0], "hours"), 0)
		}),
		"DateTimeZone.forOffsetHoursMinutes": fixed(2, func(st *state, p int, a []value) value {
			return offsetZoneValue(st, p, st.intArg(p, a[0], "hours"), st.intArg(p, a[1], "minutes"))
		}),
		"DateTimeZone.getDefault":   fixed(0, func(st *state, p int, a []value) value { return value{k: kZone, o: utcZone} }),
		"DateTimeFormat.forPattern": fixed(1, forPattern),
		"Days.daysBetween": fixed(2, func(st *state, p int, a []value) value {
			if a[0].k != kDateTime || a[1].k != kDateTime {
				st.fail(p, KindType, "Days.daysBetween needs two DateTime values, found %s and %s", a[0].typeName(), a[1].typeName())
			}
			return value{k: kDays, n: daysBetween(a[0], a[1])}
		}),

		"Util.dateIntToTs":                fixed(1, utilDateIntToTs),
		"Util.tsToDateInt":                fixed(1, utilTsToDateInt),
		"Util.incrementDateInt":           fixed(2, utilIncrementDateInt),
		"Util.dateIntsBetween":            fixed(3, utilDateIntsBetween),
		"Util.intsBetween":                fixed(3, utilIntsBetween),
		"Util.dateIntHourToTs":            fixed(5, utilDateIntHourToTs),
		"Util.timeoutForDateTimeDeadline": fixed(2, utilTimeoutForDateTimeDeadline),
		"Util.timeoutForDateIntDeadline":  fixed(2, utilTimeoutForDateIntDeadline),
		"Util.icebergRangeQuery":          between(3, 4, utilIcebergRangeQuery),
	}
}

// constructors are the classes `new` accepts.
var constructors = map[string]staticFn{
	"DateTime":      newDateTime,
	"HashMap":       newMap,
	"Map":           newMap,
	"LinkedHashMap": newMap,
	"String": func(st *state, p int, a []value) value {
		switch {
		case len(a) == 0:
			return strV("")
		case len(a) == 1 && (a[0].k == kString || a[0].k == kLong):
			return strV(javaString(a[0]))
		}
		st.fail(p, KindType, "no String constructor for these arguments")
		return nullV
	},
	"Long":    ctorLong,
	"Integer": ctorLong,
	"Double": func(st *state, p int, a []value) value {
		if len(a) == 1 {
			return valueOfDouble(st, p, a)
		}
		st.fail(p, KindType, "no Double constructor with %d arguments", len(a))
		return nullV
	},
	"Boolean": func(st *state, p int, a []value) value {
		if len(a) == 1 {
			return valueOfBool(st, p, a)
		}
		st.fail(p, KindType, "no Boolean constructor with %d arguments", len(a))
		return nullV
	},
}

func ctorLong(st *state, p int, a []value) value {
	if len(a) == 1 {
		return valueOfLong(st, p, a)
	}
	st.fail(p, KindType, "no Long constructor with %d arguments", len(a))
	return nullV
}

func (st *state) numArg(p int, v value) float64 {
	if !isNum(v) {
		st.fail(p, KindType, "expected a number, found %s", v.typeName())
	}
	return toF(v)
}

func mathMinMax(max bool) staticFn {
	return func(st *state, p int, a []value) value {
		if a[0].k == kLong && a[1].k == kLong {
			if (a[0].n > a[1].n) == max {
				return a[0]
			}
			return a[1]
		}
		x, y := st.numArg(p, a[0]), st.numArg(p, a[1])
		if max {
			return doubleV(math.Max(x, y))
		}
		return doubleV(math.Min(x, y))
	}
}

func mathAbs(st *state, p int, a []value) value {
	if a[0].k == kLong {
		if a[0].n < 0 {
			return longV(-a[0].n) // Long.MIN_VALUE stays negative, as in Java
		}
		return a[0]
	}
	return doubleV(math.Abs(st.numArg(p, a[0])))
}

func mathPow(st *state, p int, a []value) value {
	x, y := st.numArg(p, a[0]), st.numArg(p, a[1])
	if y != y || (math.Abs(x) == 1 && math.IsInf(y, 0)) {
		return doubleV(math.NaN()) // Java's special cases where Go returns 1
	}
	return doubleV(math.Pow(x, y))
}

func mathUnary(fn func(float64) float64) staticFn {
	return func(st *state, p int, a []value) value { return doubleV(fn(st.numArg(p, a[0]))) }
}

// mathRound is Math.round(double): the closest long, ties toward positive
// infinity, NaN to 0, saturating.
func mathRound(st *state, p int, a []value) value {
	if a[0].k == kLong {
		return a[0]
	}
	x := st.numArg(p, a[0])
	if x != x {
		return longV(0)
	}
	r := math.Floor(x)
	if x-r >= 0.5 {
		r++
	}
	return longV(d2l(r))
}

func mathFloorDivMod(mod bool) staticFn {
	return func(st *state, p int, a []value) value {
		if a[0].k != kLong || a[1].k != kLong {
			st.fail(p, KindType, "Math.floorDiv/floorMod need integers")
		}
		x, y := a[0].n, a[1].n
		if y == 0 {
			st.fail(p, KindRuntime, "ArithmeticException: / by zero")
		}
		if x == math.MinInt64 && y == -1 {
			if mod {
				return longV(0)
			}
			return longV(math.MinInt64)
		}
		q := floorDiv(x, y)
		if mod {
			return longV(x - q*y)
		}
		return longV(q)
	}
}

func numberFormatError(st *state, p int, s string) {
	if s == "" {
		st.fail(p, KindRuntime, "NumberFormatException: For input string: \"\"")
	}
	st.fail(p, KindRuntime, "NumberFormatException: For input string: %q", s)
}

// parseJavaLong is Long.parseLong / Integer.parseInt.
func (st *state) parseJavaLong(p int, s string, radix int, int32Range bool) int64 {
	if radix < 2 || radix > 36 {
		st.fail(p, KindRuntime, "NumberFormatException: radix %d out of range", radix)
	}
	bits := 64
	if int32Range {
		bits = 32
	}
	if s == "" || strings.ContainsAny(s, "_ ") || strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		numberFormatError(st, p, s)
	}
	n, err := strconv.ParseInt(s, radix, bits)
	if err != nil {
		numberFormatError(st, p, s)
	}
	return n
}

func parseLongFn(int32Range bool) staticFn {
	return func(st *state, p int, a []value) value {
		if a[0].k != kString {
			if a[0].k == kNull {
				st.fail(p, KindRuntime, "NumberFormatException: Cannot parse null string: null")
			}
			st.fail(p, KindType, "expected a String to parse, found %s", a[0].typeName())
		}
		radix := 10
		if len(a) == 2 {
			radix = st.intArg(p, a[1], "radix")
		}
		return longV(st.parseJavaLong(p, a[0].s, radix, int32Range))
	}
}

// valueOfLong is Long.valueOf / Integer.valueOf / new Long(...): a String is
// parsed as a long (Maestro parses Integer.valueOf with Long.parseLong too).
func valueOfLong(st *state, p int, a []value) value {
	switch a[0].k {
	case kLong:
		return a[0]
	case kString:
		return longV(st.parseJavaLong(p, a[0].s, 10, false))
	}
	st.fail(p, KindType, "no valueOf for %s", a[0].typeName())
	return nullV
}

var javaDoubleRegex = regexp.MustCompile(`^[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)$`)

// parseJavaDouble is Double.parseDouble.
func (st *state) parseJavaDouble(p int, s string) float64 {
	t := javaTrim(s)
	if !javaDoubleRegex.MatchString(t) {
		if t == "" {
			st.fail(p, KindRuntime, "NumberFormatException: empty String")
		}
		numberFormatError(st, p, s)
	}
	t = strings.TrimRight(t, "fFdD")
	if strings.HasSuffix(t, "Infinity") {
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if strings.HasSuffix(t, "NaN") {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !isRangeErr(err) {
		numberFormatError(st, p, s)
	}
	return f
}

func parseDoubleFn(st *state, p int, a []value) value {
	if a[0].k != kString {
		if a[0].k == kNull {
			st.fail(p, KindRuntime, "NullPointerException: Double.parseDouble(null)")
		}
		st.fail(p, KindType, "expected a String to parse, found %s", a[0].typeName())
	}
	return doubleV(st.parseJavaDouble(p, a[0].s))
}

func valueOfDouble(st *state, p int, a []value) value {
	switch a[0].k {
	case kDouble:
		return a[0]
	case kLong:
		return doubleV(float64(a[0].n))
	case kString:
		return doubleV(st.parseJavaDouble(p, a[0].s))
	}
	st.fail(p, KindType, "no valueOf for %s", a[0].typeName())
	return nullV
}

func valueOfBool(st *state, p int, a []value) value {
	switch a[0].k {
	case kBool:
		return a[0]
	case kString:
		return boolV(strings.EqualFold(a[0].s, "true"))
	case kNull:
		return falseV
	}
	st.fail(p, KindType, "no valueOf for %s", a[0].typeName())
	return nullV
}

func toStringOf(k kind) staticFn {
	return func(st *state, p int, a []value) value {
		v := a[0]
		if k == kDouble && v.k == kLong {
			v = doubleV(float64(v.n))
		}
		if v.k != k {
			st.fail(p, KindType, "toString expects a %s, found %s", kindName(k), v.typeName())
		}
		return strV(javaString(v))
	}
}

// arraysAsList returns its array argument (SEL has no List type, so
// Arrays.asList(a).contains(x) works on the array), or builds an array from
// several scalar arguments.
func arraysAsList(st *state, p int, a []value) value {
	if len(a) == 1 && a[0].k == kArray {
		return a[0]
	}
	elem := a[0].k
	switch elem {
	case kLong, kDouble, kBool, kString:
	default:
		st.fail(p, KindType, "Arrays.asList cannot hold %s", a[0].typeName())
	}
	arr := st.newArray(p, elem, int64(len(a)))
	for i, v := range a {
		arr.v[i] = st.coerceElem(p, elem, v)
	}
	return value{k: kArray, o: arr}
}

func randomUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		for i := range b {
			b[i] = byte(mrand.Uint32())
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func offsetZoneValue(st *state, p int, h, m int) value {
	if h < -23 || h > 23 || m < -59 || m > 59 || (h > 0 && m < 0) {
		st.fail(p, KindRuntime, "IllegalArgumentException: offset out of range: %d hours %d minutes", h, m)
	}
	off := h*3600 + m*60
	if h < 0 && m > 0 {
		off = h*3600 - m*60
	}
	return value{k: kZone, o: fixedZone(off)}
}

// dateTimeParse is DateTime.parse(text[, formatter]); both keep the parsed
// offset as the result's zone, as Joda's withOffsetParsed does.
func dateTimeParse(st *state, p int, a []value) value {
	if a[0].k != kString {
		st.fail(p, KindType, "DateTime.parse needs a String, found %s", a[0].typeName())
	}
	if len(a) == 1 {
		ms, off, err := parseISO(a[0].s, utcZone)
		if err != nil {
			st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
		}
		z := utcZone
		if off != nil {
			z = fixedZone(*off)
		}
		return dtV(ms, z)
	}
	if a[1].k != kFormatter {
		st.fail(p, KindType, "DateTime.parse needs a DateTimeFormatter, found %s", a[1].typeName())
	}
	fm := *a[1].o.(*formatter)
	fm.offsetParsed, fm.zone = true, nil
	ms, z, err := st.parseJoda(&fm, a[0].s)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
	}
	return dtV(ms, z)
}
