package schedule

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

func loc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fires returns the first n fire times of expr after from, formatted in the
// schedule's zone.
func fires(t *testing.T, expr string, l *time.Location, from time.Time, n int) []string {
	t.Helper()
	s, err := ParseCron(expr, l)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	var out []string
	for range n {
		from = s.Next(from)
		if from.IsZero() {
			break
		}
		out = append(out, from.In(l).Format("2006-01-02 15:04 MST Mon"))
	}
	return out
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// Maestro's own expectations (TriggerHelperTest): its sample cron and
// predefined triggers, next fire time after the epoch.
func TestMaestroNextExecutionDates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tr   Trigger
		want int64
	}{
		{Trigger{Kind: KindCron, Cron: "0 0 12 1/1 * ? *", Timezone: "US/Pacific"}, 72000},
		{Trigger{Kind: KindPredefined, Expression: "@daily", Timezone: "US/Pacific"}, 28800},
	}
	for _, c := range cases {
		comp, err := Compile(c.tr)
		if err != nil {
			t.Fatal(err)
		}
		if got := comp.Next(time.Unix(0, 0)).Unix(); got != c.want {
			t.Errorf("%+v: next after the epoch = %d, want %d", c.tr, got, c.want)
		}
	}
}

// Every trigger shape in Maestro's samples and fixtures is accepted as it
// is (our own copies of the shapes: sample-time-trigger-wf.json, the
// time_triggers fixtures and sample-active-wf-with-time-triggers.json).
func TestMaestroFixtureShapesCompile(t *testing.T) {
	t.Parallel()
	for _, tr := range []Trigger{
		{Kind: KindCron, Cron: "0 0 12 1/1 * ? *", Timezone: "US/Pacific"},
		{Kind: KindPredefined, Expression: "@daily", Timezone: "Asia/Tokyo"},
		{Kind: KindCron, Cron: "*/2 * * * *", Timezone: "US/Pacific", FuzzyMaxDelay: 30 * time.Second, FuzzyText: `"30s"`},
		{Kind: KindCron, Cron: "0 0 13 1 * ? *", Timezone: "UTC", FuzzyMaxDelay: 4320 * time.Second, FuzzyText: "4320"},
		{Kind: KindCron, Cron: "0 0 14 1 * ? *", Timezone: "UTC", FuzzyMaxDelay: 2 * time.Minute, FuzzyText: `"2 mins"`},
		{Kind: KindPredefined, Expression: "@hourly", Timezone: "US/Pacific", FuzzyMaxDelay: 76140 * time.Second, FuzzyText: "76140"},
		{Kind: KindPredefined, Expression: "@daily", Timezone: "US/Pacific", FuzzyMaxDelay: 125 * time.Minute, FuzzyText: `"2 hours, 5 mins"`},
		{Kind: KindInterval, Interval: "3H", Every: 3 * time.Hour, Start: "2021-03-26 16:00:18.089PST"},
	} {
		if _, err := Compile(tr); err != nil {
			t.Errorf("%+v: %v", tr, err)
		}
	}
}

