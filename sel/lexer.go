package sel

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// tokKind identifies a token class.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tKeyword
	tInt
	tFloat
	tString
	tOp
)

// token is one lexical token. For tInt, ival holds the value (uval and
// overflow describe the literal 9223372036854775808, which is only legal
// after a unary minus); for tFloat fval; for tString sval holds the decoded
// text; for keywords and operators text holds the spelling.
type token struct {
	kind     tokKind
	pos      int
	end      int
	text     string
	sval     string
	ival     int64
	fval     float64
	minOnly  bool // int literal equal to 2^63: valid only when negated
	hasLongL bool
}

// keywords are Java's reserved words; the parser rejects those SEL lacks.
var keywords = map[string]bool{
	"abstract": true, "boolean": true, "break": true, "byte": true, "case": true,
	"catch": true, "char": true, "class": true, "const": true, "continue": true,
	"default": true, "do": true, "double": true, "else": true, "extends": true,
	"false": true, "final": true, "finally": true, "float": true, "for": true,
	"goto": true, "if": true, "implements": true, "import": true, "instanceof": true,
	"int": true, "interface": true, "long": true, "native": true, "new": true,
	"null": true, "package": true, "private": true, "protected": true, "public": true,
	"return": true, "short": true, "static": true, "super": true, "switch": true,
	"synchronized": true, "this": true, "throw": true, "throws": true, "transient": true,
	"true": true, "try": true, "void": true, "volatile": true, "while": true,
}

// operators are the Java operators and separators; the lexer takes the
// longest match.
var operators = []string{
	">>>=", "<<=", ">>=", ">>>",
	"==", "<=", ">=", "!=", "||", "&&", "++", "--", "<<", ">>",
	"+=", "-=", "*=", "/=", "&=", "|=", "^=", "%=",
	"(", ")", "{", "}", "[", "]", ";", ",", ".", "=", ">", "<", "!", "~",
	"?", ":", "+", "-", "*", "/", "&", "|", "^", "%", "@",
}

var operatorSet = func() map[string]bool {
	m := make(map[string]bool, len(operators))
	for _, op := range operators {
		m[op] = true
	}
	return m
}()

// lex splits src into tokens. It fails with a KindSyntax *Error.
func lex(src string) ([]token, *Error) {
	l := lexer{src: src}
	toks := make([]token, 0, len(src)/3+2)
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		if t.kind == tEOF {
			return toks, nil
		}
	}
}

type lexer struct {
	src string
	pos int
}

func (l *lexer) errAt(off int, format string, args ...any) *Error {
	return newError(l.src, off, KindSyntax, nil, format, args...)
}

func (l *lexer) skipSpaceAndComments() *Error {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.pos++
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' && l.src[l.pos] != '\r' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '*':
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				return l.errAt(l.pos, "unterminated comment")
			}
			l.pos += 2 + end + 2
		default:
			if c >= utf8.RuneSelf {
				r, n := utf8.DecodeRuneInString(l.src[l.pos:])
				if r == '\u00a0' || r == '\ufeff' {
					l.pos += n
					continue
				}
			}
			return nil
		}
	}
	return nil
}

func isIdentStart(r rune) bool {
	return r == '_' || r == '$' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') ||
		(r >= utf8.RuneSelf && unicode.IsLetter(r))
}

func isIdentPart(r rune) bool {
	return isIdentStart(r) || ('0' <= r && r <= '9') || (r >= utf8.RuneSelf && unicode.IsDigit(r))
}

