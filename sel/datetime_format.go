package sel

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// formatter is a Joda DateTimeFormatter built from DateTimeFormat.forPattern.
type formatter struct {
	pattern      string
	elems        []jodaElem
	zone         *zone // nil: print in the instant's zone, parse in UTC
	offsetParsed bool
}

// jodaElem is one pattern token: a field letter repeated count times, or
// literal text (letter 0).
type jodaElem struct {
	letter    byte
	count     int
	lit       string
	maxDigits int  // digits accepted when parsing a number
	twoDigit  bool // yy, YY, xx
	lenient   bool // a two-digit year that may parse more digits
}

const jodaLetters = "GCYxwEeyDMdaKhHkmsSzZ"

func isNumericLetter(c byte, count int) bool {
	switch c {
	case 'C', 'x', 'y', 'Y', 'd', 'h', 'H', 'm', 's', 'S', 'e', 'D', 'w', 'k', 'K':
		return true
	case 'M':
		return count <= 2
	}
	return false
}

var (
	patternCacheMu sync.Mutex
	patternCache   = map[string]*formatter{}
)

const patternCacheMax = 512

// compileJodaPattern parses a DateTimeFormat pattern with Joda's rules.
func compileJodaPattern(pattern string) (*formatter, error) {
	patternCacheMu.Lock()
	if f, ok := patternCache[pattern]; ok {
		patternCacheMu.Unlock()
		return f, nil
	}
	patternCacheMu.Unlock()

	var elems []jodaElem
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			j := i
			for j < len(pattern) && pattern[j] == c {
				j++
			}
			if strings.IndexByte(jodaLetters, c) < 0 {
				return nil, fmt.Errorf("Illegal pattern component: %s", pattern[i:j])
			}
			elems = append(elems, jodaElem{letter: c, count: j - i})
			i = j
		case c == '\'':
			j := i + 1
			var b strings.Builder
			for {
				if j >= len(pattern) {
					return nil, fmt.Errorf("Illegal pattern component: %s", pattern[i:])
				}
				if pattern[j] == '\'' {
					if j+1 < len(pattern) && pattern[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					j++
					break
				}
				b.WriteByte(pattern[j])
				j++
			}
			lit := b.String()
			if j == i+2 {
				lit = "'"
			}
			elems = append(elems, jodaElem{lit: lit})
			i = j
		default:
			elems = append(elems, jodaElem{lit: pattern[i : i+1]})
			i++
		}
	}
	for i := range elems {
		el := &elems[i]
		if el.letter == 0 {
			continue
		}
		nextNumeric := i+1 < len(elems) && elems[i+1].letter != 0 && isNumericLetter(elems[i+1].letter, elems[i+1].count)
		switch el.letter {
		case 'y', 'Y', 'x':
			if el.count == 2 {
				el.twoDigit = true
				el.lenient = !nextNumeric
				el.maxDigits = 2
			} else {
				el.maxDigits = 9
				if nextNumeric {
					el.maxDigits = el.count
				}
			}
		case 'C':
			el.maxDigits = el.count
		case 'D':
			el.maxDigits = 3
		case 'e':
			el.maxDigits = 1
		case 'S':
			el.maxDigits = el.count
		default:
			el.maxDigits = 2
		}
	}
	f := &formatter{pattern: pattern, elems: elems}
	patternCacheMu.Lock()
	if len(patternCache) < patternCacheMax {
		patternCache[pattern] = f
	}
	patternCacheMu.Unlock()
	return f, nil
}

func padInt(b *strings.Builder, v, width int) {
	if v < 0 {
		b.WriteByte('-')
		v = -v
	}
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b.WriteByte('0')
	}
	b.WriteString(s)
}

