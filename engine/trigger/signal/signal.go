// Package signal stores signal instances and matches step signal
// dependencies against them (docs/signals.md).
//
// A signal is a named message with indexed params (LONG or STRING values)
// and a free-form payload. A step whose definition lists
// signal_dependencies may start only once, for every dependency, a stored
// signal of that name has params satisfying each of its match params.
package signal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// ErrInvalid reports a signal the API must refuse as malformed.
var ErrInvalid = errors.New("invalid signal")

// ErrNotFound reports a signal instance that does not exist.
var ErrNotFound = errors.New("signal instance not found")

// Limits on what one announcement may carry: Maestro's name length, and
// bounds of our own on the rest (Maestro caps only its request size).
const (
	MaxNameLength      = 256
	MaxRequestIDLength = 256
	MaxParams          = 64
	// MaxParamNameLength is Maestro's id length limit.
	MaxParamNameLength = 128
	// MaxSizeBytes bounds the params and payload together, encoded as
	// JSON: a signal is read by every step and trigger matching its name.
	MaxSizeBytes = 64 << 10
)

// Signal is one stored signal instance. Its JSON is the API's signal
// instance (built here only).
type Signal struct {
	// Seq orders the signals (Maestro's seq_id); it grows across names.
	Seq  int64  `json:"seq_id"`
	Name string `json:"name"`
	// InstanceID is Maestro's signal instance id: the request id, or a
	// uuid of the name and params (Request.InstanceID).
	InstanceID  string         `json:"instance_id"`
	Params      map[string]any `json:"params"`
	Payload     map[string]any `json:"payload"`
	RequestID   string         `json:"request_id,omitempty"`
	RequestTime time.Time      `json:"request_time"`
	CreateTime  time.Time      `json:"create_time"`
}

// Request announces a signal. A second request with the same name and
// instance id (InstanceID: the request id, or else the name and params) is
// the same signal: a duplicate, stored once.
type Request struct {
	Name      string
	Params    map[string]any
	Payload   map[string]any
	RequestID string
	// RequestTime is when the signal was announced at its source (an S3
	// event's time, the client's request_time); zero is now.
	RequestTime time.Time
}

// Check validates a request and normalises its params: every value must be
// a string or an integer (json.Number, int64, or a float64 holding one),
// stored as a string or an int64.
func (r *Request) Check() error {
	var problems []string
	switch {
	case strings.TrimSpace(r.Name) == "":
		problems = append(problems, "name is required")
	case len(r.Name) > MaxNameLength:
		problems = append(problems, fmt.Sprintf("name is longer than %d bytes", MaxNameLength))
	case !utf8.ValidString(r.Name) || strings.ContainsRune(r.Name, 0):
		problems = append(problems, "name is not valid UTF-8 or contains a NUL byte")
	}
	if len(r.RequestID) > MaxRequestIDLength {
		problems = append(problems, fmt.Sprintf("request_id is longer than %d bytes", MaxRequestIDLength))
	}
	if strings.ContainsRune(r.RequestID, utf8.RuneError) {
		// Lone surrogate escapes all decode to U+FFFD: two different ids
		// would be one.
		problems = append(problems, "request_id contains U+FFFD (or a lone surrogate escape, which decodes to it)")
	}
	if len(r.Params) > MaxParams {
		problems = append(problems, fmt.Sprintf("more than %d params", MaxParams))
	}
	for k, v := range r.Params {
		if k == "" || len(k) > MaxParamNameLength {
			problems = append(problems, fmt.Sprintf("params: a param name must be 1 to %d bytes long, got %d", MaxParamNameLength, len(k)))
			continue
		}
		n, err := paramValue(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("params.%s: %v", k, err))
			continue
		}
		r.Params[k] = n
	}
	if len(problems) == 0 {
		size, err := json.Marshal(struct {
			P map[string]any `json:"params"`
			L map[string]any `json:"payload"`
		}{r.Params, r.Payload})
		switch {
		case err != nil:
			problems = append(problems, "params or payload cannot be encoded: "+err.Error())
		case len(size) > MaxSizeBytes:
			problems = append(problems, fmt.Sprintf("params and payload are %d bytes encoded as JSON; the limit is %d", len(size), MaxSizeBytes))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// paramValue turns a decoded param value into a string or an int64.
func paramValue(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return nil, fmt.Errorf("%s is not a 64-bit integer; signal params are STRING or LONG", x)
		}
		return n, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return nil, fmt.Errorf("%v is not an integer; signal params are STRING or LONG", x)
		}
		return int64(x), nil
	}
	return nil, fmt.Errorf("expected a string or an integer, got %T; signal params are STRING or LONG", v)
}