func TestCronForms(t *testing.T) {
	t.Parallel()
	utc := time.UTC
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, utc)
	cases := []struct {
		expr string
		want []string
	}{
		// Quartz numbers the days 1 (SUN) to 7 (SAT); Unix 0 (or 7) to 6.
		{"0 0 9 ? * 2", []string{"2024-01-01 09:00 UTC Mon", "2024-01-08 09:00 UTC Mon"}},
		{"0 0 9 ? * 1", []string{"2024-01-07 09:00 UTC Sun", "2024-01-14 09:00 UTC Sun"}},
		{"0 9 * * 1", []string{"2024-01-01 09:00 UTC Mon", "2024-01-08 09:00 UTC Mon"}},
		{"0 9 * * 7", []string{"2024-01-07 09:00 UTC Sun", "2024-01-14 09:00 UTC Sun"}},
		{"0 9 * * 5-7", []string{"2024-01-05 09:00 UTC Fri", "2024-01-06 09:00 UTC Sat", "2024-01-07 09:00 UTC Sun", "2024-01-12 09:00 UTC Fri"}},
		{"0 0 9 ? * 6-7", []string{"2024-01-05 09:00 UTC Fri", "2024-01-06 09:00 UTC Sat", "2024-01-12 09:00 UTC Fri"}},
		{"0 0 9 ? * MON-WED", []string{"2024-01-01 09:00 UTC Mon", "2024-01-02 09:00 UTC Tue", "2024-01-03 09:00 UTC Wed", "2024-01-08 09:00 UTC Mon"}},
		{"0 0 9 ? * */2", []string{"2024-01-02 09:00 UTC Tue", "2024-01-04 09:00 UTC Thu", "2024-01-06 09:00 UTC Sat", "2024-01-07 09:00 UTC Sun"}},
		{"0 0 9 ? * 2/2", []string{"2024-01-01 09:00 UTC Mon", "2024-01-03 09:00 UTC Wed", "2024-01-05 09:00 UTC Fri", "2024-01-08 09:00 UTC Mon"}},
		{"0 0 12 1/1 * ? *", []string{"2024-01-01 12:00 UTC Mon", "2024-01-02 12:00 UTC Tue"}},
		{"0 0 12 * * *", []string{"2024-01-01 12:00 UTC Mon", "2024-01-02 12:00 UTC Tue"}},
		{"30 0 12 * * ?", []string{"2024-01-01 12:00 UTC Mon", "2024-01-02 12:00 UTC Tue"}},
		// Unix: both day fields restricted means either.
		{"0 0 13 * 5", []string{"2024-01-05 00:00 UTC Fri", "2024-01-12 00:00 UTC Fri", "2024-01-13 00:00 UTC Sat", "2024-01-19 00:00 UTC Fri"}},
		// L, W and #.
		{"0 0 0 L * ?", []string{"2024-01-31 00:00 UTC Wed", "2024-02-29 00:00 UTC Thu", "2024-03-31 00:00 UTC Sun"}},
		{"0 0 0 L-2 * ?", []string{"2024-01-29 00:00 UTC Mon", "2024-02-27 00:00 UTC Tue", "2024-03-29 00:00 UTC Fri"}},
		{"0 0 0 LW * ?", []string{"2024-01-31 00:00 UTC Wed", "2024-02-29 00:00 UTC Thu", "2024-03-29 00:00 UTC Fri"}},
		{"0 0 0 15W 6,9 ?", []string{"2024-06-14 00:00 UTC Fri", "2024-09-16 00:00 UTC Mon", "2025-06-16 00:00 UTC Mon"}},
		{"0 0 0 1W 6 ?", []string{"2024-06-03 00:00 UTC Mon", "2025-06-02 00:00 UTC Mon"}},
		{"0 0 0 31W 8 ?", []string{"2024-08-30 00:00 UTC Fri", "2025-08-29 00:00 UTC Fri"}},
		{"0 0 0 ? * 6L", []string{"2024-01-26 00:00 UTC Fri", "2024-02-23 00:00 UTC Fri", "2024-03-29 00:00 UTC Fri"}},
		{"0 0 0 ? * FRIL", []string{"2024-01-26 00:00 UTC Fri", "2024-02-23 00:00 UTC Fri"}},
		{"0 0 0 ? * 6#3", []string{"2024-01-19 00:00 UTC Fri", "2024-02-16 00:00 UTC Fri", "2024-03-15 00:00 UTC Fri"}},
		{"0 0 0 ? * MON#5", []string{"2024-01-29 00:00 UTC Mon", "2024-04-29 00:00 UTC Mon", "2024-07-29 00:00 UTC Mon"}},
		{"0 0 0 ? * L", []string{"2024-01-06 00:00 UTC Sat", "2024-01-13 00:00 UTC Sat"}},
		// The year.
		{"0 0 12 1 1 ? 2030", []string{"2030-01-01 12:00 UTC Tue"}},
		{"0 0 12 1 1 ? 2025-2026", []string{"2025-01-01 12:00 UTC Wed", "2026-01-01 12:00 UTC Thu"}},
		{"0 0 12 1 1 ? 2024/3", []string{"2024-01-01 12:00 UTC Mon", "2027-01-01 12:00 UTC Fri", "2030-01-01 12:00 UTC Tue"}},
		{"0 0 12 L 2 ? 2025,2028", []string{"2025-02-28 12:00 UTC Fri", "2028-02-29 12:00 UTC Tue"}},
		{"0 0 12 * * ? 2020", nil},
		// Descriptors.
		{"@midnight", []string{"2024-01-02 00:00 UTC Tue"}},
		{"@weekly", []string{"2024-01-07 00:00 UTC Sun"}},
	}
	for _, c := range cases {
		eq(t, c.expr, fires(t, c.expr, utc, from, max(len(c.want), 1)), c.want)
	}
	// A schedule whose years are over never fires again.
	if got := fires(t, "0 0 12 1 1 ? 2030", utc, from, 3); len(got) != 1 {
		t.Errorf("a single-year cron fired %v", got)
	}
}

