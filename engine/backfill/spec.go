package backfill

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// The formats of partition values.
const (
	FormatDate     = "YYYYMMDD"   // 20240131, as Maestro writes run dates
	FormatDashDate = "YYYY-MM-DD" // 2024-01-31
	FormatHour     = "YYYYMMDDHH" // 2024013113
	FormatLong     = "LONG"       // an integer range: from, to, interval N
	FormatString   = "STRING"     // values only
)

// The orders of partitions.
const (
	OrderOldest = "oldest"
	OrderNewest = "newest"
)

// MaxPartitions is the most partitions one backfill may have.
const MaxPartitions = 100_000

// ErrInvalid is a backfill request that cannot be run; its message says
// what is wrong.
var ErrInvalid = errors.New("invalid backfill")

// Spec is the partition part of a backfill request: a range (From, To,
// Interval) or a list (Values), in the order Order.
type Spec struct {
	From     string   `json:"from,omitempty"`
	To       string   `json:"to,omitempty"`
	Interval string   `json:"interval,omitempty"`
	Values   []string `json:"values,omitempty"`
	// Format is the values' format; "" detects it from From (or the first
	// value).
	Format string `json:"format,omitempty"`
	Order  string `json:"order,omitempty"`
	// Incremental, when set, makes the backfill walk ranges of table
	// snapshots (IncrementalSpec) instead of values.
	Incremental *IncrementalSpec `json:"incremental,omitempty"`
}

var (
	dateRE     = regexp.MustCompile(`^\d{8}$`)
	dashDateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	hourRE     = regexp.MustCompile(`^\d{10}$`)
	longRE     = regexp.MustCompile(`^-?\d{1,18}$`)
)

var layouts = map[string]string{FormatDate: "20060102", FormatDashDate: "2006-01-02", FormatHour: "2006010215"}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// DetectFormat is the format of a value written as v: a date or hour when
// it parses as one, else LONG for an integer, else STRING.
func DetectFormat(v string) string {
	for _, f := range []string{FormatDate, FormatDashDate, FormatHour} {
		if matchesFormat(f, v) {
			if _, err := time.Parse(layouts[f], v); err == nil {
				return f
			}
		}
	}
	if longRE.MatchString(v) {
		return FormatLong
	}
	return FormatString
}

func matchesFormat(f, v string) bool {
	switch f {
	case FormatDate:
		return dateRE.MatchString(v)
	case FormatDashDate:
		return dashDateRE.MatchString(v)
	case FormatHour:
		return hourRE.MatchString(v)
	case FormatLong:
		return longRE.MatchString(v)
	case FormatString:
		return true
	}
	return false
}

// Expand checks s and returns its format and its partition values in
// order. Ranges are inclusive of both ends.
func (s Spec) Expand() (string, []string, error) {
	order := s.Order
	if order == "" {
		order = OrderOldest
	}
	if order != OrderOldest && order != OrderNewest {
		return "", nil, invalid("order must be %q or %q, not %q", OrderOldest, OrderNewest, s.Order)
	}
	hasRange := s.From != "" || s.To != "" || s.Interval != ""
	switch {
	case hasRange && len(s.Values) > 0:
		return "", nil, invalid("give either from/to (and interval) or values, not both")
	case !hasRange && len(s.Values) == 0:
		return "", nil, invalid("give from and to (and interval), or values")
	}
	format := s.Format
	if format == "" {
		first := s.From
		if !hasRange {
			first = s.Values[0]
		}
		format = DetectFormat(first)
	}
	if _, ok := layouts[format]; !ok && format != FormatLong && format != FormatString {
		return "", nil, invalid("format must be one of YYYYMMDD, YYYY-MM-DD, YYYYMMDDHH, LONG, STRING, not %q", format)
	}
	var values []string
	var err error
	if hasRange {
		values, err = expandRange(format, s.From, s.To, s.Interval)
	} else {
		values, err = checkValues(format, s.Values)
	}
	if err != nil {
		return "", nil, err
	}
	if order == OrderNewest {
		for i, j := 0, len(values)-1; i < j; i, j = i+1, j-1 {
			values[i], values[j] = values[j], values[i]
		}
	}
	return format, values, nil
}

func checkValues(format string, in []string) ([]string, error) {
	if len(in) > MaxPartitions {
		return nil, invalid("%d values is more than the %d partitions a backfill may have", len(in), MaxPartitions)
	}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, v := range in {
		if err := checkValue(format, v); err != nil {
			return nil, err
		}
		if seen[v] {
			return nil, invalid("value %q is given twice", v)
		}
		seen[v] = true
		out = append(out, v)
	}
	return out, nil
}