// printJoda prints the instant ms in zone z with the formatter's pattern.
func (st *state) printJoda(p int, fm *formatter, ms int64, z *zone) string {
	f := fieldsOf(ms, z)
	var b strings.Builder
	for _, el := range fm.elems {
		if el.letter == 0 {
			b.WriteString(el.lit)
			continue
		}
		n := el.count
		switch el.letter {
		case 'G':
			if f.year <= 0 {
				b.WriteString("BC")
			} else {
				b.WriteString("AD")
			}
		case 'C':
			y := f.year
			if y <= 0 {
				y = 1 - y
			}
			padInt(&b, y/100, n)
		case 'y', 'Y', 'x':
			y := f.year
			if el.letter == 'x' {
				y, _ = isoWeek(f)
			}
			if el.letter == 'Y' && y <= 0 {
				y = 1 - y
			}
			if el.twoDigit {
				v := y % 100
				if v < 0 {
					v = -v
				}
				padInt(&b, v, 2)
			} else {
				padInt(&b, y, n)
			}
		case 'w':
			_, w := isoWeek(f)
			padInt(&b, w, n)
		case 'e':
			padInt(&b, f.weekday, n)
		case 'E':
			if n >= 4 {
				b.WriteString(dayNames[f.weekday-1])
			} else {
				b.WriteString(dayNames[f.weekday-1][:3])
			}
		case 'D':
			padInt(&b, f.yearDay, n)
		case 'M':
			switch {
			case n >= 4:
				b.WriteString(monthNames[f.month-1])
			case n == 3:
				b.WriteString(monthNames[f.month-1][:3])
			default:
				padInt(&b, f.month, n)
			}
		case 'd':
			padInt(&b, f.day, n)
		case 'a':
			if f.hour < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'K':
			padInt(&b, f.hour%12, n)
		case 'h':
			h := f.hour % 12
			if h == 0 {
				h = 12
			}
			padInt(&b, h, n)
		case 'H':
			padInt(&b, f.hour, n)
		case 'k':
			h := f.hour
			if h == 0 {
				h = 24
			}
			padInt(&b, h, n)
		case 'm':
			padInt(&b, f.minute, n)
		case 's':
			padInt(&b, f.second, n)
		case 'S':
			s := fmt.Sprintf("%03d", f.milli)
			if n <= 3 {
				b.WriteString(s[:n])
			} else {
				b.WriteString(s)
				b.WriteString(strings.Repeat("0", n-3))
			}
		case 'z':
			if n >= 4 {
				if z == utcZone {
					b.WriteString("Coordinated Universal Time")
				} else {
					b.WriteString(z.id)
				}
			} else if z == utcZone {
				b.WriteString("UTC")
			} else {
				b.WriteString(f.abbrev)
			}
		case 'Z':
			switch n {
			case 1:
				b.WriteString(formatOffset(f.offset, false))
			case 2:
				b.WriteString(formatOffset(f.offset, true))
			default:
				b.WriteString(z.id)
			}
		}
		if b.Len() >= st.lim.MaxStringLength {
			st.checkStrLen(p, b.Len())
		}
	}
	st.checkStrLen(p, b.Len())
	return b.String()
}

// jodaParseError mirrors Joda's FormatUtils.createErrorMessage.
func jodaParseError(text string, pos int) error {
	if pos >= len(text) {
		return fmt.Errorf("Invalid format: %q is too short", text)
	}
	return fmt.Errorf("Invalid format: %q is malformed at %q", text, text[pos:])
}

// parsedFields collects what a pattern parsed.
type parsedFields struct {
	vals   map[byte]int
	offset *int
	zone   *zone
}