// What cannot be honoured is refused, naming the cron field.
func TestCronRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, part, msg string }{
		{"61 * * * *", fieldMinute, "above maximum"},
		// Maestro's sample-invalid-cron-wf-def.json.
		{"0 30 * * *", fieldHour, "above maximum"},
		{"0 0 25 * * ?", fieldHour, "above maximum"},
		{"0 ? 12 * * ?", fieldMinute, "only in the day fields"},
		{"0 0 12 ? * ?", fieldDow, "cannot both be '?'"},
		{"0 0 12 1 * MON", fieldDow, "needs '?'"},
		{"0 0 12 ? * 6#6", fieldDow, "must be 1 to 5"},
		{"0 0 12 ? * 8", fieldDow, "1 (SUN) to 7 (SAT)"},
		{"0 12 * * 8", fieldDow, "0 (SUN) to 6 (SAT)"},
		{"0 0 12 32W * ?", fieldDom, "1 to 31"},
		{"0 0 12 L,15 * ?", fieldDom, "lists or steps"},
		{"0 0 12 L * MON", fieldDow, "needs '?'"},
		{"0 12 L * MON", fieldDom, "other day field"},
		{"0 0 12 * * ? 1969", fieldYear, "1970-2099"},
		{"0 0 12 * * ? 20x4", fieldYear, "not a year"},
		{"0 0 12 * JUNE ?", fieldMonth, ""},
	}
	for _, c := range cases {
		_, err := ParseCron(c.expr, time.UTC)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Part != c.part || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%q: got %v (part %q), want the %s field refused with %q", c.expr, err, partOf(fe), c.part, c.msg)
		}
	}
	for _, expr := range []string{"", "* * * *", "@every 5m", "@reboot", "1 2 3 4 5 6 7 8"} {
		if _, err := ParseCron(expr, time.UTC); err == nil {
			t.Errorf("%q was accepted", expr)
		}
	}
}

func partOf(fe *FieldError) string {
	if fe == nil {
		return ""
	}
	return fe.Part
}

func TestMinimumInterval(t *testing.T) {
	t.Parallel()
	for expr, ok := range map[string]bool{"* * * * *": true, "0/30 * * * * ?": false, "0,30 0 12 * * ?": false, "*/2 * * * *": true} {
		_, err := Compile(Trigger{Kind: KindCron, Cron: expr})
		if (err == nil) != ok {
			t.Errorf("%q: err = %v, want accepted %v", expr, err, ok)
		}
	}
	if _, err := Compile(Trigger{Kind: KindInterval, Interval: "30s", Every: 30 * time.Second}); err == nil {
		t.Error("a 30 s interval was accepted")
	}
}