func (l *lexer) next() (token, *Error) {
	if err := l.skipSpaceAndComments(); err != nil {
		return token{}, err
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tEOF, pos: start, end: start}, nil
	}
	c := l.src[l.pos]
	r, n := rune(c), 1
	if c >= utf8.RuneSelf {
		r, n = utf8.DecodeRuneInString(l.src[l.pos:])
	}
	switch {
	case isIdentStart(r):
		l.pos += n
		for l.pos < len(l.src) {
			r2, n2 := utf8.DecodeRuneInString(l.src[l.pos:])
			if !isIdentPart(r2) {
				break
			}
			l.pos += n2
		}
		text := l.src[start:l.pos]
		kind := tIdent
		if keywords[text] {
			kind = tKeyword
		}
		return token{kind: kind, pos: start, end: l.pos, text: text}, nil
	case '0' <= c && c <= '9', c == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]):
		return l.number()
	case c == '"' || c == '\'':
		return l.stringLit(c)
	}
	for n := 4; n >= 1; n-- {
		if l.pos+n <= len(l.src) {
			if op := l.src[l.pos : l.pos+n]; operatorSet[op] {
				l.pos += n
				return token{kind: tOp, pos: start, end: l.pos, text: op}, nil
			}
		}
	}
	if r == utf8.RuneError && n == 1 {
		return token{}, l.errAt(start, "invalid UTF-8 in source")
	}
	return token{}, l.errAt(start, "unexpected character %q", r)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// number lexes integer and floating-point literals. Decimal integers with
