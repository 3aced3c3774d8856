package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunSel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		args      []string
		code      int
		stdout    string
		stderrHas []string
	}{
		{name: "simple", args: []string{"eval", "1 + 2"}, code: 0, stdout: "3\n"},
		{name: "params", args: []string{"eval", "foo * 2 + 1", "--params", `{"foo": 41}`}, code: 0, stdout: "83\n"},
		{name: "params before expr", args: []string{"eval", "--params={\"foo\": 1.5}", "foo * 2"}, code: 0, stdout: "3.0\n"},
		{name: "double stays a double", args: []string{"eval", "2.0"}, code: 0, stdout: "2.0\n"},
		{name: "string", args: []string{"eval", `"v" + 3.0`}, code: 0, stdout: "\"v3.0\"\n"},
		{name: "array", args: []string{"eval", "Util.dateIntsBetween(20200226, 20200302, 1)"}, code: 0, stdout: "[20200226,20200227,20200228,20200229,20200301]\n"},
		{name: "map", args: []string{"eval", `Map m = new HashMap(); m.put("b", 1); m.put("a", "x"); m`}, code: 0, stdout: "{\"a\":\"x\",\"b\":1}\n"},
		{name: "null", args: []string{"eval", "int x = 1;"}, code: 0, stdout: "null\n"},
		{name: "negative literal is an expression", args: []string{"eval", "-1 + 2"}, code: 0, stdout: "1\n"},
		{name: "params.get", args: []string{"eval", "params.get('p')", "--params", `{"p": [1, 2]}`}, code: 0, stdout: "[1,2]\n"},
		{name: "runtime error", args: []string{"eval", "x = 1;\ny = x / 0;"}, code: 1, stderrHas: []string{"line 2, column 7", "/ by zero", "y = x / 0;", "^"}},
		{name: "syntax error", args: []string{"eval", "1 +"}, code: 1, stderrHas: []string{"syntax error at line 1"}},
		{name: "throw", args: []string{"eval", `throw "no data for " + d`, "--params", `{"d": 20200101}`}, code: 1, stderrHas: []string{"user error", "no data for 20200101"}},
		{name: "limit", args: []string{"eval", "while (true) {}"}, code: 1, stderrHas: []string{"limit exceeded"}},
		{name: "timeout", args: []string{"eval", "--timeout", "1ns", "while (true) {}"}, code: 1, stderrHas: []string{"limit exceeded"}},
		{name: "names", args: []string{"names", "foo + params.get('bar')"}, code: 0, stdout: "[\"bar\",\"foo\"]\n"},
		{name: "no args", args: nil, code: 2, stderrHas: []string{"usage: maestro sel eval"}},
		{name: "unknown subcommand", args: []string{"run", "1"}, code: 2, stderrHas: []string{"unknown subcommand"}},
		{name: "missing expr", args: []string{"eval"}, code: 2, stderrHas: []string{"missing the expression"}},
		{name: "two exprs", args: []string{"eval", "1", "2"}, code: 2, stderrHas: []string{"unexpected extra argument"}},
		{name: "bad params", args: []string{"eval", "1", "--params", "[1]"}, code: 2, stderrHas: []string{"JSON object"}},
		{name: "params without value", args: []string{"eval", "1", "--params"}, code: 2, stderrHas: []string{"needs a value"}},
		{name: "unknown flag", args: []string{"eval", "1", "--nope"}, code: 2, stderrHas: []string{"unknown flag --nope"}},
		{name: "bad timeout", args: []string{"eval", "1", "--timeout", "soon"}, code: 2, stderrHas: []string{"invalid --timeout"}},
		{name: "help", args: []string{"eval", "--help"}, code: 0},
		{name: "help subcommand", args: []string{"help"}, code: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := runSel(context.Background(), tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if tc.stdout != "" && out.String() != tc.stdout {
				t.Fatalf("stdout %q, want %q", out.String(), tc.stdout)
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(errb.String(), s) {
					t.Fatalf("stderr %q lacks %q", errb.String(), s)
				}
			}
			if tc.code != 0 && out.Len() > 0 {
				t.Fatalf("stdout not empty on failure: %q", out.String())
			}
		})
	}
}
