package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// The cron dialects, told apart by the number of fields as Maestro does
// (it parses as Unix first and falls back to Quartz).
type dialect int

const (
	// unix: minute hour day-of-month month day-of-week; day-of-week 0-7,
	// 0 and 7 are Sunday.
	unix dialect = iota
	// quartz: second minute hour day-of-month month day-of-week [year];
	// day-of-week 1-7 is Sunday to Saturday.
	quartz
)

// Field names, as errors report them.
const (
	fieldSecond = "second"
	fieldMinute = "minute"
	fieldHour   = "hour"
	fieldDom    = "day-of-month"
	fieldMonth  = "month"
	fieldDow    = "day-of-week"
	fieldYear   = "year"
)

// descriptors are the nicknames a cron expression may be, as Maestro's
// cron parser accepts them.
var descriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var specParser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseCron parses a cron expression in loc: Unix (5 fields) or Quartz (6
// fields, or 7 with a year), or a descriptor such as @daily. A *FieldError
// names the cron field that cannot be honoured.
func ParseCron(expr string, loc *time.Location) (Schedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, &FieldError{Msg: "cron expression is required"}
	}
	if strings.HasPrefix(expr, "@") {
		spec, ok := descriptors[strings.ToLower(expr)]
		if !ok {
			return nil, &FieldError{Msg: fmt.Sprintf("unknown descriptor %q; expected @yearly, @monthly, @weekly, @daily, @midnight or @hourly (use an INTERVAL trigger for @every)", expr)}
		}
		expr = spec
	}
	fields := strings.Fields(expr)
	var c cronFields
	switch len(fields) {
	case 5:
		c = cronFields{d: unix, sec: "0", min: fields[0], hour: fields[1], dom: fields[2], month: fields[3], dow: fields[4], year: "*"}
	case 6, 7:
		c = cronFields{d: quartz, sec: fields[0], min: fields[1], hour: fields[2], dom: fields[3], month: fields[4], dow: fields[5], year: "*"}
		if len(fields) == 7 {
			c.year = fields[6]
		}
	default:
		return nil, &FieldError{Msg: fmt.Sprintf("expected 5 fields (Unix: minute hour day-of-month month day-of-week) "+
			"or 6 to 7 (Quartz: second minute hour day-of-month month day-of-week [year]), found %d", len(fields))}
	}
	return c.compile(loc)
}

// cronFields is a cron expression split into its fields.
type cronFields struct {
	d                                     dialect
	sec, min, hour, dom, month, dow, year string
	// domRule and dowRule match days robfig cannot ('L', 'W', '#').
	domRule, dowRule func(y int, m time.Month, d int) bool
	years            []bool // indexed by year - minYear; nil: any year
	domStar, dowStar bool
	// robfigDom and robfigDow are the day fields as robfig reads them.
	robfigDom, robfigDow string
	fixedTime            bool
}

func (c *cronFields) compile(loc *time.Location) (Schedule, error) {
	for _, f := range []struct{ name, v string }{{fieldSecond, c.sec}, {fieldMinute, c.min}, {fieldHour, c.hour}, {fieldMonth, c.month}} {
		if strings.ContainsAny(f.v, "?#") {
			return nil, &FieldError{Part: f.name, Value: f.v, Msg: "'?', 'L', 'W' and '#' are allowed only in the day fields"}
		}
	}
	if err := c.parseDom(); err != nil {
		return nil, err
	}
	if err := c.parseDow(); err != nil {
		return nil, err
	}
	if err := c.parseYear(); err != nil {
		return nil, err
	}
	if c.d == quartz {
		qDom, qDow := c.dom == "?", c.dow == "?"
		switch {
		case qDom && qDow:
			return nil, &FieldError{Part: fieldDow, Msg: "day-of-month and day-of-week cannot both be '?'"}
		case !qDom && !qDow && !c.domStar && !c.dowStar:
			return nil, &FieldError{Part: fieldDow, Msg: fmt.Sprintf(
				"a Quartz cron needs '?' in day-of-month or day-of-week, found %q and %q", c.dom, c.dow)}
		}
	}
	if (c.domRule != nil && !c.dowStar) || (c.dowRule != nil && !c.domStar) {
		part := fieldDom
		if c.dowRule != nil {
			part = fieldDow
		}
		return nil, &FieldError{Part: part, Msg: fmt.Sprintf(
			"%q and %q: 'L', 'W' and '#' need the other day field to be '*' or '?'", c.dom, c.dow)}
	}
	spec := strings.Join([]string{c.sec, c.min, c.hour, c.robfigDom, c.month, c.robfigDow}, " ")
	parsed, err := specParser.Parse(spec)
	if err != nil {
		return nil, c.locate(err)
	}
	base := parsed.(*cron.SpecSchedule)
	// Vixie cron's rule for daylight-saving changes applies to jobs at a
	// particular time: neither the minute nor the hour is a wildcard.
	c.fixedTime = !strings.HasPrefix(c.min, "*") && !strings.HasPrefix(c.hour, "*")
	build := func(l *time.Location) Schedule {
		s := *base
		s.Location = l
		var out Schedule = &s
		if c.domRule != nil || c.dowRule != nil || c.years != nil {
			day := c.domRule
			if day == nil {
				day = c.dowRule
			}
			out = &filtered{inner: &s, loc: l, day: day, years: c.years}
		}
		return out
	}
	sched := build(loc)
	if !c.fixedTime || loc == time.UTC {
		return sched, nil
	}
	return &dstRule{inner: sched, wall: build(time.UTC), loc: loc}, nil
}