// leading zeros are read as decimal, as Maestro's SEL does (Long.parseLong).
func (l *lexer) number() (token, *Error) {
	start := l.pos
	src := l.src
	if src[l.pos] == '0' && l.pos+1 < len(src) && (src[l.pos+1] == 'x' || src[l.pos+1] == 'X') {
		l.pos += 2
		ds := l.pos
		for l.pos < len(src) && isHexDigit(src[l.pos]) {
			l.pos++
		}
		if l.pos == ds {
			return token{}, l.errAt(start, "malformed hexadecimal literal")
		}
		digits := src[ds:l.pos]
		long := false
		if l.pos < len(src) && (src[l.pos] == 'l' || src[l.pos] == 'L') {
			long = true
			l.pos++
		}
		if err := l.checkLiteralEnd(start); err != nil {
			return token{}, err
		}
		u, err := strconv.ParseUint(digits, 16, 64)
		if err != nil {
			return token{}, l.errAt(start, "integer number too large: %s", src[start:l.pos])
		}
		v := int64(u)
		if !long && u <= 0xFFFFFFFF {
			v = int64(int32(uint32(u))) // Java int hex literal
		}
		return token{kind: tInt, pos: start, end: l.pos, text: src[start:l.pos], ival: v, hasLongL: long}, nil
	}
	for l.pos < len(src) && isDigit(src[l.pos]) {
		l.pos++
	}
	isFloat := false
	if l.pos < len(src) && src[l.pos] == '.' {
		isFloat = true
		l.pos++
		for l.pos < len(src) && isDigit(src[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(src) && (src[l.pos] == 'e' || src[l.pos] == 'E') {
		p := l.pos + 1
		if p < len(src) && (src[p] == '+' || src[p] == '-') {
			p++
		}
		if p < len(src) && isDigit(src[p]) {
			isFloat = true
			for p < len(src) && isDigit(src[p]) {
				p++
			}
			l.pos = p
		} else {
			return token{}, l.errAt(start, "malformed floating-point literal")
		}
	}
	text := src[start:l.pos]
	if l.pos < len(src) {
		switch src[l.pos] {
		case 'f', 'F', 'd', 'D':
			isFloat = true
			l.pos++
		case 'l', 'L':
			if isFloat {
				return token{}, l.errAt(start, "malformed floating-point literal")
			}
			l.pos++
			if err := l.checkLiteralEnd(start); err != nil {
				return token{}, err
			}
			return l.intToken(start, text, true)
		}
	}
	if err := l.checkLiteralEnd(start); err != nil {
		return token{}, err
	}
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return token{}, l.errAt(start, "malformed floating-point literal %s", text)
		}
		return token{kind: tFloat, pos: start, end: l.pos, text: src[start:l.pos], fval: f}, nil
	}
	return l.intToken(start, text, false)
}

func (l *lexer) intToken(start int, digits string, long bool) (token, *Error) {
	u, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || u > 1<<63 {
		return token{}, l.errAt(start, "integer number too large: %s", digits)
	}
	t := token{kind: tInt, pos: start, end: l.pos, text: l.src[start:l.pos], hasLongL: long}
	if u == 1<<63 {
		t.minOnly = true
		t.ival = -1 << 63
	} else {
		t.ival = int64(u)
	}
	return t, nil
}

func (l *lexer) checkLiteralEnd(start int) *Error {
	if l.pos < len(l.src) {
		r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
		if isIdentPart(r) {
			return l.errAt(start, "malformed number literal")
		}
	}
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// stringLit lexes a single- or double-quoted string with Java escapes
// (\b \t \n \f \r \" \' \\, octal, and \uXXXX).
func (l *lexer) stringLit(quote byte) (token, *Error) {
	start := l.pos
	l.pos++
	var b strings.Builder
	var pendingHigh rune = -1
	flushHigh := func() {
		if pendingHigh >= 0 {
			b.WriteRune(utf8.RuneError)
			pendingHigh = -1
		}
	}
	for {
		if l.pos >= len(l.src) {
			return token{}, l.errAt(start, "unterminated string literal")
		}
		c := l.src[l.pos]
		switch {
		case c == quote:
			flushHigh()
			l.pos++
			return token{kind: tString, pos: start, end: l.pos, text: l.src[start:l.pos], sval: b.String()}, nil
		case c == '\n' || c == '\r':
			return token{}, l.errAt(start, "unterminated string literal")
		case c == '\\':
			if l.pos+1 >= len(l.src) {
				return token{}, l.errAt(l.pos, "unterminated string literal")
			}
			e := l.src[l.pos+1]
			escPos := l.pos
			l.pos += 2
			var r rune
			switch e {
			case 'b':
				r = '\b'
			case 't':
				r = '\t'
			case 'n':
				r = '\n'
			case 'f':
				r = '\f'
			case 'r':
				r = '\r'
			case '"':
				r = '"'
			case '\'':
				r = '\''
			case '\\':
				r = '\\'
			case 'u':
				for l.pos < len(l.src) && l.src[l.pos] == 'u' {
					l.pos++
				}
				if l.pos+4 > len(l.src) {
					return token{}, l.errAt(escPos, "invalid unicode escape")
				}
				v, err := strconv.ParseUint(l.src[l.pos:l.pos+4], 16, 32)
				if err != nil {
					return token{}, l.errAt(escPos, "invalid unicode escape")
				}
				l.pos += 4
				u := rune(v)
				if utf16.IsSurrogate(u) {
					if u < 0xDC00 {
						flushHigh()
						pendingHigh = u
						continue
					}
					if pendingHigh >= 0 {
						b.WriteRune(utf16.DecodeRune(pendingHigh, u))
						pendingHigh = -1
						continue
					}
					b.WriteRune(utf8.RuneError)
					continue
				}
				r = u
			default:
				if e >= '0' && e <= '7' {
					v := rune(e - '0')
					max := 2
					if e > '3' {
						max = 1
					}
					for i := 0; i < max && l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '7'; i++ {
						v = v*8 + rune(l.src[l.pos]-'0')
						l.pos++
					}
					r = v
				} else {
					return token{}, l.errAt(escPos, "invalid escape sequence \\%c", e)
				}
			}
			flushHigh()
			b.WriteRune(r)
		default:
			flushHigh()
			if c < utf8.RuneSelf {
				b.WriteByte(c)
				l.pos++
				continue
			}
			r, n := utf8.DecodeRuneInString(l.src[l.pos:])
			if r == utf8.RuneError && n == 1 {
				return token{}, l.errAt(l.pos, "invalid UTF-8 in string literal")
			}
			b.WriteString(l.src[l.pos : l.pos+n])
			l.pos += n
		}
	}
}
