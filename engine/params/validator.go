package params

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/maestro-aws/maestro/sel"
)

// A param's validator is written in one of Maestro's two forms:
//
//   - a SEL expression that returns true for a valid value. It sees the
//     params evaluated so far, and `param`, the value under check:
//     "param != null && param.size() > 2";
//   - Bean Validation annotations, several separated by spaces:
//     @NotNull, @NotEmpty, @NotBlank, @Positive, @PositiveOrZero,
//     @Negative, @NegativeOrZero, @Min(n), @Max(n),
//     @Size(min = a, max = b), @Pattern(regexp = "..."), @AssertTrue,
//     @AssertFalse.
//
// ParamName is the name a SEL validator reads the value under check by.
const ParamName = "param"

// compiledValidator is a validator ready to check values.
type compiledValidator struct {
	src    string
	prog   *sel.Program
	checks []annotation
}

// annotation is one Bean Validation annotation: nil when v is valid.
type annotation struct {
	name  string
	check func(v any) error
}

// validatorCache holds compiled validators by source and the names of the
// functions a SEL validator is compiled against (funcSet.key: its program
// calls its evaluation's functions, compilecache.go); keptLimit bounds
// them.
var validatorCache keptMap[validatorKey, *compiledValidator]

type validatorKey struct {
	src   string
	funcs string
}

// compileValidator compiles a validator in either form against the
// functions of fs, or returns the one kept.
func compileValidator(src string, fs funcSet) (*compiledValidator, error) {
	annotations := strings.HasPrefix(strings.TrimSpace(src), "@")
	key := validatorKey{src: src}
	if !annotations {
		key.funcs = fs.key
	}
	if c, ok := validatorCache.get(key); ok {
		return c, nil
	}
	c := &compiledValidator{src: src}
	if annotations {
		checks, err := parseAnnotations(src)
		if err != nil {
			return nil, err
		}
		c.checks = checks
	} else {
		prog, err := sel.Compile(src, compileOptions(fs)...)
		if err != nil {
			return nil, err
		}
		c.prog = prog
	}
	validatorCache.put(key, c)
	return c, nil
}

// CheckValidator reports a validator that does not compile, for the checks
// at push.
func CheckValidator(src string) error {
	if strings.HasPrefix(strings.TrimSpace(src), "@") {
		_, err := parseAnnotations(src)
		return err
	}
	_, err := sel.Compile(src, sel.WithFunctions(map[string]sel.Func{
		"params.getFromStep": nil, "params.getFromInstance": nil, "params.getFromSignal": nil,
	}))
	return err
}

// check runs the validator on v; env holds the other params.
func (c *compiledValidator) check(ctx context.Context, v any, env sel.Env) error {
	if c.prog == nil {
		for _, a := range c.checks {
			if err := a.check(v); err != nil {
				return &refusal{fmt.Sprintf("%s: %s: %v", ErrValidator, a.name, err)}
			}
		}
		return nil
	}
	out, err := c.prog.Eval(ctx, paramEnv{value: v, rest: env})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrValidator, c.src, err)
	}
	if ok, isBool := out.(bool); !isBool || !ok {
		return &refusal{fmt.Sprintf("%s: %s returned %v", ErrValidator, c.src, out)}
	}
	return nil
}

// refusal is a validator that ran and said no (not one that failed to
// run).
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func (r *refusal) Unwrap() error { return ErrValidator }

// paramEnv binds `param` to the value under check over the other params.
type paramEnv struct {
	value any
	rest  sel.Env
}

func (e paramEnv) Lookup(name string) (any, bool) {
	if name == ParamName {
		return e.value, true
	}
	return e.rest.Lookup(name)
}

// annotationPattern matches one annotation and its arguments.
var annotationPattern = regexp.MustCompile(`^@([A-Za-z]+)\s*(?:\(([^()]*)\))?`)

// parseAnnotations reads a list of annotations.
func parseAnnotations(src string) ([]annotation, error) {
	rest := strings.TrimSpace(src)
	var out []annotation
	for rest != "" {
		m := annotationPattern.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("validator %q: expected an annotation such as @NotNull or @Min(1) at %q", src, rest)
		}
		a, err := newAnnotation(m[1], strings.TrimSpace(m[2]))
		if err != nil {
			return nil, fmt.Errorf("validator %q: %w", src, err)
		}
		out = append(out, a)
		rest = strings.TrimLeft(rest[len(m[0]):], " \t\n,")
	}
	return out, nil
}