func checkValue(format, v string) error {
	if v == "" || len(v) > 256 {
		return invalid("a value must be 1 to 256 characters")
	}
	if !matchesFormat(format, v) {
		return invalid("value %q is not in format %s", v, format)
	}
	if layout, ok := layouts[format]; ok {
		if _, err := time.Parse(layout, v); err != nil {
			return invalid("value %q is not a valid %s", v, format)
		}
	}
	if format == FormatLong {
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return invalid("value %q is not a LONG", v)
		}
	}
	return nil
}

// parseInterval reads an interval: Nd or Nh for dates and hours (default
// 1d, or 1h for YYYYMMDDHH), a positive integer N for LONG.
func parseInterval(format, s string) (days, hours int, n int64, err error) {
	if format == FormatLong {
		if s == "" {
			return 0, 0, 1, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, 0, invalid("interval of a LONG range must be a positive integer, not %q", s)
		}
		return 0, 0, n, nil
	}
	if s == "" {
		if format == FormatHour {
			return 0, 1, 0, nil
		}
		return 1, 0, 0, nil
	}
	unit := s[len(s)-1]
	num, err := strconv.Atoi(strings.TrimSuffix(s[:len(s)-1], ""))
	if err != nil || num <= 0 || num > 100_000 {
		return 0, 0, 0, invalid("interval must be like 1d, 7d or 1h, not %q", s)
	}
	switch {
	case unit == 'd':
		return num, 0, 0, nil
	case unit == 'h' && format == FormatHour:
		return 0, num, 0, nil
	case unit == 'h':
		return 0, 0, 0, invalid("an interval in hours needs YYYYMMDDHH values, not %s", format)
	}
	return 0, 0, 0, invalid("interval must be like 1d, 7d or 1h, not %q", s)
}

func expandRange(format, from, to, interval string) ([]string, error) {
	if from == "" || to == "" {
		return nil, invalid("a range needs both from and to")
	}
	if format == FormatString {
		return nil, invalid("a STRING param takes values, not a range")
	}
	for _, v := range []string{from, to} {
		if err := checkValue(format, v); err != nil {
			return nil, err
		}
	}
	days, hours, step, err := parseInterval(format, interval)
	if err != nil {
		return nil, err
	}
	var out []string
	if format == FormatLong {
		a, _ := strconv.ParseInt(from, 10, 64)
		b, _ := strconv.ParseInt(to, 10, 64)
		if a > b {
			return nil, invalid("from %s is after to %s", from, to)
		}
		if (b-a)/step >= MaxPartitions {
			return nil, invalid("the range has more than the %d partitions a backfill may have", MaxPartitions)
		}
		for v := a; v <= b; v += step {
			out = append(out, strconv.FormatInt(v, 10))
			if v > b-step { // no overflow past b
				break
			}
		}
		return out, nil
	}
	layout := layouts[format]
	a, _ := time.Parse(layout, from)
	b, _ := time.Parse(layout, to)
	if a.After(b) {
		return nil, invalid("from %s is after to %s", from, to)
	}
	for t := a; !t.After(b); t = t.AddDate(0, 0, days).Add(time.Duration(hours) * time.Hour) {
		if len(out) == MaxPartitions {
			return nil, invalid("the range has more than the %d partitions a backfill may have", MaxPartitions)
		}
		out = append(out, t.Format(layout))
	}
	return out, nil
}

// ParamValue is a partition's value as its run receives it: a LONG param
// as a number, anything else as a string.
func ParamValue(paramType workflow.ParamType, value string) (workflow.Param, error) {
	if paramType == workflow.ParamTypeLong {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return workflow.Param{}, invalid("value %q of a LONG param is not an integer", value)
		}
		return workflow.LiteralParam(workflow.ParamTypeLong, n), nil
	}
	return workflow.LiteralParam(workflow.ParamTypeString, value), nil
}

// ParamType is the type of the partition param: the workflow's when it
// defines the param (LONG or STRING only), else LONG for LONG values and
// STRING for the others (Maestro's default TARGET_RUN_DATE is a STRING
// yyyyMMdd).
func ParamType(wf *workflow.Workflow, param, format string) (workflow.ParamType, error) {
	if p, ok := wf.Params[param]; ok {
		switch p.Type {
		case workflow.ParamTypeLong:
			if format == FormatDashDate || format == FormatString {
				return "", invalid("param %s is LONG; its values cannot be %s", param, format)
			}
			return p.Type, nil
		case workflow.ParamTypeString:
			return p.Type, nil
		}
		return "", invalid("param %s is %s; a backfill partitions on a LONG or STRING param", param, p.Type)
	}
	if format == FormatLong {
		return workflow.ParamTypeLong, nil
	}
	return workflow.ParamTypeString, nil
}
