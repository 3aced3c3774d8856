package sel

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// javaDouble formats f as Java's Double.toString does (JDK 19 and later):
// the shortest decimal that rounds to f, at least one digit after the point,
// plain notation for 1e-3 <= |f| < 1e7 and computerized scientific notation
// otherwise ("1.0E10", "1.0E-5").
func javaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	neg := f < 0
	a := math.Abs(f)
	digits, exp := decimalDigits(a, -1)
	if len(digits) == 1 {
		// Java picks the closest of the one- and two-digit decimals.
		digits, exp = decimalDigits(a, 1)
	}
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		digits = "0"
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if a >= 1e-3 && a < 1e7 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				b.WriteString(digits)
				b.WriteString(strings.Repeat("0", exp+1-len(digits)))
				b.WriteString(".0")
			} else {
				b.WriteString(digits[:exp+1])
				b.WriteByte('.')
				b.WriteString(digits[exp+1:])
			}
		} else {
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -exp-1))
			b.WriteString(digits)
		}
		return b.String()
	}
	b.WriteByte(digits[0])
	b.WriteByte('.')
	if len(digits) > 1 {
		b.WriteString(digits[1:])
	} else {
		b.WriteByte('0')
	}
	b.WriteByte('E')
	b.WriteString(strconv.Itoa(exp))
	return b.String()
}

// decimalDigits returns the significant digits of a > 0 and the decimal
// exponent of the first one (a = d.ddd × 10^exp), using strconv's 'e'
// format with the given precision (-1 for the shortest representation).
func decimalDigits(a float64, prec int) (string, int) {
	s := strconv.FormatFloat(a, 'e', prec, 64)
	e := strings.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(s[e+1:])
	return strings.Replace(s[:e], ".", "", 1), exp
}

// roundHalfUp rounds the decimal digits (value = 0.digits × 10^point) to
// keep significant digits, rounding half up as java.util.Formatter does on
// the shortest decimal of a double. It returns the new digits and point.
func roundHalfUp(digits string, point, keep int) (string, int) {
	if keep >= len(digits) {
		return digits + strings.Repeat("0", keep-len(digits)), point
	}
	if keep < 0 {
		return "", point
	}
	up := digits[keep] >= '5'
	d := []byte(digits[:keep])
	if up {
		i := len(d) - 1
		for ; i >= 0; i-- {
			if d[i] == '9' {
				d[i] = '0'
				continue
			}
			d[i]++
			break
		}
		if i < 0 {
			d = append([]byte{'1'}, d...)
			point++
			if keep > 0 {
				d = d[:len(d)-1]
			} else {
				return "1", point
			}
		}
	}
	return string(d), point
}

// fixedJava renders a >= 0 with prec digits after the point, rounding half
// up on the shortest decimal, as Java's %f does.
func fixedJava(a float64, prec int) (intPart, frac string) {
	if a == 0 {
		return "0", strings.Repeat("0", prec)
	}
	digits, exp := decimalDigits(a, -1)
	point := exp + 1
	digits, point = roundHalfUp(digits, point, point+prec)
	// digits now has point+prec digits (or fewer when everything rounded away).
	if point <= 0 {
		intPart = "0"
		lead := -point
		if lead > prec {
			lead = prec
		}
		frac = strings.Repeat("0", lead) + digits
	} else {
		if len(digits) < point {
			digits += strings.Repeat("0", point-len(digits))
		}
		intPart = digits[:point]
		frac = digits[point:]
	}
	if len(frac) < prec {
		frac += strings.Repeat("0", prec-len(frac))
	}
	frac = frac[:prec]
	if intPart == "" {
		intPart = "0"
	}
	return intPart, frac
}

// sciJava renders a >= 0 as d.ddd with prec fraction digits and its decimal
// exponent, rounding half up.
func sciJava(a float64, prec int) (mant string, exp int) {
	if a == 0 {
		if prec == 0 {
			return "0", 0
		}
		return "0." + strings.Repeat("0", prec), 0
	}
	digits, e := decimalDigits(a, -1)
	digits, point := roundHalfUp(digits, e+1, prec+1)
	exp = point - 1
	if prec == 0 {
		return digits[:1], exp
	}
	return digits[:1] + "." + digits[1:], exp
}

