package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/maestro-aws/maestro/engine/client"
)

// ANSI colours of statuses (used only on a terminal).
const (
	green  = "\x1b[32m"
	red    = "\x1b[31m"
	yellow = "\x1b[33m"
	blue   = "\x1b[34m"
	grey   = "\x1b[90m"
	reset  = "\x1b[0m"
)

// statusColor is the colour a status is shown in.
func statusColor(status string) string {
	switch status {
	case "SUCCEEDED":
		return green
	case "FAILED", "USER_FAILED", "PLATFORM_FAILED", "FATALLY_FAILED", "INTERNALLY_FAILED", "TIMED_OUT", "TIMEOUT_FAILED", "COMPLETED_WITH_ERROR":
		return red
	case "STOPPED", "SKIPPED", "DISABLED", "UNSATISFIED", "NOT_CREATED":
		return grey
	case "PAUSED", "WAITING_FOR_SIGNALS", "WAITING_FOR_PERMITS", "CREATED":
		return yellow
	}
	return blue
}

// status formats a status, coloured on a terminal.
func (a *app) status(s string) string {
	if !a.color || s == "" {
		return s
	}
	return statusColor(s) + s + reset
}

// table writes rows aligned in columns.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// when formats a time for a table ("" when unset).
func when(t client.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// elapsed is the time from start to end, or to now while running.
func elapsed(start, end client.Time, now time.Time) string {
	if start.IsZero() {
		return "-"
	}
	e := now
	if !end.IsZero() {
		e = end.Time
	}
	return duration(e.Sub(start.Time))
}

// duration formats d compactly: 850ms, 12s, 3m04s, 2h05m.
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// bar draws a progress bar of done out of total, width characters wide.
func bar(done, total int64, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat(" ", width) + "]"
	}
	n := int(done * int64(width) / total)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func ptrVersion(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
