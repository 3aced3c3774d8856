package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/client"
	"github.com/maestro-aws/maestro/engine/wire"
)

func (a *app) watchCmd() *cobra.Command {
	var run int64
	var interval time.Duration
	c := &cobra.Command{
		Use:   "watch WORKFLOW INSTANCE",
		Short: "Watch a run live until it ends; the exit code tells its final status",
		Long: `Watch a run live: each step's status and elapsed time, and for foreach and
subworkflow steps a progress bar of the leaf steps done. On a terminal the view is
redrawn in place; otherwise each change is printed as a line.

Exit codes: 0 SUCCEEDED, 10 FAILED, 11 TIMED_OUT, 12 STOPPED, 1 when the API
cannot be read, 2 for wrong arguments. With -o json the final run is printed as JSON.`,
		Example: "  maestro watch hello 1\n  maestro start hello && maestro watch hello 1 || echo failed",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, iid, err := a.instanceClient(cmd, args[1])
			if err != nil {
				return err
			}
			return a.watch(cmd.Context(), c, args[0], iid, run, interval)
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().Int64Var(&run, "run", 0, "run to watch (default: the latest, following restarts)")
	c.Flags().DurationVar(&interval, "interval", time.Second, "how often to refresh")
	return c
}

// exitCode maps a run's final status to the process exit code.
func exitCode(status string) int {
	switch status {
	case "SUCCEEDED":
		return ExitOK
	case "FAILED":
		return ExitFailed
	case "TIMED_OUT":
		return ExitTimedOut
	case "STOPPED":
		return ExitStopped
	}
	return ExitUnknown
}

// watch follows a run until it is terminal.
func (a *app) watch(ctx context.Context, c *client.Client, workflowID string, iid, run int64, interval time.Duration) error {
	if interval < 100*time.Millisecond {
		interval = 100 * time.Millisecond
	}
	seen := map[string]string{} // step → last status printed (line mode)
	lastRun := ""
	drawn := 0
	failures := 0
	for {
		r, steps, _, err := c.RunWithSteps(ctx, workflowID, iid, run)
		if err != nil {
			if ctx.Err() != nil {
				return &ExitCodeError{Code: ExitError, Message: "maestro: watch interrupted"}
			}
			// A run just started may not be readable for a moment; an API
			// that stays away ends the watch.
			if failures++; failures > 30 || client.IsNotFound(err) && failures > 5 {
				return err
			}
		} else {
			failures = 0
			sort.Slice(steps, func(i, j int) bool { return stepOrder(steps[i], steps[j]) })
			done := client.TerminalRun(r.Status)
			switch {
			case a.json():
			case a.tty():
				var buf bytes.Buffer
				sub := *a
				sub.opts.Stdout = &buf
				sub.printRun(r, steps, time.Now())
				if drawn > 0 {
					a.printf("\x1b[%dA\x1b[J", drawn)
				}
				_, _ = io.Copy(a.opts.Stdout, &buf)
				drawn = strings.Count(buf.String(), "\n")
			default:
				a.printChanges(r, steps, seen, &lastRun)
			}
			if done {
				if a.json() {
					if err := a.printJSON(r.Raw); err != nil {
						return err
					}
				} else if !a.tty() {
					a.printf("\n")
					a.printRun(r, steps, time.Now())
				}
				if code := exitCode(r.Status); code != ExitOK {
					return &ExitCodeError{Code: code}
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return &ExitCodeError{Code: ExitError, Message: "maestro: watch interrupted"}
		case <-time.After(interval):
		}
	}
}

// stepOrder orders steps by when they started, then by id.
func stepOrder(x, y *client.Step) bool {
	if !x.StartTime.Equal(y.StartTime.Time) {
		if x.StartTime.IsZero() || y.StartTime.IsZero() {
			return !x.StartTime.IsZero()
		}
		return x.StartTime.Before(y.StartTime.Time)
	}
	return x.StepID < y.StepID
}

// printChanges prints one line per run or step status change.
func (a *app) printChanges(r *client.Run, steps []*client.Step, seen map[string]string, lastRun *string) {
	ts := time.Now().Format("15:04:05")
	key := fmt.Sprintf("%d:%s", r.RunID, r.Status)
	if *lastRun != key {
		*lastRun = key
		a.printf("%s  %s instance %d run %d  %s\n", ts, r.WorkflowID, r.InstanceID, r.RunID, a.status(r.Status))
	}
	for _, s := range steps {
		k := fmt.Sprintf("%d:%d:%s", r.RunID, s.AttemptID, s.Status)
		if seen[s.StepID] == k {
			continue
		}
		seen[s.StepID] = k
		line := fmt.Sprintf("%s    step %-20s %s", ts, s.StepID, a.status(s.Status))
		if client.TerminalStep(s.Status) {
			line += "  " + elapsed(s.StartTime, s.EndTime, time.Now())
		}
		if s.AttemptID > 1 {
			line += fmt.Sprintf("  (attempt %d)", s.AttemptID)
		}
		a.printf("%s\n", line)
	}
	if r.Rollup != nil && r.Rollup.Total > int64(len(steps)) {
		k := fmt.Sprintf("rollup:%d", r.Rollup.Done())
		if seen["\x00rollup"] != k {
			seen["\x00rollup"] = k
			a.printf("%s    leaf steps %s %d/%d\n", ts, bar(r.Rollup.Done(), r.Rollup.Total, 30), r.Rollup.Done(), r.Rollup.Total)
		}
	}
}

func (a *app) timelineCmd() *cobra.Command {
	var run int64
	c := &cobra.Command{
		Use:     "timeline WORKFLOW INSTANCE",
		Short:   "Show a run's timeline: its own events and its steps', in time order",
		Example: "  maestro timeline hello 1\n  maestro timeline hello 1 --run 2",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, iid, err := a.instanceClient(cmd, args[1])
			if err != nil {
				return err
			}
			r, steps, _, err := c.RunWithSteps(cmd.Context(), args[0], iid, run)
			if err != nil {
				return err
			}
			type row struct {
				wire.TimelineEvent
				Source string `json:"source"`
			}
			var rows []row
			for _, e := range r.Timeline {
				rows = append(rows, row{e, "workflow"})
			}
			for _, s := range steps {
				for _, e := range s.Timeline {
					rows = append(rows, row{e, s.StepID})
				}
			}
			sort.SliceStable(rows, func(i, j int) bool { return rows[i].Timestamp < rows[j].Timestamp })
			if a.json() {
				return a.printValue(rows)
			}
			out := make([][]string, 0, len(rows))
			for _, e := range rows {
				what := client.EventText(e.TimelineEvent)
				if e.Status != "" && e.Type == "STATUS" {
					what = a.status(e.Status)
				}
				out = append(out, []string{time.UnixMilli(e.Timestamp).Local().Format("2006-01-02 15:04:05.000"), e.Source, e.Type, what})
			}
			return table(a.opts.Stdout, []string{"TIME", "SOURCE", "TYPE", "EVENT"}, out)
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().Int64Var(&run, "run", 0, "run of the instance (default: the latest)")
	return c
}
