package params

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// MaxBytes bounds the size, encoded as JSON, of one set of params: a run's
// params, a step attempt's params (its output params merged in), the
// output data an external job sets for an attempt. It is Maestro's
// JSONIFIED_PARAMS_STRING_SIZE_LIMIT. Evaluation counts every value against
// it as soon as it is known, so a SEL expression that builds a huge result
// out of shared strings (an array of 25,000 references to one 4 KB string
// is 100 MB of JSON) fails its param instead of costing the engine memory.
const MaxBytes = 750_000

// ErrTooLarge reports params over MaxBytes.
var ErrTooLarge = errors.New("params are larger than the limit")

// budget counts the encoded size of params as they are evaluated.
type budget struct {
	used, limit int
}

// add counts one param. It fails once the total is over the limit, and
// stops measuring there: measuring costs at most the limit, however large
// the value.
func (b *budget) add(name string, v Value) error {
	n := encodedSize(v.Value, b.limit-b.used) + len(name) + len(v.Type) + len(`"":{"type":"","value":},`)
	b.used += n
	if b.used > b.limit {
		return fmt.Errorf("%w: %s bytes encoded as JSON, more than %d", ErrTooLarge, atLeast(b.used, b.limit), b.limit)
	}
	return nil
}

func atLeast(n, limit int) string {
	if n > limit {
		return "over " + strconv.Itoa(limit)
	}
	return strconv.Itoa(n)
}

// Size returns the size of vals encoded as JSON (as json.Marshal writes
// them, within a few bytes), measuring no further than limit: a result
// over limit means "more than limit".
func Size(vals Values, limit int) int {
	b := budget{limit: limit}
	for name, v := range vals {
		if b.add(name, v) != nil {
			return b.used
		}
	}
	return b.used
}

// CheckSize reports ErrTooLarge when vals encode to more than MaxBytes.
func CheckSize(vals Values) error {
	b := budget{limit: MaxBytes}
	for name, v := range vals {
		if err := b.add(name, v); err != nil {
			return err
		}
	}
	return nil
}

// encodedSize is the JSON size of v, or any number above room once it
// exceeds room.
func encodedSize(v any, room int) int {
	switch x := v.(type) {
	case nil:
		return 4
	case string:
		return stringSize(x, room)
	case bool:
		return 5
	case int64:
		return len(strconv.FormatInt(x, 10))
	case int:
		return len(strconv.Itoa(x))
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return 6
		}
		return len(strconv.FormatFloat(x, 'g', -1, 64))
	case []string:
		return seqSize(len(x), room, func(i, r int) int { return stringSize(x[i], r) })
	case []int64:
		return seqSize(len(x), room, func(i, r int) int { return encodedSize(x[i], r) })
	case []float64:
		return seqSize(len(x), room, func(i, r int) int { return encodedSize(x[i], r) })
	case []bool:
		return seqSize(len(x), room, func(int, int) int { return 5 })
	case []any:
		return seqSize(len(x), room, func(i, r int) int { return encodedSize(x[i], r) })
	case map[string]string:
		return mapSize(x, room, stringSize)
	case map[string]any:
		return mapSize(x, room, encodedSize)
	}
	// Values of other types do not occur in evaluated params; count them
	// by their text.
	return len(fmt.Sprint(v)) + 2
}

// mapSize sums the sizes of a map's keys and values with their colons
// and commas, stopping once over room.
func mapSize[V any](m map[string]V, room int, elem func(V, int) int) int {
	n := 2
	for k, e := range m {
		n += stringSize(k, room-n) + 2
		n += elem(e, room-n)
		if n > room {
			return n
		}
	}
	return n
}

// seqSize sums the sizes of n elements with their commas, stopping once
// over room.
func seqSize(n, room int, elem func(i, room int) int) int {
	size := 2
	for i := range n {
		size += elem(i, room-size) + 1
		if size > room {
			return size
		}
	}
	return size
}

// stringSize is the size of s as a JSON string: quotes and escapes
// included, as encoding/json escapes (control characters, quote,
// backslash, <, >, &, U+2028, U+2029, invalid UTF-8).
func stringSize(s string, room int) int {
	if len(s)+2 > room {
		return len(s) + 2 // already over: escapes only add
	}
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += w
		}
		i += w
	}
	return n
}
