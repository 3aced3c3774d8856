package sel

import (
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRegexLength bounds patterns; Go's RE2 engine keeps matching linear in
// the input, so a bounded pattern keeps every regex call bounded.
const maxRegexLength = 4096

// javaRegex is a compiled pattern plus what the Java-style match loop needs
// to know about it.
type javaRegex struct {
	re *regexp.Regexp
	// sliceable reports that the pattern has no assertion that looks at
	// text before the match (^, \A, \b, \B), so matching a suffix of the
	// input is the same as matching from an offset.
	sliceable bool
}

// compileJavaRegex compiles a java.util.regex pattern with Go's RE2 syntax,
// which covers the patterns SEL users write (character classes, groups,
// quantifiers, alternation). Back-references and look-around are rejected.
func compileJavaRegex(pattern string) (*javaRegex, error) {
	if len(pattern) > maxRegexLength {
		return nil, &regexTooLong{n: len(pattern)}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	return &javaRegex{re: re, sliceable: !hasLeftContext(parsed)}, nil
}

type regexTooLong struct{ n int }

func (e *regexTooLong) Error() string {
	return "regular expression of " + strconv.Itoa(e.n) + " bytes is too long"
}

func hasLeftContext(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, s := range re.Sub {
		if hasLeftContext(s) {
			return true
		}
	}
	return false
}

// regexArg returns the compiled pattern for a call's first argument, using
// the one check precompiled for a literal.
func (st *state) regexArg(e *callExpr, pattern string) *javaRegex {
	if e.re != nil {
		return e.re
	}
	jr, err := compileJavaRegex(pattern)
	if err != nil {
		st.failCause(e.p, KindRuntime, err, "PatternSyntaxException: %v", err)
	}
	return jr
}

// findAll returns successive matches the way java.util.regex.Matcher.find
// does: after a non-empty match an empty match at its end is allowed (Go's
// FindAll skips it). limit < 0 means no limit. Matches are charged to the
// memory budget.
func (st *state) findAll(p int, jr *javaRegex, s string, limit int) [][]int {
	if !jr.sliceable {
		out := jr.re.FindAllStringSubmatchIndex(s, limit)
		st.charge(p, int64(len(out))*int64(24+8*2*(jr.re.NumSubexp()+1)))
		return out
	}
	var out [][]int
	per := int64(24 + 8*2*(jr.re.NumSubexp()+1))
	pos := 0
	for pos <= len(s) && (limit < 0 || len(out) < limit) {
		loc := jr.re.FindStringSubmatchIndex(s[pos:])
		if loc == nil {
			break
		}
		for i := range loc {
			if loc[i] >= 0 {
				loc[i] += pos
			}
		}
		out = append(out, loc)
		st.charge(p, per)
		if loc[1] == loc[0] {
			if loc[1] >= len(s) {
				break
			}
			_, w := utf8.DecodeRuneInString(s[loc[1]:])
			pos = loc[1] + w
		} else {
			pos = loc[1]
		}
	}
	return out
}

// javaSplit implements String.split(regex, limit).
func (st *state) javaSplit(p int, s string, jr *javaRegex, limit int) []string {
	var list []string
	index := 0
	matchLimited := limit > 0
	for _, m := range st.findAll(p, jr, s, st.lim.MaxArrayLength+2) {
		if !matchLimited || len(list) < limit-1 {
			if index == 0 && m[0] == 0 && m[0] == m[1] {
				continue // no leading empty string for a zero-width match at 0
			}
			list = append(list, s[index:m[0]])
			index = m[1]
		} else if len(list) == limit-1 {
			list = append(list, s[index:])
			index = m[1]
			break
		}
		if len(list) >= st.lim.MaxArrayLength {
			st.checkArrayLen(p, len(list))
		}
	}
	if index == 0 {
		return []string{s}
	}
	if !matchLimited || len(list) < limit {
		list = append(list, s[index:])
	}
	if limit == 0 {
		n := len(list)
		for n > 0 && list[n-1] == "" {
			n--
		}
		list = list[:n]
	}
	return list
}

// replPart is a piece of a parsed Java replacement string: literal text or a
// group reference.
type replPart struct {
	lit   string
	group int // -1 for literal
}

// parseReplacement parses Matcher.appendReplacement syntax: \x escapes x,
// $n refers to group n (taking further digits while the group exists) and
// ${name} to a named group.
func (st *state) parseReplacement(p int, jr *javaRegex, repl string) []replPart {
	var parts []replPart
	var lit strings.Builder
	groups := jr.re.NumSubexp()
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i >= len(repl) {
				st.fail(p, KindRuntime, "IllegalArgumentException: character to be escaped is missing")
			}
			lit.WriteByte(repl[i])
		case '$':
			i++
			if i >= len(repl) {
				st.fail(p, KindRuntime, "IllegalArgumentException: Illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				end := strings.IndexByte(repl[i:], '}')
				if end < 0 {
					st.fail(p, KindRuntime, "IllegalArgumentException: named capturing group is missing trailing '}'")
				}
				name := repl[i+1 : i+end]
				g := jr.re.SubexpIndex(name)
				if g < 0 {
					st.fail(p, KindRuntime, "IllegalArgumentException: No group with name {%s}", name)
				}
				flush()
				parts = append(parts, replPart{group: g})
				i += end
				continue
			}
			if !isDigit(repl[i]) {
				st.fail(p, KindRuntime, "IllegalArgumentException: Illegal group reference")
			}
			g := int(repl[i] - '0')
			if g > groups {
				st.fail(p, KindRuntime, "IndexOutOfBoundsException: No group %d", g)
			}
			for i+1 < len(repl) && isDigit(repl[i+1]) {
				ng := g*10 + int(repl[i+1]-'0')
				if ng > groups {
					break
				}
				g = ng
				i++
			}
			flush()
			parts = append(parts, replPart{group: g})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts
}

// javaReplace implements replaceAll (n < 0) and replaceFirst (n == 1).
func (st *state) javaReplace(p int, s string, jr *javaRegex, repl string, n int) string {
	parts := st.parseReplacement(p, jr, repl)
	matches := st.findAll(p, jr, s, n)
	if len(matches) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(s[last:m[0]])
		for _, part := range parts {
			if part.group < 0 {
				b.WriteString(part.lit)
			} else if m[2*part.group] >= 0 {
				b.WriteString(s[m[2*part.group]:m[2*part.group+1]])
			}
		}
		last = m[1]
		if b.Len() >= st.lim.MaxStringLength {
			st.checkStrLen(p, b.Len())
		}
	}
	b.WriteString(s[last:])
	st.checkStrLen(p, b.Len())
	return b.String()
}

// javaMatches implements String.matches: the whole input must match. A
// literal pattern arrives precompiled and anchored.
func (st *state) javaMatches(e *callExpr, s, pattern string) bool {
	jr := e.re
	if jr == nil {
		var err error
		jr, err = compileJavaRegex(anchorPattern(pattern))
		if err != nil {
			st.failCause(e.p, KindRuntime, err, "PatternSyntaxException: %v", err)
		}
	}
	return jr.re.MatchString(s)
}

func anchorPattern(p string) string { return `\A(?:` + p + `)\z` }
