package workflow

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidDefinition is matched by every *ValidationError through errors.Is, so transport
// adapters can map all definition problems to one status without inspecting them.
var ErrInvalidDefinition = errors.New("invalid workflow definition")

// Problem is one validation finding: the JSON path of the offending element and what is wrong
// with it. Path uses dots for object keys and [i] for array indices, for example
// "workflow.steps[2].step.transition.successors.job9"; a key that is not made of letters,
// digits, '_' and '-' is written as ["key"], e.g. `successors["job.5"]`. The root is "".
type Problem struct {
	Path    string `json:"field"`
	Message string `json:"message"`
}

// String renders the problem as "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError carries every problem found in a definition, sorted by path.
type ValidationError struct {
	Problems []Problem `json:"problems"`
}

// maxSummarized is how many problems Error() spells out before counting the rest.
const maxSummarized = 5

// Error summarises the problems in one line.
func (e *ValidationError) Error() string {
	if e == nil || len(e.Problems) == 0 {
		return ErrInvalidDefinition.Error()
	}
	var sb strings.Builder
	sb.WriteString(ErrInvalidDefinition.Error())
	if len(e.Problems) == 1 {
		sb.WriteString(": ")
	} else {
		fmt.Fprintf(&sb, " (%d problems): ", len(e.Problems))
	}
	for i, p := range e.Problems {
		if i == maxSummarized {
			fmt.Fprintf(&sb, "; and %d more", len(e.Problems)-maxSummarized)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p.String())
	}
	return sb.String()
}

// Is reports whether target is ErrInvalidDefinition.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidDefinition }

// problems collects findings while decoding or validating.
type problems struct {
	list []Problem
}

func (ps *problems) add(path, msg string) {
	ps.list = append(ps.list, Problem{Path: path, Message: msg})
}

func (ps *problems) addf(path, format string, args ...any) {
	ps.add(path, fmt.Sprintf(format, args...))
}

// err returns nil when nothing was found, else a *ValidationError with sorted problems.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	out := slices.Clone(ps.list)
	sortProblems(out)
	out = slices.Compact(out)
	return &ValidationError{Problems: out}
}

// sortProblems orders problems by path (array indices compared as numbers), then message.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if c := comparePaths(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
}

// comparePaths compares two paths segment-wise so that "steps[2]" sorts before "steps[10]".
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		ca, cb := a[0], b[0]
		if isDigit(ca) && isDigit(cb) {
			ea, eb := digitsEnd(a), digitsEnd(b)
			na, _ := strconv.Atoi(a[:ea])
			nb, _ := strconv.Atoi(b[:eb])
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[ea:], b[eb:]
			continue
		}
		if ca != cb {
			// A shorter segment sorts first: "a.b" before "a[0]" before "a_c".
			return int(pathRank(ca)) - int(pathRank(cb))
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func pathRank(c byte) int {
	switch c {
	case '.':
		return -2
	case '[':
		return -1
	}
	return int(c)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitsEnd(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// joinKey appends an object key to a path.
func joinKey(path, key string) string {
	if !isPlainKey(key) {
		return path + `[` + strconv.Quote(key) + `]`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends an array index to a path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isPlainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// loc is a JSON path rendered lazily: a child records only its parent and key or index, and the
// string is built when a problem is reported, so validating a large valid definition does not
// spend its time concatenating paths. A nil *loc is the document root.
type loc struct {
	parent  *loc
	key     string
	index   int
	isIndex bool
}

// rootLoc returns the top-level path key.
func rootLoc(key string) *loc { return &loc{key: key} }

func (l *loc) child(key string) *loc { return &loc{parent: l, key: key} }

func (l *loc) at(i int) *loc { return &loc{parent: l, index: i, isIndex: true} }

// String renders the path, e.g. workflow.steps[2].step.id.
func (l *loc) String() string { return string(l.appendTo(nil)) }

func (l *loc) appendTo(b []byte) []byte {
	if l == nil {
		return b
	}
	b = l.parent.appendTo(b)
	switch {
	case l.isIndex:
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(l.index), 10)
		return append(b, ']')
	case !isPlainKey(l.key):
		b = append(b, '[')
		b = strconv.AppendQuote(b, l.key)
		return append(b, ']')
	}
	if len(b) > 0 {
		b = append(b, '.')
	}
	return append(b, l.key...)
}

// report adds a problem at l.
func (ps *problems) report(l *loc, msg string) { ps.add(l.String(), msg) }

// reportf adds a formatted problem at l.
func (ps *problems) reportf(l *loc, format string, args ...any) {
	ps.add(l.String(), fmt.Sprintf(format, args...))
}
