package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrNeedsParams is returned when a value refers to parameters and can only be resolved at
// run time.
var ErrNeedsParams = errors.New("value refers to parameters and is resolved at run time")

// Duration is a timeout or a delay. In JSON it is either a number of whole seconds or a string
// holding a duration ("100s", "2h", "1d 3h", "30min", "500ms"), a number of seconds ("90"), or
// a parameter reference resolved at run time ("${timeout}s", "$t").
type Duration struct {
	Seconds int64  // used when the value is a JSON number
	Text    string // used when the value is a JSON string
	isText  bool
}

// Seconds returns a Duration written as a number of seconds.
func Seconds(s int64) Duration { return Duration{Seconds: s} }

// DurationText returns a Duration written as a string.
func DurationText(s string) Duration { return Duration{Text: s, isText: true} }

// IsText reports whether the duration is written as a string.
func (d Duration) IsText() bool { return d.isText || d.Text != "" }

// HasParams reports whether the duration refers to parameters.
func (d Duration) HasParams() bool { return d.IsText() && strings.Contains(d.Text, "$") }

// Resolve returns the duration, or ErrNeedsParams when it refers to parameters.
func (d Duration) Resolve() (time.Duration, error) {
	if !d.IsText() {
		// A number beyond the longest duration would wrap around.
		if d.Seconds > int64(maxDuration/time.Second) || d.Seconds < -int64(maxDuration/time.Second) {
			return 0, fmt.Errorf("%d seconds is out of range", d.Seconds)
		}
		return time.Duration(d.Seconds) * time.Second, nil
	}
	if d.HasParams() {
		return 0, ErrNeedsParams
	}
	return ParseDuration(d.Text)
}

// MarshalJSON writes a number or a string, as the duration was given.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.IsText() {
		return appendJSONString(nil, d.Text), nil
	}
	return strconv.AppendInt(nil, d.Seconds, 10), nil
}

// UnmarshalJSON reads a number of seconds or a string.
func (d *Duration) UnmarshalJSON(data []byte) error { return decodeStrict(data, d, "") }

func (d *Duration) bindNode(b *binder, n *node, path string) {
	switch n.kind {
	case kindString:
		*d = DurationText(n.text)
	case kindNumber:
		if i, ok := b.integer(n, path); ok {
			*d = Seconds(i)
		}
	default:
		b.addf(path, "expected a number of seconds or a duration string, got %s%s", n.kind, n.pos())
	}
}

// durationUnits maps accepted unit spellings to their length.
var durationUnits = map[string]time.Duration{
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"ms": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
}

// ParseDuration parses a Maestro duration string: a plain number of seconds ("90") or a
// sequence of <number><unit> parts ("1d 2h", "2h30min", "100s", "500ms"); units are d, h, min
// (or m), s, ms and their long forms, case-insensitive.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty duration")
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n > int64(maxDuration/time.Second) || n < 0 {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	var total time.Duration
	rest := strings.ToLower(t)
	for rest != "" {
		rest = strings.TrimLeft(rest, " ,")
		if rest == "" {
			break
		}
		end := digitsEnd(rest)
		if end == 0 {
			return 0, fmt.Errorf("invalid duration %q: expected a number at %q", s, rest)
		}
		n, err := strconv.ParseInt(rest[:end], 10, 64)
		if err != nil || n > int64(maxDuration/time.Hour) {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		rest = strings.TrimLeft(rest[end:], " ")
		u := 0
		for u < len(rest) && rest[u] >= 'a' && rest[u] <= 'z' {
			u++
		}
		unit, ok := durationUnits[rest[:u]]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q (use d, h, min, s or ms)", s, rest[:u])
		}
		total += time.Duration(n) * unit
		if total > maxDuration {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		rest = rest[u:]
	}
	return total, nil
}

// maxDuration bounds parsed durations well below overflow.
const maxDuration = 100 * 365 * 24 * time.Hour

// ParsableLong is a non-negative integer written as a JSON number, or a string holding the
// number or a parameter reference resolved at run time ("$retries", "${retries}").
type ParsableLong struct {
	Value  int64  // used when the value is a JSON number
	Text   string // used when the value is a JSON string
	isText bool
}

// Long returns a ParsableLong written as a number.
func Long(v int64) ParsableLong { return ParsableLong{Value: v} }

// LongText returns a ParsableLong written as a string.
func LongText(s string) ParsableLong { return ParsableLong{Text: s, isText: true} }

// IsText reports whether the value is written as a string.
func (p ParsableLong) IsText() bool { return p.isText || p.Text != "" }

// HasParams reports whether the value refers to parameters.
func (p ParsableLong) HasParams() bool { return p.IsText() && strings.Contains(p.Text, "$") }

// Resolve returns the number, or ErrNeedsParams when it refers to parameters.
func (p ParsableLong) Resolve() (int64, error) {
	if !p.IsText() {
		return p.Value, nil
	}
	if p.HasParams() {
		return 0, ErrNeedsParams
	}
	n, err := strconv.ParseInt(strings.TrimSpace(p.Text), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer or a parameter reference", p.Text)
	}
	return n, nil
}

// ResolveSeconds is Resolve for a number of seconds, which may also be
// written as a duration ("1 min 40 s", "5mins", "2hours"), as Maestro's
// retry backoff fields may.
func (p ParsableLong) ResolveSeconds() (int64, error) {
	n, err := p.Resolve()
	if err == nil || errors.Is(err, ErrNeedsParams) {
		return n, err
	}
	d, derr := ParseDuration(p.Text)
	if derr != nil {
		return 0, fmt.Errorf("%q is not a number of seconds, a duration or a parameter reference", p.Text)
	}
	return int64(d / time.Second), nil
}

// MarshalJSON writes a number or a string, as the value was given.
func (p ParsableLong) MarshalJSON() ([]byte, error) {
	if p.IsText() {
		return appendJSONString(nil, p.Text), nil
	}
	return strconv.AppendInt(nil, p.Value, 10), nil
}

// UnmarshalJSON reads a number or a string.
func (p *ParsableLong) UnmarshalJSON(data []byte) error { return decodeStrict(data, p, "") }

func (p *ParsableLong) bindNode(b *binder, n *node, path string) {
	switch n.kind {
	case kindString:
		*p = LongText(n.text)
	case kindNumber:
		if i, ok := b.integer(n, path); ok {
			*p = Long(i)
		}
	default:
		b.addf(path, "expected an integer or a string, got %s%s", n.kind, n.pos())
	}
}

var (
	_ json.Marshaler = Duration{}
	_ json.Marshaler = ParsableLong{}
)