// parseJoda parses text with fm and returns the instant and the zone of the
// resulting DateTime, following DateTimeFormatter.parseDateTime.
func (st *state) parseJoda(fm *formatter, text string) (int64, *zone, error) {
	pf := parsedFields{vals: map[byte]int{}}
	pos := 0
	for _, el := range fm.elems {
		if el.letter == 0 {
			if len(text)-pos < len(el.lit) || !strings.EqualFold(text[pos:pos+len(el.lit)], el.lit) {
				return 0, nil, jodaParseError(text, pos)
			}
			pos += len(el.lit)
			continue
		}
		switch el.letter {
		case 'G':
			i, n := matchText(text[pos:], []string{"BC", "AD"}, nil)
			if i < 0 {
				return 0, nil, jodaParseError(text, pos)
			}
			pf.vals['G'] = i
			pos += n
		case 'a':
			i, n := matchText(text[pos:], []string{"AM", "PM"}, nil)
			if i < 0 {
				return 0, nil, jodaParseError(text, pos)
			}
			pf.vals['a'] = i
			pos += n
		case 'E':
			i, n := matchText(text[pos:], dayNames[:], shortNames(dayNames[:]))
			if i < 0 {
				return 0, nil, jodaParseError(text, pos)
			}
			pf.vals['e'] = i + 1
			pos += n
		case 'M':
			if el.count >= 3 {
				i, n := matchText(text[pos:], monthNames[:], shortNames(monthNames[:]))
				if i < 0 {
					return 0, nil, jodaParseError(text, pos)
				}
				pf.vals['M'] = i + 1
				pos += n
				continue
			}
			fallthrough
		case 'C', 'Y', 'x', 'y', 'w', 'e', 'D', 'd', 'K', 'h', 'H', 'k', 'm', 's':
			signed := el.letter == 'y' || el.letter == 'x'
			maxDigits := el.maxDigits
			if el.twoDigit && el.lenient {
				maxDigits = 9
				signed = true
			}
			v, n, ok := parseDigits(text[pos:], maxDigits, signed)
			if !ok {
				return 0, nil, jodaParseError(text, pos)
			}
			if el.twoDigit && n == 2 && text[pos] != '-' && text[pos] != '+' {
				v = st.pivotTwoDigitYear(v)
			}
			pf.vals[el.letter] = v
			pos += n
		case 'S':
			start := pos
			for pos < len(text) && pos-start < el.maxDigits && isDigit(text[pos]) {
				pos++
			}
			if pos == start {
				return 0, nil, jodaParseError(text, pos)
			}
			frac := (text[start:pos] + "000")[:3]
			v, _ := strconv.Atoi(frac)
			pf.vals['S'] = v
		case 'Z':
			if el.count >= 3 {
				j := pos
				for j < len(text) && (isIdentPart(rune(text[j])) || text[j] == '/' || text[j] == '+' || text[j] == '-') {
					j++
				}
				z, err := zoneForID(text[pos:j])
				if err != nil {
					return 0, nil, jodaParseError(text, pos)
				}
				pf.zone = z
				pos = j
				continue
			}
			off, n, ok := parseOffsetText(text[pos:])
			if !ok {
				return 0, nil, jodaParseError(text, pos)
			}
			pf.offset = &off
			pos += n
		case 'z':
			return 0, nil, fmt.Errorf("Parsing of time zone names is not supported (pattern %q)", fm.pattern)
		}
	}
	if pos < len(text) {
		return 0, nil, jodaParseError(text, pos)
	}
	ms, z, err := pf.resolve(fm)
	if err != nil {
		return 0, nil, fmt.Errorf("Cannot parse %q: %v", text, err)
	}
	return ms, z, nil
}

func shortNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n[:3]
	}
	return out
}

// matchText matches the longest of the long or short names at the start of
// s, ignoring case.
func matchText(s string, long, short []string) (idx, n int) {
	idx = -1
	try := func(list []string) {
		for i, name := range list {
			if len(name) > n && len(s) >= len(name) && strings.EqualFold(s[:len(name)], name) {
				idx, n = i, len(name)
			}
		}
	}
	try(long)
	try(short)
	return idx, n
}

func parseDigits(s string, maxDigits int, signed bool) (v, n int, ok bool) {
	neg := false
	if signed && len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		n = 1
	}
	start := n
	for n < len(s) && n-start < maxDigits && isDigit(s[n]) {
		v = v*10 + int(s[n]-'0')
		n++
	}
	if n == start {
		return 0, 0, false
	}
	if neg {
		v = -v
	}
	return v, n, true
}

