package sel

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrorKind classifies an *Error.
type ErrorKind int

// Error kinds. Every error returned by Compile or Program.Eval is an *Error
// carrying one of these kinds.
const (
	// KindSyntax reports source text that does not parse.
	KindSyntax ErrorKind = iota + 1
	// KindType reports a value or name of the wrong type, an unknown method,
	// class or field.
	KindType
	// KindRuntime reports a failure while evaluating (division by zero, index
	// out of bounds, a bad number format, an extension function's error...).
	KindRuntime
	// KindLimit reports a broken limit (see Limits) or a cancelled context.
	KindLimit
	// KindUserThrow reports a `throw "message"` statement in the expression.
	KindUserThrow
)

// String returns a short lowercase name for k.
func (k ErrorKind) String() string {
	switch k {
	case KindSyntax:
		return "syntax error"
	case KindType:
		return "type error"
	case KindRuntime:
		return "runtime error"
	case KindLimit:
		return "limit exceeded"
	case KindUserThrow:
		return "user error"
	default:
		return fmt.Sprintf("error kind %d", int(k))
	}
}

// Error is the error type returned by Compile and Program.Eval. Line and
// Column are 1-based (Column counts characters); Snippet holds the source line
// and a caret under the offending column.
type Error struct {
	Kind    ErrorKind
	Message string
	Line    int
	Column  int
	Snippet string

	cause error
}

// Error formats the error as "KIND at line L, column C: MESSAGE" followed by
// the snippet.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("sel: ")
	b.WriteString(e.Kind.String())
	if e.Line > 0 {
		fmt.Fprintf(&b, " at line %d, column %d", e.Line, e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Snippet != "" {
		b.WriteByte('\n')
		b.WriteString(e.Snippet)
	}
	return b.String()
}

// Unwrap returns the underlying cause, such as context.DeadlineExceeded or an
// extension function's error, if there is one.
func (e *Error) Unwrap() error { return e.cause }

// newError builds an *Error for the byte offset off in src.
func newError(src string, off int, kind ErrorKind, cause error, format string, args ...any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	line, col, snippet := locate(src, off)
	return &Error{Kind: kind, Message: msg, Line: line, Column: col, Snippet: snippet, cause: cause}
}

// snippetWidth is the widest source excerpt shown in a snippet, in characters.
const snippetWidth = 72

// locate turns a byte offset into a 1-based line and column and a two-line
// snippet: the source line (clipped around the column) and a caret.
func locate(src string, off int) (line, col int, snippet string) {
	if off < 0 {
		off = 0
	}
	if off > len(src) {
		off = len(src)
	}
	line = 1 + strings.Count(src[:off], "\n")
	start := strings.LastIndexByte(src[:off], '\n') + 1
	end := strings.IndexByte(src[off:], '\n')
	if end < 0 {
		end = len(src)
	} else {
		end += off
	}
	text := strings.TrimRight(src[start:end], "\r")
	col = 1 + utf8.RuneCountInString(src[start:off])

	runes := []rune(strings.ReplaceAll(text, "\t", " "))
	caret := col - 1
	prefix, suffix := "", ""
	if len(runes) > snippetWidth {
		from := caret - snippetWidth/2
		if from < 0 {
			from = 0
		}
		to := from + snippetWidth
		if to > len(runes) {
			to = len(runes)
			from = to - snippetWidth
		}
		if from > 0 {
			prefix = "..."
		}
		if to < len(runes) {
			suffix = "..."
		}
		runes = runes[from:to]
		caret = caret - from + len(prefix)
	}
	if caret > len(runes)+len(prefix) {
		caret = len(runes) + len(prefix)
	}
	snippet = "  " + prefix + string(runes) + suffix + "\n  " + strings.Repeat(" ", caret) + "^"
	return line, col, snippet
}
