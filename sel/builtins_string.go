package sel

import (
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Java strings index UTF-16 code units; these helpers keep that for
// non-ASCII text while ASCII (the common case) uses byte offsets directly.

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func toU16(s string) []uint16 { return utf16.Encode([]rune(s)) }

func fromU16(u []uint16) string { return string(utf16.Decode(u)) }

// javaLen is String.length().
func javaLen(s string) int {
	if isASCII(s) {
		return len(s)
	}
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

func indexU16(h, n []uint16, from int) int {
	for i := max(from, 0); i+len(n) <= len(h); i++ {
		if slices.Equal(h[i:i+len(n)], n) {
			return i
		}
	}
	return -1
}

func lastIndexU16(h, n []uint16, from int) int {
	for i := min(from, len(h)-len(n)); i >= 0; i-- {
		if slices.Equal(h[i:i+len(n)], n) {
			return i
		}
	}
	return -1
}

// javaIndexOf is String.indexOf(str, from).
func javaIndexOf(s, sub string, from int) int {
	if isASCII(s) && isASCII(sub) {
		if from < 0 {
			from = 0
		}
		if from > len(s) {
			if sub == "" {
				return len(s)
			}
			return -1
		}
		i := strings.Index(s[from:], sub)
		if i < 0 {
			return -1
		}
		return i + from
	}
	h, n := toU16(s), toU16(sub)
	if from > len(h) {
		from = len(h)
	}
	return indexU16(h, n, from)
}

// javaLastIndexOf is String.lastIndexOf(str, from).
func javaLastIndexOf(s, sub string, from int) int {
	h, n := toU16(s), toU16(sub)
	if from < 0 {
		return -1
	}
	return lastIndexU16(h, n, from)
}

// javaCompare is String.compareTo.
func javaCompare(a, b string) int {
	if isASCII(a) && isASCII(b) {
		n := len(a)
		if len(b) < n {
			n = len(b)
		}
		for i := 0; i < n; i++ {
			if a[i] != b[i] {
				return int(a[i]) - int(b[i])
			}
		}
		return len(a) - len(b)
	}
	x, y := toU16(a), toU16(b)
	n := len(x)
	if len(y) < n {
		n = len(y)
	}
	for i := 0; i < n; i++ {
		if x[i] != y[i] {
			return int(x[i]) - int(y[i])
		}
	}
	return len(x) - len(y)
}

// javaTrim is String.trim: it strips code points <= U+0020.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// javaHashCode is String.hashCode.
func javaHashCode(s string) int64 {
	var h int32
	if isASCII(s) {
		for i := 0; i < len(s); i++ {
			h = 31*h + int32(s[i])
		}
		return int64(h)
	}
	for _, c := range toU16(s) {
		h = 31*h + int32(c)
	}
	return int64(h)
}

// javaSubstring is String.substring(begin, end) with Java's bounds errors.
func (st *state) javaSubstring(p int, s string, begin, end int, hasEnd bool) string {
	ascii := isASCII(s)
	n := len(s)
	var u []uint16
	if !ascii {
		u = toU16(s)
		n = len(u)
	}
	if !hasEnd {
		end = n
	}
	if begin < 0 || end > n || begin > end {
		st.fail(p, KindRuntime, "StringIndexOutOfBoundsException: begin %d, end %d, length %d", begin, end, n)
	}
	if ascii {
		return s[begin:end]
	}
	return fromU16(u[begin:end])
}

func (st *state) strArg(e *callExpr, args []value, i int) string {
	v := args[i]
	switch v.k {
	case kString:
		return v.s
	case kNull:
		st.fail(e.p, KindRuntime, "NullPointerException: argument %d of %s is null", i+1, e.name)
	}
	st.fail(e.p, KindType, "String.%s: argument %d must be a String, found %s", e.name, i+1, v.typeName())
	return ""
}

// stringMethod implements the instance methods of String.
func (st *state) stringMethod(e *callExpr, s string, args []value) value {
	recv := strV(s)
	n := len(args)
	switch e.name {
	case "length":
		if n == 0 {
			return longV(int64(javaLen(s)))
		}
	case "isEmpty":
		if n == 0 {
			return boolV(s == "")
		}
	case "isBlank":
		if n == 0 {
			return boolV(strings.TrimSpace(s) == "")
		}
	case "toString", "intern":
		if n == 0 {
			return recv
		}
	case "hashCode":
		if n == 0 {
			return longV(javaHashCode(s))
		}
	case "charAt":
		if n == 1 {
			i := st.intArg(e.p, args[0], "index")
			if isASCII(s) {
				if i < 0 || i >= len(s) {
					st.fail(e.p, KindRuntime, "StringIndexOutOfBoundsException: index %d, length %d", i, len(s))
				}
				return strV(s[i : i+1])
			}
			u := toU16(s)
			if i < 0 || i >= len(u) {
				st.fail(e.p, KindRuntime, "StringIndexOutOfBoundsException: index %d, length %d", i, len(u))
			}
			return strV(fromU16(u[i : i+1]))
		}
	case "substring":
		if n == 1 || n == 2 {
			begin := st.intArg(e.p, args[0], "beginIndex")
			end := 0
			if n == 2 {
				end = st.intArg(e.p, args[1], "endIndex")
			}
			return strV(st.javaSubstring(e.p, s, begin, end, n == 2))
		}
	case "indexOf", "lastIndexOf":
		if n == 1 || n == 2 {
			sub := st.strArg(e, args, 0)
			if e.name == "indexOf" {
				from := 0
				if n == 2 {
					from = st.intArg(e.p, args[1], "fromIndex")
				}
				return longV(int64(javaIndexOf(s, sub, from)))
			}
			from := javaLen(s)
			if n == 2 {
				from = st.intArg(e.p, args[1], "fromIndex")
			}
			return longV(int64(javaLastIndexOf(s, sub, from)))
		}
	case "contains":
		if n == 1 {
			return boolV(strings.Contains(s, st.strArg(e, args, 0)))
		}
	case "startsWith":
		if n == 1 {
			return boolV(strings.HasPrefix(s, st.strArg(e, args, 0)))
		}
		if n == 2 {
			prefix := st.strArg(e, args, 0)
			off := st.intArg(e.p, args[1], "toffset")
			if off < 0 || off > javaLen(s) {
				return falseV
			}
			return boolV(strings.HasPrefix(st.javaSubstring(e.p, s, off, 0, false), prefix))
		}
	case "endsWith":
		if n == 1 {
			return boolV(strings.HasSuffix(s, st.strArg(e, args, 0)))
		}
	case "equals":
		if n == 1 {
			return boolV(args[0].k == kString && args[0].s == s)
		}
	case "equalsIgnoreCase":
		if n == 1 {
			return boolV(args[0].k == kString && strings.EqualFold(args[0].s, s))
		}
	case "compareTo":
		if n == 1 {
			return longV(int64(javaCompare(s, st.strArg(e, args, 0))))
		}
	case "compareToIgnoreCase":
		if n == 1 {
			return longV(int64(javaCompare(strings.ToLower(strings.ToUpper(s)), strings.ToLower(strings.ToUpper(st.strArg(e, args, 0))))))
		}
	case "trim":
		if n == 0 {
			return strV(javaTrim(s))
		}
	case "strip":
		if n == 0 {
			return strV(strings.TrimSpace(s))
		}
	case "toUpperCase":
		if n == 0 {
			u := strings.ToUpper(s)
			if strings.Contains(u, "ß") {
				u = strings.ReplaceAll(u, "ß", "SS")
			}
			st.checkStrLen(e.p, len(u))
			return strV(u)
		}
	case "toLowerCase":
		if n == 0 {
			l := strings.ToLower(s)
			st.checkStrLen(e.p, len(l))
			return strV(l)
		}
	case "concat":
		if n == 1 {
			t := st.strArg(e, args, 0)
			st.checkStrLen(e.p, len(s)+len(t))
			return strV(s + t)
		}
	case "repeat":
		if n == 1 {
			k := st.intArg(e.p, args[0], "count")
			if k < 0 {
				st.fail(e.p, KindRuntime, "IllegalArgumentException: count is negative: %d", k)
			}
			if len(s) > 0 && k >= st.lim.MaxStringLength/len(s)+1 {
				st.checkStrLen(e.p, st.lim.MaxStringLength)
			}
			st.checkStrLen(e.p, len(s)*k)
			return strV(strings.Repeat(s, k))
		}
	case "replace":
		if n == 2 {
			old, nw := st.strArg(e, args, 0), st.strArg(e, args, 1)
			count := strings.Count(s, old)
			if count > 0 {
				grow := int64(count) * int64(len(nw)-len(old))
				if int64(len(s))+grow >= int64(st.lim.MaxStringLength) {
					st.checkStrLen(e.p, st.lim.MaxStringLength)
				}
				st.checkStrLen(e.p, len(s)+int(grow))
			}
			return strV(strings.ReplaceAll(s, old, nw))
		}
	case "replaceAll", "replaceFirst":
		if n == 2 {
			jr := st.regexArg(e, st.strArg(e, args, 0))
			limit := -1
			if e.name == "replaceFirst" {
				limit = 1
			}
			return strV(st.javaReplace(e.p, s, jr, st.strArg(e, args, 1), limit))
		}
	case "matches":
		if n == 1 {
			return boolV(st.javaMatches(e, s, st.strArg(e, args, 0)))
		}
	case "split":
		if n == 1 || n == 2 {
			jr := st.regexArg(e, st.strArg(e, args, 0))
			limit := 0
			if n == 2 {
				limit = st.intArg(e.p, args[1], "limit")
			}
			parts := st.javaSplit(e.p, s, jr, limit)
			st.checkArrayLen(e.p, len(parts))
			a := &array{elem: kString, v: make([]value, len(parts))}
			for i, part := range parts {
				a.v[i] = strV(part)
			}
			st.charge(e.p, int64(len(s)))
			return value{k: kArray, o: a}
		}
	case "escape":
		if n == 0 {
			return strV(st.escapeJava(e.p, s))
		}
		if n == 1 {
			return strV(st.escapeJava(e.p, st.strArg(e, args, 0)))
		}
	case "format":
		// String.format called through an instance, as Java allows.
		return stringFormat(st, e.p, args)
	case "join":
		return stringJoin(st, e.p, args)
	case "valueOf":
		if n == 1 {
			return strV(javaString(args[0]))
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

// escapeJava is Maestro's String.escape: backslash-escapes \ \t \b \n \r \f
// and ".
func (st *state) escapeJava(p int, s string) string {
	r := strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\b", `\b`, "\n", `\n`, "\r", `\r`, "\f", `\f`, `"`, `\"`)
	out := r.Replace(s)
	st.checkStrLen(p, len(out))
	return out
}

// stringFormat is String.format(fmt, args...). As in Maestro, a single
// String[] argument is spread as the varargs array.
func stringFormat(st *state, p int, args []value) value {
	if len(args) == 0 || args[0].k != kString {
		st.fail(p, KindType, "String.format needs a format String as its first argument")
	}
	rest := args[1:]
	if len(rest) == 1 && rest[0].k == kArray && rest[0].arr().elem == kString {
		rest = rest[0].arr().v
	}
	return strV(st.javaFormat(p, args[0].s, rest))
}

// stringJoin is String.join(delimiter, String[] | String...).
func stringJoin(st *state, p int, args []value) value {
	if len(args) == 0 || args[0].k != kString {
		st.fail(p, KindType, "String.join needs a String delimiter as its first argument")
	}
	elems := args[1:]
	if len(elems) == 1 && elems[0].k == kArray {
		if elems[0].arr().elem != kString {
			st.fail(p, KindType, "String.join needs a String[], found %s", elems[0].typeName())
		}
		elems = elems[0].arr().v
	}
	parts := make([]string, len(elems))
	total := 0
	for i, el := range elems {
		switch el.k {
		case kString, kNull:
			parts[i] = javaString(el)
		default:
			st.fail(p, KindType, "String.join: element %d must be a String, found %s", i+1, el.typeName())
		}
		total += len(parts[i]) + len(args[0].s)
	}
	st.checkStrLen(p, total)
	return strV(strings.Join(parts, args[0].s))
}
