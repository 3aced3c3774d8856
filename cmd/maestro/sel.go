package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/sel"
)

const selUsage = `usage: maestro sel eval 'EXPR' [--params '{"foo": 41}'] [--timeout 10s]
       maestro sel names 'EXPR'

eval   evaluates a SEL expression and prints its result as JSON on stdout;
       --params binds a JSON object's fields as the expression's params.
names  prints, as a JSON array, the params the expression reads.

Errors go to stderr with their line, column and source snippet (exit 1);
usage errors exit 2.
`

// runSel implements `maestro sel eval 'EXPR' [--params '{"foo": 41}']`.
func runSel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, selUsage)
		return 2
	}
	switch args[0] {
	case "eval":
		return runSelEval(ctx, args[1:], stdout, stderr)
	case "names":
		return runSelNames(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, selUsage)
		return 0
	}
	fmt.Fprintf(stderr, "maestro sel: unknown subcommand %q\n\n%s", args[0], selUsage)
	return 2
}

// selArgs are the parsed arguments of `maestro sel eval|names`.
type selArgs struct {
	expr    string
	params  string
	timeout time.Duration
	help    bool
}

// parseSelArgs reads one expression and the flags, in any order. Arguments
// that merely start with '-' (such as "-1 + 2") are expressions; only the
// flags below and other "--" words are treated as flags.
func parseSelArgs(args []string, withFlags bool) (selArgs, error) {
	a := selArgs{timeout: 10 * time.Second}
	haveExpr := false
	setExpr := func(s string) error {
		if haveExpr {
			return fmt.Errorf("unexpected extra argument %q (quote the whole expression as one argument)", s)
		}
		a.expr, haveExpr = s, true
		return nil
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, val, hasVal := strings.Cut(arg, "=")
		switch {
		case arg == "-h" || arg == "--help" || arg == "-help":
			a.help = true
			return a, nil
		case arg == "--":
			for _, rest := range args[i+1:] {
				if err := setExpr(rest); err != nil {
					return a, err
				}
			}
			i = len(args)
		case withFlags && (name == "--params" || name == "-params" || name == "--timeout" || name == "-timeout"):
			if !hasVal {
				if i+1 >= len(args) {
					return a, fmt.Errorf("flag %s needs a value", name)
				}
				i++
				val = args[i]
			}
			if strings.HasSuffix(name, "params") {
				a.params = val
				continue
			}
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return a, fmt.Errorf("invalid --timeout %q", val)
			}
			a.timeout = d
		case strings.HasPrefix(arg, "--"):
			return a, fmt.Errorf("unknown flag %s", name)
		default:
			if err := setExpr(arg); err != nil {
				return a, err
			}
		}
	}
	if !haveExpr {
		return a, errors.New("missing the expression")
	}
	return a, nil
}

func runSelEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parseSelArgs(args, true)
	if a.help {
		fmt.Fprint(stdout, selUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "maestro sel eval: %v\n\n%s", err, selUsage)
		return 2
	}
	env := sel.MapEnv{}
	if strings.TrimSpace(a.params) != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(a.params)))
		dec.UseNumber() // keep 41 a long and 41.0 a double
		var params map[string]any
		if err := dec.Decode(&params); err != nil || params == nil || dec.More() {
			fmt.Fprintf(stderr, "maestro sel eval: --params must be a JSON object: %v\n", errOr(err, "not an object"))
			return 2
		}
		env = params
	}
	prog, err := sel.Compile(a.expr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	v, err := prog.Eval(ctx, env)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	out, err := sel.MarshalResult(v)
	if err != nil {
		fmt.Fprintf(stderr, "maestro sel eval: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}

func runSelNames(args []string, stdout, stderr io.Writer) int {
	a, err := parseSelArgs(args, false)
	if a.help {
		fmt.Fprint(stdout, selUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "maestro sel names: %v\n\n%s", err, selUsage)
		return 2
	}
	prog, err := sel.Compile(a.expr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	out, _ := json.Marshal(prog.Names())
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}

func errOr(err error, msg string) string {
	if err != nil {
		return err.Error()
	}
	return msg
}