// formatSpec is one parsed %-specifier.
type formatSpec struct {
	flags string
	width int
	prec  int
	conv  byte
	text  string
}

func (f formatSpec) has(flag byte) bool { return strings.IndexByte(f.flags, flag) >= 0 }

// javaFormat implements String.format for the conversions Maestro users
// write: %s %S %b %c %d %o %x %X %e %E %f %g %G %% %n, with argument
// indexes, flags, width and precision.
func (st *state) javaFormat(p int, format string, args []value) string {
	var b strings.Builder
	next := 0
	prev := -1
	i := 0
	for i < len(format) {
		c := format[i]
		if c != '%' {
			j := strings.IndexByte(format[i:], '%')
			if j < 0 {
				j = len(format) - i
			}
			b.WriteString(format[i : i+j])
			i += j
			continue
		}
		start := i
		i++
		// [index$]
		idx := -1
		j := i
		for j < len(format) && isDigit(format[j]) {
			j++
		}
		if j < len(format) && format[j] == '$' && j > i {
			n, err := strconv.Atoi(format[i:j])
			if err != nil || n == 0 {
				st.fail(p, KindRuntime, "IllegalFormatArgumentIndexException: illegal format argument index %q", format[i:j])
			}
			idx = n - 1
			i = j + 1
		}
		var spec formatSpec
		fs := i
		for i < len(format) && strings.IndexByte("-#+ 0,(<", format[i]) >= 0 {
			i++
		}
		spec.flags = format[fs:i]
		spec.width, spec.prec = -1, -1
		ws := i
		for i < len(format) && isDigit(format[i]) {
			i++
		}
		if i > ws {
			spec.width = st.formatNumber(p, format[ws:i])
		}
		if i < len(format) && format[i] == '.' {
			i++
			ps := i
			for i < len(format) && isDigit(format[i]) {
				i++
			}
			if i == ps {
				st.fail(p, KindRuntime, "IllegalFormatPrecisionException: missing precision")
			}
			spec.prec = st.formatNumber(p, format[ps:i])
		}
		if i >= len(format) {
			st.fail(p, KindRuntime, "UnknownFormatConversionException: Conversion = '%%'")
		}
		spec.conv = format[i]
		i++
		spec.text = format[start:i]
		switch spec.conv {
		case '%':
			st.pad(&b, p, spec, "%")
			continue
		case 'n':
			b.WriteByte('\n')
			continue
		}
		if strings.IndexByte("bBsScCdoxXeEfgG", spec.conv) < 0 {
			if spec.conv == 't' || spec.conv == 'T' || spec.conv == 'h' || spec.conv == 'H' || spec.conv == 'a' || spec.conv == 'A' {
				st.fail(p, KindRuntime, "format conversion %s is not supported in SEL", spec.text)
			}
			st.fail(p, KindRuntime, "UnknownFormatConversionException: Conversion = '%c'", spec.conv)
		}
		if spec.has('-') && spec.width < 0 {
			st.fail(p, KindRuntime, "MissingFormatWidthException: %s", spec.text)
		}
		if spec.has('0') && spec.width < 0 {
			st.fail(p, KindRuntime, "MissingFormatWidthException: %s", spec.text)
		}
		if spec.has('-') && spec.has('0') || spec.has('+') && spec.has(' ') {
			st.fail(p, KindRuntime, "IllegalFormatFlagsException: Flags = '%s'", spec.flags)
		}
		var arg value
		switch {
		case spec.has('<'):
			if prev < 0 {
				st.fail(p, KindRuntime, "MissingFormatArgumentException: Format specifier '%s'", spec.text)
			}
			arg = args[prev]
		case idx >= 0:
			if idx >= len(args) {
				st.fail(p, KindRuntime, "MissingFormatArgumentException: Format specifier '%s'", spec.text)
			}
			arg, prev = args[idx], idx
		default:
			if next >= len(args) {
				st.fail(p, KindRuntime, "MissingFormatArgumentException: Format specifier '%s'", spec.text)
			}
			arg, prev = args[next], next
			next++
		}
		st.formatOne(&b, p, spec, arg)
		if b.Len() >= st.lim.MaxStringLength {
			st.checkStrLen(p, b.Len())
		}
	}
	st.checkStrLen(p, b.Len())
	return b.String()
}