// Daylight-saving changes in the trigger's zone, as Vixie cron handles
// them: a fixed-time job in the skipped hour fires once right after the
// change; one in the repeated hour fires once; wildcard jobs keep their
// spacing in real time.
func TestDaylightSaving(t *testing.T) {
	t.Parallel()
	la := loc(t, "US/Pacific")
	// 2024-03-10 02:00 PST -> 03:00 PDT; 2024-11-03 02:00 PDT -> 01:00 PST.
	spring := time.Date(2024, 3, 9, 0, 0, 0, 0, la)
	fall := time.Date(2024, 11, 2, 0, 0, 0, 0, la)
	eq(t, "daily 02:30 across the skipped hour", fires(t, "30 2 * * *", la, spring, 3),
		[]string{"2024-03-09 02:30 PST Sat", "2024-03-10 03:00 PDT Sun", "2024-03-11 02:30 PDT Mon"})
	eq(t, "Quartz daily 02:30 across the skipped hour", fires(t, "0 30 2 ? * *", la, spring, 3),
		[]string{"2024-03-09 02:30 PST Sat", "2024-03-10 03:00 PDT Sun", "2024-03-11 02:30 PDT Mon"})
	eq(t, "daily 01:30 across the repeated hour", fires(t, "30 1 * * *", la, fall, 3),
		[]string{"2024-11-02 01:30 PDT Sat", "2024-11-03 01:30 PDT Sun", "2024-11-04 01:30 PST Mon"})
	eq(t, "daily 02:00 on the day clocks go back", fires(t, "0 2 * * *", la, fall, 3),
		[]string{"2024-11-02 02:00 PDT Sat", "2024-11-03 02:00 PST Sun", "2024-11-04 02:00 PST Mon"})
	eq(t, "every 30 minutes across the repeated hour", fires(t, "*/30 * * * *", la, time.Date(2024, 11, 3, 0, 10, 0, 0, la), 6),
		[]string{"2024-11-03 00:30 PDT Sun", "2024-11-03 01:00 PDT Sun", "2024-11-03 01:30 PDT Sun",
			"2024-11-03 01:00 PST Sun", "2024-11-03 01:30 PST Sun", "2024-11-03 02:00 PST Sun"})
	eq(t, "hourly across the skipped hour", fires(t, "@hourly", la, time.Date(2024, 3, 10, 0, 30, 0, 0, la), 3),
		[]string{"2024-03-10 01:00 PST Sun", "2024-03-10 03:00 PDT Sun", "2024-03-10 04:00 PDT Sun"})
	london := loc(t, "Europe/London")
	eq(t, "London 01:30 when clocks go forward at 01:00", fires(t, "30 1 * * *", london, time.Date(2024, 3, 30, 12, 0, 0, 0, london), 2),
		[]string{"2024-03-31 02:00 BST Sun", "2024-04-01 01:30 BST Mon"})
	// Day rules and the rule together: the last day of March 2024 is the
	// day London skips 01:00-02:00.
	eq(t, "London L at 01:15", fires(t, "0 15 1 L * ?", london, time.Date(2024, 3, 1, 0, 0, 0, 0, london), 2),
		[]string{"2024-03-31 02:00 BST Sun", "2024-04-30 01:15 BST Tue"})
}

