package sel

import (
	"errors"
	"strings"
	"testing"
)

var errorCases = []evalCase{
	{src: `1 +`, errKind: KindSyntax, errHas: "expected an expression"},
	{src: `(1 + 2`, errKind: KindSyntax, errHas: "expected ')'"},
	{src: `"unterminated`, errKind: KindSyntax, errHas: "unterminated string"},
	{src: `/* open`, errKind: KindSyntax, errHas: "unterminated comment"},
	{src: `x = 1 y = 2`, errKind: KindSyntax, errHas: "expected ';'"},
	{src: `switch (x) {}`, errKind: KindSyntax, errHas: "'switch' is not supported"},
	{src: `do { } while (true);`, errKind: KindSyntax, errHas: "'do' is not supported"},
	{src: `try { 1; } catch (Exception e) {}`, errKind: KindSyntax},
	{src: `a & b`, errKind: KindSyntax, errHas: "operator '&' is not supported"},
	{src: `1 << 2`, errKind: KindSyntax, errHas: "not supported"},
	{src: `~1`, errKind: KindSyntax},
	{src: `x instanceof String`, errKind: KindSyntax},
	{src: `1 = 2`, errKind: KindSyntax, errHas: "invalid assignment target"},
	{src: `else 1`, errKind: KindSyntax},
	{src: `{ 1;`, errKind: KindSyntax, errHas: "unclosed"},
	{src: `break;`, errKind: KindSyntax, errHas: "break outside of a loop"},
	{src: `continue;`, errKind: KindSyntax},
	{src: `Foo x = 1;`, errKind: KindType, errHas: "unknown type Foo"},
	{src: `char c = 'a';`, errKind: KindType, errHas: "not supported"},
	{src: `new Foo()`, errKind: KindType, errHas: "cannot create an instance of Foo"},
	{src: `Math = 1`, errKind: KindType},
	{src: `Math`, errKind: KindType, errHas: "class Math cannot be used as a value"},
	{src: `Math.PI2`, errKind: KindType, errHas: "unknown field"},
	{src: `"a".foo`, errKind: KindType, errHas: "unknown field"},
	{src: `int a[] = new int[1];`, errKind: KindSyntax},
	{src: "x = 1;\ny = 1 / 0;", errKind: KindRuntime, errHas: "line 2, column 7"},
	{src: `@`, errKind: KindSyntax},
	{src: `#`, errKind: KindSyntax, errHas: "unexpected character"},
	{src: `1abc`, errKind: KindSyntax, errHas: "malformed number"},
}

func TestErrors(t *testing.T) { t.Parallel(); run(t, errorCases) }

func TestErrorPositionAndSnippet(t *testing.T) {
	t.Parallel()
	_, err := evalSrc("long a = 1;\nlong b = a / 0;\nreturn b;", nil)
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("want *Error, got %v", err)
	}
	if se.Kind != KindRuntime || se.Line != 2 || se.Column != 12 {
		t.Fatalf("got %v at %d:%d", se.Kind, se.Line, se.Column)
	}
	wantSnippet := "  long b = a / 0;\n             ^"
	if se.Snippet != wantSnippet {
		t.Fatalf("snippet:\n%s\nwant:\n%s", se.Snippet, wantSnippet)
	}
	msg := se.Error()
	for _, part := range []string{"runtime error at line 2, column 12", "/ by zero", wantSnippet} {
		if !strings.Contains(msg, part) {
			t.Fatalf("Error() = %q lacks %q", msg, part)
		}
	}
}

func TestErrorSnippetLongLine(t *testing.T) {
	t.Parallel()
	src := strings.Repeat("x = 1; ", 40) + "y = 1 / 0;" + strings.Repeat(" z = 2;", 40)
	_, err := evalSrc(src, nil)
	var se *Error
	if !errors.As(err, &se) {
		t.Fatal(err)
	}
	lines := strings.Split(se.Snippet, "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "1 / 0") || !strings.HasPrefix(lines[0], "  ...") {
		t.Fatalf("snippet %q", se.Snippet)
	}
	caret := strings.IndexByte(lines[1], '^')
	if lines[0][caret] != '/' {
		t.Fatalf("caret under %q in %q", lines[0][caret], se.Snippet)
	}
	if len([]rune(lines[0])) > snippetWidth+10 {
		t.Fatalf("snippet line too long: %d", len(lines[0]))
	}
}

func TestErrorKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[ErrorKind]string{
		KindSyntax: "syntax error", KindType: "type error", KindRuntime: "runtime error",
		KindLimit: "limit exceeded", KindUserThrow: "user error", ErrorKind(99): "error kind 99",
	} {
		if k.String() != want {
			t.Errorf("%d: %q", int(k), k.String())
		}
	}
	e := &Error{Kind: KindUserThrow, Message: "m"}
	if e.Error() != "sel: user error: m" {
		t.Fatalf("Error() = %q", e.Error())
	}
}

func TestCompileErrorIsError(t *testing.T) {
	t.Parallel()
	_, err := Compile("1 +\n  2 +")
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindSyntax || se.Line != 2 {
		t.Fatalf("got %#v", err)
	}
}