func (st *state) formatNumber(p int, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n >= st.lim.MaxStringLength {
		st.fail(p, KindLimit, "format width or precision %s is over the string length limit %d", s, st.lim.MaxStringLength)
	}
	return n
}

func javaClassName(v value) string {
	switch v.k {
	case kLong:
		if v.n >= math.MinInt32 && v.n <= math.MaxInt32 {
			return "java.lang.Integer"
		}
		return "java.lang.Long"
	case kDouble:
		return "java.lang.Double"
	case kBool:
		return "java.lang.Boolean"
	case kString:
		return "java.lang.String"
	}
	return v.typeName()
}

func (st *state) badConversion(p int, spec formatSpec, v value) {
	st.fail(p, KindRuntime, "IllegalFormatConversionException: %c != %s", spec.conv, javaClassName(v))
}

func (st *state) formatOne(b *strings.Builder, p int, spec formatSpec, v value) {
	upper := spec.conv >= 'A' && spec.conv <= 'Z'
	var s string
	switch spec.conv {
	case 'b', 'B':
		switch v.k {
		case kNull:
			s = "false"
		case kBool:
			s = javaString(v)
		default:
			s = "true"
		}
		s = truncateChars(s, spec.prec)
	case 's', 'S':
		if spec.has('#') {
			st.fail(p, KindRuntime, "FormatFlagsConversionMismatchException: Conversion = s, Flags = #")
		}
		s = truncateChars(javaString(v), spec.prec)
	case 'c', 'C':
		switch v.k {
		case kNull:
			s = "null"
		case kLong:
			if v.n < 0 || v.n > unicode.MaxRune || (v.n >= 0xD800 && v.n <= 0xDFFF) {
				st.fail(p, KindRuntime, "IllegalFormatCodePointException: Code point = 0x%x", v.n)
			}
			s = string(rune(v.n))
		default:
			st.badConversion(p, spec, v)
		}
	case 'd':
		switch v.k {
		case kNull:
			s = "null"
		case kLong:
			s = st.formatInteger(p, spec, v.n)
		default:
			st.badConversion(p, spec, v)
		}
	case 'o', 'x', 'X':
		switch v.k {
		case kNull:
			s = "null"
		case kLong:
			s = formatRadix(spec, v.n)
		default:
			st.badConversion(p, spec, v)
		}
	case 'e', 'E', 'f', 'g', 'G':
		switch v.k {
		case kNull:
			s = "null"
		case kDouble:
			s = st.formatFloat(p, spec, v.f)
		default:
			st.badConversion(p, spec, v)
		}
	}
	if upper {
		s = strings.ToUpper(s)
	}
	st.pad(b, p, spec, s)
}

func truncateChars(s string, prec int) string {
	if prec < 0 || utf8.RuneCountInString(s) <= prec {
		return s
	}
	r := []rune(s)
	return string(r[:prec])
}

// pad writes s justified to spec.width.
func (st *state) pad(b *strings.Builder, p int, spec formatSpec, s string) {
	n := utf8.RuneCountInString(s)
	if spec.width <= n {
		b.WriteString(s)
		return
	}
	st.checkStrLen(p, b.Len()+spec.width)
	fill := strings.Repeat(" ", spec.width-n)
	if spec.has('-') {
		b.WriteString(s)
		b.WriteString(fill)
		return
	}
	b.WriteString(fill)
	b.WriteString(s)
}

// signed applies the sign flags and zero padding to the magnitude text.
func signed(spec formatSpec, neg bool, mag string) string {
	prefix, suffix := "", ""
	switch {
	case neg && spec.has('('):
		prefix, suffix = "(", ")"
	case neg:
		prefix = "-"
	case spec.has('+'):
		prefix = "+"
	case spec.has(' '):
		prefix = " "
	}
	if spec.has('0') && spec.width > 0 {
		n := spec.width - len(prefix) - len(suffix) - len(mag)
		if n > 0 {
			mag = strings.Repeat("0", n) + mag
		}
	}
	return prefix + mag + suffix
}