// annotationArgs reads "a = 1, b = 2" or a single "1" (the value).
func annotationArgs(args string) (map[string]string, error) {
	out := map[string]string{}
	if args == "" {
		return out, nil
	}
	for _, part := range splitArgs(args) {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			k, v = "value", part
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			s, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("argument %s: %q is not a quoted string", k, v)
			}
			v = s
		}
		out[k] = v
	}
	return out, nil
}

// splitArgs splits on commas outside quotes.
func splitArgs(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func newAnnotation(name, rawArgs string) (annotation, error) {
	args, err := annotationArgs(rawArgs)
	if err != nil {
		return annotation{}, fmt.Errorf("@%s: %w", name, err)
	}
	num := func(key string) (float64, error) {
		v, ok := args[key]
		if !ok {
			return 0, fmt.Errorf("@%s needs %s", name, key)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("@%s: %s %q is not a number", name, key, v)
		}
		return f, nil
	}
	sign := func(ok func(float64) bool, want string) func(any) error {
		return func(v any) error {
			f, isNum := number(v)
			if !isNum {
				return fmt.Errorf("%v is not a number", v)
			}
			if !ok(f) {
				return fmt.Errorf("%v is not %s", v, want)
			}
			return nil
		}
	}
	a := annotation{name: "@" + name}
	switch name {
	case "NotNull":
		a.check = func(v any) error {
			if v == nil {
				return fmt.Errorf("the value is null")
			}
			return nil
		}
	case "NotEmpty":
		a.check = func(v any) error {
			if n, ok := size(v); !ok || n == 0 {
				return fmt.Errorf("the value is empty")
			}
			return nil
		}
	case "NotBlank":
		a.check = func(v any) error {
			s, ok := v.(string)
			if !ok || strings.TrimFunc(s, unicode.IsSpace) == "" {
				return fmt.Errorf("the value is blank")
			}
			return nil
		}
	case "Positive":
		a.check = sign(func(f float64) bool { return f > 0 }, "positive")
	case "PositiveOrZero":
		a.check = sign(func(f float64) bool { return f >= 0 }, "positive or zero")
	case "Negative":
		a.check = sign(func(f float64) bool { return f < 0 }, "negative")
	case "NegativeOrZero":
		a.check = sign(func(f float64) bool { return f <= 0 }, "negative or zero")
	case "Min", "Max":
		limit, err := num("value")
		if err != nil {
			return a, err
		}
		if name == "Min" {
			a.check = sign(func(f float64) bool { return f >= limit }, fmt.Sprintf("at least %v", limit))
		} else {
			a.check = sign(func(f float64) bool { return f <= limit }, fmt.Sprintf("at most %v", limit))
		}
	case "Size":
		lo, hi := 0.0, math.Inf(1)
		if _, ok := args["min"]; ok {
			if lo, err = num("min"); err != nil {
				return a, err
			}
		}
		if _, ok := args["max"]; ok {
			if hi, err = num("max"); err != nil {
				return a, err
			}
		}
		a.check = func(v any) error {
			n, ok := size(v)
			if !ok {
				return fmt.Errorf("%v has no size", v)
			}
			if float64(n) < lo || float64(n) > hi {
				return fmt.Errorf("size %d is not between %v and %v", n, lo, hi)
			}
			return nil
		}
	case "Pattern":
		re, err := regexp.Compile(`^(?:` + args["regexp"] + `)$`)
		if _, ok := args["regexp"]; !ok || err != nil {
			return a, fmt.Errorf("@Pattern needs a valid regexp argument")
		}
		a.check = func(v any) error {
			s, ok := v.(string)
			if !ok || !re.MatchString(s) {
				return fmt.Errorf("%v does not match %s", v, args["regexp"])
			}
			return nil
		}
	case "AssertTrue", "AssertFalse":
		want := name == "AssertTrue"
		a.check = func(v any) error {
			if b, ok := v.(bool); !ok || b != want {
				return fmt.Errorf("%v is not %t", v, want)
			}
			return nil
		}
	default:
		return a, fmt.Errorf("unknown annotation @%s", name)
	}
	return a, nil
}

// number reads a numeric param value.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// size is the length of a string (in characters), array or map value.
func size(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), true
	case []string:
		return len(x), true
	case []int64:
		return len(x), true
	case []float64:
		return len(x), true
	case []bool:
		return len(x), true
	case []any:
		return len(x), true
	case map[string]any:
		return len(x), true
	case map[string]string:
		return len(x), true
	}
	return 0, false
}