func TestInterval(t *testing.T) {
	t.Parallel()
	c, err := Compile(Trigger{Kind: KindInterval, Interval: "3H", Every: 3 * time.Hour, Start: "2021-03-26 16:00:18.089PST"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2021, 3, 27, 0, 0, 18, 89e6, time.UTC) // 16:00:18.089 PST
	if got := c.Next(time.Unix(0, 0)); !got.Equal(start) {
		t.Errorf("first fire %v, want %v", got, start)
	}
	if got := c.Next(start); !got.Equal(start.Add(3 * time.Hour)) {
		t.Errorf("second fire %v", got)
	}
	if got := c.Next(start.Add(7 * time.Hour)); !got.Equal(start.Add(9 * time.Hour)) {
		t.Errorf("fire after 7h: %v", got)
	}
	e, _ := Compile(Trigger{Kind: KindInterval, Interval: "1 hour", Every: time.Hour})
	if got := e.Next(time.Date(2024, 5, 5, 10, 20, 0, 0, time.UTC)); !got.Equal(time.Date(2024, 5, 5, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("an interval without start is aligned to the epoch: %v", got)
	}
	if got := e.Next(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)); !got.IsZero() {
		t.Errorf("an interval 8,000 years after its start fires at %v", got)
	}
	for _, s := range []string{"2021-03-26T16:00:18-08:00", "1616803218089", "03-26-2021 16:00:18.089PST"} {
		if _, err := ParseStart(s); err != nil {
			t.Errorf("start %q: %v", s, err)
		}
	}
	if _, err := ParseStart("2021-03-26 16:00:18XYZ"); err == nil {
		t.Error("an unknown zone abbreviation was accepted")
	}
}

// java.util.Random and UUID.nameUUIDFromBytes, against values printed by a
// JVM: the fuzzy delay and the uuids must be Maestro's.
func TestJavaCompatibility(t *testing.T) {
	t.Parallel()
	if got := newJavaRandom(42).next(32); got != -1170105035 {
		t.Errorf("Random(42).nextInt() = %d", got)
	}
	for _, c := range []struct {
		seed        int64
		bound, want int32
	}{{42, 100, 30}, {-123456789012345, 4320, 1444}, {7, 64, 46}} {
		if got := newJavaRandom(c.seed).nextInt(c.bound); got != c.want {
			t.Errorf("Random(%d).nextInt(%d) = %d, want %d", c.seed, c.bound, got, c.want)
		}
	}
	u := NameUUID("CronTimeTrigger(cron=0 0 12 1/1 * ? *, timezone=US/Pacific)wf1")
	if u.String() != "40d2f2fd-a72e-3fda-95e2-1c8b71b5e3cd" || int64(binary.BigEndian.Uint64(u[8:])) != -7646517832087903283 {
		t.Errorf("nameUUIDFromBytes = %s", u)
	}
	c, err := Compile(Trigger{Kind: KindCron, Cron: "0 0 12 1/1 * ? *", Timezone: "US/Pacific", FuzzyMaxDelay: 2 * time.Minute, FuzzyText: `"2 mins"`})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Compile(Trigger{Kind: KindCron, Cron: "0 0 12 1/1 * ? *", Timezone: "US/Pacific"})
	if plain.Key() != "CronTimeTrigger(cron=0 0 12 1/1 * ? *, timezone=US/Pacific)" {
		t.Errorf("key %q", plain.Key())
	}
	if c.Key() != `CronTimeTrigger(cron=0 0 12 1/1 * ? *, timezone=US/Pacific, fuzzyMaxDelay="2 mins")` {
		t.Errorf("key %q", c.Key())
	}
	// The delay of the plain key with a 120 s bound for wf1, as the JVM has it.
	plain.FuzzyMaxDelay = 2 * time.Minute
	if got := plain.Delay("wf1"); got != 82*time.Second {
		t.Errorf("delay %v, want 82s", got)
	}
	if d := c.Delay("wf1"); d < 0 || d >= 2*time.Minute || d != c.Delay("wf1") || d%time.Second != 0 {
		t.Errorf("delay %v is not a stable whole number of seconds below the bound", d)
	}
	pre, _ := Compile(Trigger{Kind: KindPredefined, Expression: "@daily", Timezone: "Asia/Tokyo"})
	if pre.Key() != "PredefinedTimeTrigger(expression=DAILY, timezone=Asia/Tokyo)" {
		t.Errorf("key %q", pre.Key())
	}
	set := SetUUID([]string{plain.Key(), pre.Key(), `CronTimeTrigger(cron=*/2 * * * *, timezone=US/Pacific, fuzzyMaxDelay="30s")`})
	if set != "a6017fdf-d8c8-3243-8011-b8062afb0f6a" {
		t.Errorf("set uuid %s", set)
	}
	if got := RequestID("sample-time-trigger-wf", plain.Key(), time.Unix(1700000000, 0)); got != "fe116953-3bdb-3b39-8c07-e2cc3404acdd" {
		t.Errorf("request id %s", got)
	}
}

func TestPreviewIncludesTheDelay(t *testing.T) {
	t.Parallel()
	c, err := Compile(Trigger{Kind: KindCron, Cron: "0 * * * *", FuzzyMaxDelay: 10 * time.Minute, FuzzyText: `"10 min"`})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Delay("wf")
	got := c.Preview("wf", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), 3)
	for i, g := range got {
		want := time.Date(2024, 1, 1, i, 0, 0, 0, time.UTC).Add(d) // d > 0 for this key
		if d == 0 {
			want = time.Date(2024, 1, 1, i+1, 0, 0, 0, time.UTC)
		}
		if !g.Equal(want) {
			t.Errorf("fire %d = %v, want %v (delay %v)", i, g, want, d)
		}
	}
}