// Match is one evaluated match param of a dependency: the signal's param
// Param compared by Operator with Value (an int64 or a string).
type Match struct {
	Param    string                  `json:"param"`
	Operator workflow.SignalOperator `json:"operator"`
	Value    any                     `json:"value"`
}

// Dependency is an evaluated signal dependency: the signal name (params
// interpolated) and its match params.
type Dependency struct {
	Name    string  `json:"name"`
	Matches []Match `json:"match_params,omitempty"`
}

// Satisfied reports whether a signal's params satisfy every match of d
// (the name is the caller's business).
func (d Dependency) Satisfied(params map[string]any) bool {
	for _, m := range d.Matches {
		have, ok := params[m.Param]
		if !ok || !m.holds(have) {
			return false
		}
	}
	return true
}

// holds compares a signal's value with the wanted one. A LONG wanted value
// compares numerically with an integer, or a string holding one; a STRING
// wanted value compares as text (byte order, so ISO dates order by time)
// with a string, or an integer written in decimal. Anything else does not
// match.
func (m Match) holds(have any) bool {
	var c int
	switch want := m.Value.(type) {
	case int64:
		got, ok := asInt(have)
		if !ok {
			return false
		}
		c = cmpInt(got, want)
	case string:
		got, ok := asString(have)
		if !ok {
			return false
		}
		c = strings.Compare(got, want)
	default:
		return false
	}
	switch m.Operator {
	case workflow.SignalEquals:
		return c == 0
	case workflow.SignalGreater:
		return c > 0
	case workflow.SignalGreaterEquals:
		return c >= 0
	case workflow.SignalLess:
		return c < 0
	case workflow.SignalLessEquals:
		return c <= 0
	}
	return false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func asString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return x.String(), true
		}
	}
	return "", false
}

// WaitKey names the step attempt that waits.
type WaitKey struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	AttemptID  int64
}

// Waiter is a step attempt waiting for a signal, with the flow group that
// owns its run.
type Waiter struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	Group      int32
	// Names are the signal names the attempt waits for.
	Names []string
}

// CheckResult is what a step's dependency check found.
type CheckResult struct {
	// Since is when the attempt began waiting (its first check).
	Since time.Time
	// BypassedBy is set when a user bypassed the dependencies.
	BypassedBy string
	// Matched holds, per dependency in order, the newest signal that
	// satisfies it; nil where none does.
	Matched []*Signal
	// Met is true when every dependency is satisfied.
	Met bool
}

// StaticMatches turns a signal trigger entry's match params (static values,
// a string or an integer) into Matches, sorted by param.
func StaticMatches(ms map[string]workflow.SignalMatch) ([]Match, error) {
	out := make([]Match, 0, len(ms))
	for k, m := range ms {
		v, err := paramValue(m.Value)
		if err != nil {
			return nil, fmt.Errorf("match param %s: %w", k, err)
		}
		out = append(out, Match{Param: k, Operator: m.Operator, Value: v})
	}
	slices.SortFunc(out, func(a, b Match) int { return strings.Compare(a.Param, b.Param) })
	return out, nil
}