func group(intPart string) string {
	if len(intPart) <= 3 {
		return intPart
	}
	var b strings.Builder
	first := len(intPart) % 3
	if first > 0 {
		b.WriteString(intPart[:first])
	}
	for i := first; i < len(intPart); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(intPart[i : i+3])
	}
	return b.String()
}

func (st *state) formatInteger(p int, spec formatSpec, n int64) string {
	if spec.prec >= 0 {
		st.fail(p, KindRuntime, "IllegalFormatPrecisionException: %d", spec.prec)
	}
	if spec.has('#') {
		st.fail(p, KindRuntime, "FormatFlagsConversionMismatchException: Conversion = d, Flags = #")
	}
	neg := n < 0
	mag := strconv.FormatUint(uint64(n), 10)
	if neg {
		mag = strconv.FormatUint(-uint64(n), 10)
	}
	if spec.has(',') {
		mag = group(mag)
	}
	return signed(spec, neg, mag)
}

// formatRadix formats %o and %x. As in Maestro, an argument in the int range
// is an Integer, so negative values print as 32-bit two's complement.
func formatRadix(spec formatSpec, n int64) string {
	var u uint64
	if n > math.MaxInt32 || n < math.MinInt32 {
		u = uint64(n)
	} else {
		u = uint64(uint32(int32(n)))
	}
	base := 16
	prefix := "0x"
	if spec.conv == 'o' {
		base, prefix = 8, "0"
	}
	s := strconv.FormatUint(u, base)
	if spec.has('#') {
		s = prefix + s
	}
	if spec.has('0') && spec.width > len(s) {
		if spec.has('#') {
			s = prefix + strings.Repeat("0", spec.width-len(s)) + s[len(prefix):]
		} else {
			s = strings.Repeat("0", spec.width-len(s)) + s
		}
	}
	return s
}

func (st *state) formatFloat(p int, spec formatSpec, f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		s := "NaN"
		if math.IsInf(f, 1) {
			s = "Infinity"
			if spec.has('+') {
				s = "+Infinity"
			}
		} else if math.IsInf(f, -1) {
			s = "-Infinity"
			if spec.has('(') {
				s = "(Infinity)"
			}
		}
		return s
	}
	neg := math.Signbit(f)
	a := math.Abs(f)
	prec := spec.prec
	switch spec.conv {
	case 'f':
		if prec < 0 {
			prec = 6
		}
		ip, frac := fixedJava(a, prec)
		if spec.has(',') {
			ip = group(ip)
		}
		mag := ip
		if prec > 0 || spec.has('#') {
			mag += "." + frac
		}
		return signed(spec, neg, mag)
	case 'e', 'E':
		if prec < 0 {
			prec = 6
		}
		if spec.has(',') {
			st.fail(p, KindRuntime, "FormatFlagsConversionMismatchException: Conversion = e, Flags = ,")
		}
		mant, exp := sciJava(a, prec)
		if prec == 0 && spec.has('#') {
			mant += "."
		}
		return signed(spec, neg, mant+expSuffix(exp))
	default: // g, G
		if prec < 0 {
			prec = 6
		} else if prec == 0 {
			prec = 1
		}
		if a == 0 {
			return signed(spec, neg, "0."+strings.Repeat("0", prec-1))
		}
		_, exp := sciJava(a, prec-1)
		if exp >= -4 && exp < prec {
			ip, frac := fixedJava(a, prec-1-exp)
			if spec.has(',') {
				ip = group(ip)
			}
			mag := ip
			if frac != "" {
				mag += "." + frac
			}
			return signed(spec, neg, mag)
		}
		mant, e := sciJava(a, prec-1)
		return signed(spec, neg, mant+expSuffix(e))
	}
}

func expSuffix(exp int) string {
	sign := "+"
	if exp < 0 {
		sign = "-"
		exp = -exp
	}
	s := strconv.Itoa(exp)
	if len(s) < 2 {
		s = "0" + s
	}
	return "e" + sign + s
}