// parseOffsetText parses Z, +HH, +HHmm or +HH:mm.
func parseOffsetText(s string) (off, n int, ok bool) {
	if strings.HasPrefix(s, "Z") || strings.HasPrefix(s, "z") {
		return 0, 1, true
	}
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') || !isDigit(s[1]) || !isDigit(s[2]) {
		return 0, 0, false
	}
	h := int(s[1]-'0')*10 + int(s[2]-'0')
	n = 3
	m := 0
	rest := s[3:]
	if len(rest) > 0 && rest[0] == ':' {
		rest = rest[1:]
		n++
	}
	if len(rest) >= 2 && isDigit(rest[0]) && isDigit(rest[1]) {
		m = int(rest[0]-'0')*10 + int(rest[1]-'0')
		n += 2
	} else if n == 4 {
		return 0, 0, false
	}
	if h > 23 || m > 59 {
		return 0, 0, false
	}
	off = (h*60 + m) * 60
	if s[0] == '-' {
		off = -off
	}
	return off, n, true
}

// pivotTwoDigitYear resolves yy the way Joda does, around the current year
// minus 30.
func (st *state) pivotTwoDigitYear(v int) int {
	pivot := fieldsOf(st.now(), utcZone).year - 30
	low := pivot - 50
	var t int
	if low >= 0 {
		t = low % 100
	} else {
		t = 99 + (low+1)%100
	}
	add := 0
	if v < t {
		add = 100
	}
	return v + low + add - t
}

// resolve sets the parsed fields on 1970-01-01T00:00 in Joda's order
// (largest unit first) and converts to an instant.
func (pf *parsedFields) resolve(fm *formatter) (int64, *zone, error) {
	f := fields{year: 1970, month: 1, day: 1, weekday: 4, yearDay: 1}
	get := func(c byte) (int, bool) { v, ok := pf.vals[c]; return v, ok }
	refresh := func() {
		y, m, d := f.year, f.month, f.day
		days := daysFromCivil(int64(y), m, d)
		f.weekday = int((days%7+7+3)%7) + 1
		f.yearDay = int(days-daysFromCivil(int64(y), 1, 1)) + 1
	}
	setField := func(name string, v int) error {
		nf, err := dtFields[name].set(f, v)
		if err != nil {
			return err
		}
		f = nf
		refresh()
		return nil
	}
	if c, ok := get('C'); ok {
		if err := setField("year", c*100); err != nil {
			return 0, nil, err
		}
	}
	if y, ok := get('Y'); ok {
		if era, ok := get('G'); ok && era == 0 {
			y = 1 - y
		}
		if err := setField("year", y); err != nil {
			return 0, nil, err
		}
	} else if era, ok := get('G'); ok && era == 0 {
		if err := setField("year", 1-f.year); err != nil {
			return 0, nil, err
		}
	}
	if y, ok := get('y'); ok {
		if err := setField("year", y); err != nil {
			return 0, nil, err
		}
	}
	if x, ok := get('x'); ok {
		if err := setField("weekyear", x); err != nil {
			return 0, nil, err
		}
	}
	for _, step := range []struct {
		c    byte
		name string
	}{{'M', "monthOfYear"}, {'w', "weekOfWeekyear"}, {'D', "dayOfYear"}, {'d', "dayOfMonth"}, {'e', "dayOfWeek"}} {
		if v, ok := get(step.c); ok {
			if err := setField(step.name, v); err != nil {
				return 0, nil, err
			}
		}
	}
	if a, ok := get('a'); ok {
		f.hour = f.hour%12 + 12*a
	}
	if v, ok := get('K'); ok {
		if v < 0 || v > 11 {
			return 0, nil, fieldRangeError("hourOfHalfday", v, 0, 11)
		}
		f.hour = f.hour/12*12 + v
	}
	if v, ok := get('h'); ok {
		if v < 1 || v > 12 {
			return 0, nil, fieldRangeError("clockhourOfHalfday", v, 1, 12)
		}
		f.hour = f.hour/12*12 + v%12
	}
	if v, ok := get('H'); ok {
		if v < 0 || v > 23 {
			return 0, nil, fieldRangeError("hourOfDay", v, 0, 23)
		}
		f.hour = v
	}
	if v, ok := get('k'); ok {
		if v < 1 || v > 24 {
			return 0, nil, fieldRangeError("clockhourOfDay", v, 1, 24)
		}
		f.hour = v % 24
	}
	if v, ok := get('m'); ok {
		if v < 0 || v > 59 {
			return 0, nil, fieldRangeError("minuteOfHour", v, 0, 59)
		}
		f.minute = v
	}
	if v, ok := get('s'); ok {
		if v < 0 || v > 59 {
			return 0, nil, fieldRangeError("secondOfMinute", v, 0, 59)
		}
		f.second = v
	}
	if v, ok := get('S'); ok {
		f.milli = v
	}
	resultZone := fm.zone
	var ms int64
	var err error
	switch {
	case pf.offset != nil:
		ms, err = compose(f, utcZone)
		ms -= int64(*pf.offset) * 1000
		if resultZone == nil && fm.offsetParsed {
			resultZone = fixedZone(*pf.offset)
		}
	case pf.zone != nil:
		ms, err = compose(f, pf.zone)
		if resultZone == nil {
			resultZone = pf.zone
		}
	default:
		z := fm.zone
		if z == nil {
			z = utcZone
		}
		ms, err = compose(f, z)
	}
	if err != nil {
		return 0, nil, err
	}
	if resultZone == nil {
		resultZone = utcZone
	}
	return ms, resultZone, nil
}