// locate names the field robfig refused: each field is parsed on its own
// with the others at their defaults.
func (c *cronFields) locate(err error) error {
	parts := []struct{ name, v string }{{fieldSecond, c.sec}, {fieldMinute, c.min}, {fieldHour, c.hour},
		{fieldDom, c.robfigDom}, {fieldMonth, c.month}, {fieldDow, c.robfigDow}}
	for i, p := range parts {
		probe := []string{"0", "0", "0", "*", "*", "*"}
		probe[i] = p.v
		if _, perr := specParser.Parse(strings.Join(probe, " ")); perr != nil {
			shown := p.v
			switch p.name {
			case fieldDom:
				shown = c.dom
			case fieldDow:
				shown = c.dow
			}
			return &FieldError{Part: p.name, Value: shown, Msg: perr.Error()}
		}
	}
	return &FieldError{Msg: err.Error()}
}

// parseDom handles '?', 'L', 'L-n', 'LW' and 'nW'; other forms go to robfig.
func (c *cronFields) parseDom() error {
	v := strings.ToUpper(c.dom)
	c.robfigDom, c.domStar = c.dom, v == "*" || v == "?"
	if !strings.ContainsAny(v, "LW") {
		return nil
	}
	bad := func(msg string) error { return &FieldError{Part: fieldDom, Value: c.dom, Msg: msg} }
	if strings.ContainsAny(v, ",/") {
		return bad("'L' and 'W' cannot be combined with lists or steps")
	}
	c.robfigDom = "*"
	switch {
	case v == "L":
		c.domRule = func(y int, m time.Month, d int) bool { return d == daysIn(y, m) }
	case v == "LW":
		c.domRule = func(y int, m time.Month, d int) bool { return d == lastWeekday(y, m) }
	case strings.HasPrefix(v, "L-"):
		n, err := strconv.Atoi(v[2:])
		if err != nil || n < 0 || n > 30 {
			return bad("the offset after 'L-' must be 0 to 30")
		}
		c.domRule = func(y int, m time.Month, d int) bool { return d == max(daysIn(y, m)-n, 1) }
	case strings.HasSuffix(v, "W"):
		n, err := strconv.Atoi(v[:len(v)-1])
		if err != nil || n < 1 || n > 31 {
			return bad("the day before 'W' must be 1 to 31")
		}
		c.domRule = func(y int, m time.Month, d int) bool { return d == nearestWeekday(y, m, n) }
	default:
		return bad("expected L, L-n, LW or nW")
	}
	return nil
}

var dayNames = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// weekday reads a day of the week (a name or the dialect's number) as
// time.Weekday numbering; for Unix 7 is Sunday.
func (c *cronFields) weekday(s string) (int, error) {
	if d, ok := dayNames[strings.ToUpper(s)]; ok {
		return d, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a day of the week", s)
	}
	if c.d == quartz {
		if n < 1 || n > 7 {
			return 0, fmt.Errorf("%d is out of range: Quartz numbers the days 1 (SUN) to 7 (SAT)", n)
		}
		return n - 1, nil
	}
	if n < 0 || n > 7 {
		return 0, fmt.Errorf("%d is out of range: Unix cron numbers the days 0 (SUN) to 6 (SAT), 7 is SUN too", n)
	}
	return n % 7, nil
}

// parseDow reads the day of week into robfig's numbering (0-6, Sunday 0),
// and handles 'L' (Quartz: Saturday), 'nL' (the last such day of the month)
// and 'n#k' (the k-th such day of the month).
func (c *cronFields) parseDow() error {
	v := strings.ToUpper(c.dow)
	bad := func(msg string) error { return &FieldError{Part: fieldDow, Value: c.dow, Msg: msg} }
	c.robfigDow, c.dowStar = c.dow, v == "*" || v == "?"
	if c.dowStar {
		return nil
	}
	switch {
	case strings.Contains(v, "#"):
		if strings.ContainsAny(v, ",/-") {
			return bad("'#' cannot be combined with lists, ranges or steps")
		}
		day, nth, _ := strings.Cut(v, "#")
		wd, err := c.weekday(day)
		if err != nil {
			return bad(err.Error())
		}
		k, err := strconv.Atoi(nth)
		if err != nil || k < 1 || k > 5 {
			return bad("the occurrence after '#' must be 1 to 5")
		}
		c.robfigDow = "*"
		c.dowRule = func(y int, m time.Month, d int) bool {
			return int(time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday()) == wd && (d-1)/7+1 == k
		}
		return nil
	case v == "L" && c.d == quartz:
		c.robfigDow = "6" // Quartz: 'L' alone is the last day of the week, Saturday
		return nil
	case strings.HasSuffix(v, "L"):
		if strings.ContainsAny(v, ",/-") {
			return bad("'L' cannot be combined with lists, ranges or steps")
		}
		wd, err := c.weekday(v[:len(v)-1])
		if err != nil {
			return bad(err.Error())
		}
		c.robfigDow = "*"
		c.dowRule = func(y int, m time.Month, d int) bool {
			return int(time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday()) == wd && d+7 > daysIn(y, m)
		}
		return nil
	}
	days, err := c.dowSet(v)
	if err != nil {
		return bad(err.Error())
	}
	list := make([]string, 0, 7)
	for d := range 7 {
		if days[d] {
			list = append(list, strconv.Itoa(d))
		}
	}
	c.robfigDow = strings.Join(list, ",")
	return nil
}