func (st *state) formatterMethod(e *callExpr, recv value, args []value) value {
	fm := recv.o.(*formatter)
	n := len(args)
	switch e.name {
	case "withZone":
		if n == 1 && args[0].k == kZone {
			c := *fm
			c.zone = args[0].zone()
			return value{k: kFormatter, o: &c}
		}
	case "withZoneUTC":
		if n == 0 {
			c := *fm
			c.zone = utcZone
			return value{k: kFormatter, o: &c}
		}
	case "withOffsetParsed":
		if n == 0 {
			c := *fm
			c.offsetParsed, c.zone = true, nil
			return value{k: kFormatter, o: &c}
		}
	case "getZone":
		if n == 0 {
			if fm.zone == nil {
				return nullV
			}
			return value{k: kZone, o: fm.zone}
		}
	case "forPattern":
		if n == 1 {
			return forPattern(st, e.p, args)
		}
	case "parseDateTime", "parseMillis":
		if n == 1 && (args[0].k == kString || (args[0].k == kLong && e.name == "parseDateTime")) {
			ms, z, err := st.parseJoda(fm, javaString(args[0]))
			if err != nil {
				st.failCause(e.p, KindRuntime, err, "IllegalArgumentException: %v", err)
			}
			if e.name == "parseMillis" {
				return longV(ms)
			}
			return dtV(ms, z)
		}
	case "print":
		if n == 1 {
			switch args[0].k {
			case kLong:
				z := fm.zone
				if z == nil {
					z = utcZone
				}
				return strV(st.printJoda(e.p, fm, args[0].n, z))
			case kDateTime:
				z := fm.zone
				if z == nil {
					z = args[0].zone()
				}
				return strV(st.printJoda(e.p, fm, args[0].n, z))
			}
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

func forPattern(st *state, p int, args []value) value {
	if args[0].k != kString {
		st.fail(p, KindType, "DateTimeFormat.forPattern needs a String, found %s", args[0].typeName())
	}
	fm, err := compileJodaPattern(args[0].s)
	if err != nil {
		st.failCause(p, KindRuntime, err, "IllegalArgumentException: %v", err)
	}
	return value{k: kFormatter, o: fm}
}