// dowSet expands a day-of-week list of values, ranges and steps.
func (c *cronFields) dowSet(v string) ([7]bool, error) {
	var days [7]bool
	lo, hi := 0, 7 // the dialect's numbering
	if c.d == quartz {
		lo, hi = 1, 7
	}
	for _, item := range strings.Split(v, ",") {
		rng, step, hasStep, err := splitStep(item)
		if err != nil {
			return days, err
		}
		var from, to int
		switch {
		case rng == "*":
			from, to = lo, hi
		default:
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if from, err = c.dialectDay(a); err != nil {
				return days, err
			}
			to = from
			if isRange {
				if to, err = c.dialectDay(b); err != nil {
					return days, err
				}
			} else if hasStep {
				to = hi
			}
		}
		if from > to {
			return days, fmt.Errorf("range %q runs backwards", rng)
		}
		for n := from; n <= to; n += step {
			wd, err := c.weekday(strconv.Itoa(n))
			if err != nil {
				return days, err
			}
			days[wd] = true
		}
	}
	return days, nil
}

// splitStep splits a list item into its range and its step (1 without
// one).
func splitStep(item string) (rng string, step int, hasStep bool, err error) {
	rng, stepText, hasStep := strings.Cut(item, "/")
	if !hasStep {
		return rng, 1, false, nil
	}
	if step, err = strconv.Atoi(stepText); err != nil || step < 1 {
		return "", 0, true, fmt.Errorf("step %q must be a positive number", stepText)
	}
	return rng, step, true, nil
}

// dialectDay reads a name or number in the dialect's own numbering.
func (c *cronFields) dialectDay(s string) (int, error) {
	wd, err := c.weekday(s)
	if err != nil {
		return 0, err
	}
	if _, isName := dayNames[strings.ToUpper(s)]; isName && c.d == quartz {
		return wd + 1, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	return wd, nil
}

// Years Quartz accepts.
const (
	minYear = 1970
	maxYear = 2099
)

// parseYear reads the Quartz year field: '*', years, ranges, lists and
// steps within 1970-2099.
func (c *cronFields) parseYear() error {
	v := c.year
	if v == "*" || v == "?" {
		return nil
	}
	bad := func(msg string) error { return &FieldError{Part: fieldYear, Value: c.year, Msg: msg} }
	years := make([]bool, maxYear-minYear+1)
	for _, item := range strings.Split(v, ",") {
		rng, step, hasStep, err := splitStep(item)
		if err != nil {
			return bad(err.Error())
		}
		from, to := minYear, maxYear
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if from, err = strconv.Atoi(a); err != nil {
				return bad(fmt.Sprintf("%q is not a year", a))
			}
			to = from
			if isRange {
				if to, err = strconv.Atoi(b); err != nil {
					return bad(fmt.Sprintf("%q is not a year", b))
				}
			} else if hasStep {
				to = maxYear
			}
		}
		if from < minYear || to > maxYear || from > to {
			return bad(fmt.Sprintf("years must lie within %d-%d, in order", minYear, maxYear))
		}
		for y := from; y <= to; y += step {
			years[y-minYear] = true
		}
	}
	c.years = years
	return nil
}

func daysIn(y int, m time.Month) int { return time.Date(y, m+1, 0, 12, 0, 0, 0, time.UTC).Day() }

// lastWeekday is the last Monday-to-Friday day of the month.
func lastWeekday(y int, m time.Month) int {
	d := daysIn(y, m)
	switch time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		return d - 1
	case time.Sunday:
		return d - 2
	}
	return d
}

// nearestWeekday is Quartz's 'nW': the weekday nearest day n, without
// leaving the month (n beyond the month's length means its last day).
func nearestWeekday(y int, m time.Month, n int) int {
	last := daysIn(y, m)
	n = min(n, last)
	switch time.Date(y, m, n, 12, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		if n == 1 {
			return 3 // Monday the 3rd
		}
		return n - 1
	case time.Sunday:
		if n == last {
			return n - 2 // Friday
		}
		return n + 1
	}
	return n
}
