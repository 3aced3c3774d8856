package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/client"
	"github.com/maestro-aws/maestro/engine/wire"
)

// backfillCmd is `maestro backfill start|get|list|pause|resume|cancel|retry`
// (docs/backfill.md).
func (a *app) backfillCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "backfill",
		Short: "Run a workflow over a range of dates (or values), and what it triggers downstream",
		Long: `A backfill runs a workflow once per value of a partition param (a date range or a
list), at most --concurrency at a time, skipping values that already have a SUCCEEDED
run of the version unless --rerun; with --downstream the workflows its runs' output
signals trigger are part of it. See docs/backfill.md.`,
	}
	c.AddCommand(a.backfillStartCmd(), a.backfillGetCmd(), a.backfillListCmd())
	for _, action := range []string{"pause", "resume", "cancel", "retry"} {
		c.AddCommand(a.backfillActionCmd(action))
	}
	return c
}

func (a *app) backfillStartCmd() *cobra.Command {
	var r client.BackfillRequest
	var watch bool
	var interval time.Duration
	c := &cobra.Command{
		Use:   "start WORKFLOW --param P --from A --to B | --table T --from-snapshot A --to-snapshot B",
		Short: "Start a backfill",
		Example: `  maestro backfill start daily --param TARGET_RUN_DATE --from 20240101 --to 20240331 --concurrency 4 --watch
  maestro backfill start hourly --param HOUR --from 2024010100 --to 2024010723 --interval 1h --downstream
  maestro backfill start regional --param REGION --values us,eu,ap
  maestro backfill start orders-incremental --table sales.orders --from-snapshot 0 --to-snapshot 8123456789 --snapshots-per-run 10
  maestro backfill start orders-incremental --table sales.orders --from 20240101 --to 20240131`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r.WorkflowID = args[0]
			cl, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			created, raw, err := cl.StartBackfill(cmd.Context(), r)
			if err != nil {
				return err
			}
			if !watch {
				if a.json() {
					return a.printJSON(raw)
				}
				word := "started"
				if created.Duplicated {
					word = "already started (same request id):"
				}
				a.printf("backfill %s %s: %d partitions of %s version %d\n", word, created.BackfillID, created.Partitions,
					created.WorkflowID, created.WorkflowVersion)
				return nil
			}
			if !a.json() {
				a.printf("backfill %s: %d partitions of %s version %d\n", created.BackfillID, created.Partitions,
					created.WorkflowID, created.WorkflowVersion)
			}
			return a.watchBackfill(cmd.Context(), cl, created.BackfillID, interval)
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	f := c.Flags()
	f.StringVar(&r.Param, "param", "", "the partition param (e.g. TARGET_RUN_DATE)")
	f.StringVar(&r.From, "from", "", "first value of the range (YYYYMMDD, YYYY-MM-DD, YYYYMMDDHH or an integer)")
	f.StringVar(&r.To, "to", "", "last value of the range, included")
	f.StringVar(&r.Interval, "interval", "", "step of the range: 1d (default), 7d, 1h...; an integer for LONG ranges")
	f.StringSliceVar(&r.Values, "values", nil, "explicit values instead of a range (comma-separated)")
	f.StringVar(&r.Format, "format", "", "format of the values (default: detected from --from)")
	f.IntVar(&r.Concurrency, "concurrency", 1, "most runs in flight")
	f.StringVar(&r.Order, "order", "oldest", "oldest or newest first")
	f.BoolVar(&r.Downstream, "downstream", false, "include the workflows the runs' output signals trigger")
	f.BoolVar(&r.Rerun, "rerun", false, "run values that already have a SUCCEEDED run of the version")
	f.StringVar(&r.Version, "version", "", "workflow version: active (default), latest or a number")
	f.StringVar(&r.RequestID, "request-id", "", "makes a repeated start return the same backfill")
	f.BoolVar(&watch, "watch", false, "show a progress bar of the partitions until the backfill ends")
	f.DurationVar(&interval, "interval-watch", time.Second, "how often --watch refreshes")
	var (
		inc              wire.BackfillIncremental
		fromSnap, toSnap int64
	)
	f.StringVar(&inc.Table, "table", "", "an incremental workflow's table: walk its snapshot ranges (--from/--to are then UTC days)")
	f.Int64Var(&fromSnap, "from-snapshot", 0, "with --table: the snapshot the range starts after (0: the table's beginning)")
	f.Int64Var(&toSnap, "to-snapshot", 0, "with --table: the last snapshot of the range")
	f.IntVar(&inc.SnapshotsPerRun, "snapshots-per-run", 0, "with --table: snapshots per run (default: one run)")
	f.BoolVar(&inc.ResetWatermark, "reset-watermark", false, "with --table: move the watermark to the range's end (docs/incremental.md)")
	c.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if inc.Table == "" {
			if r.Param == "" {
				return &ExitCodeError{Code: ExitUsage, Message: "maestro: --param is required (or --table for an incremental workflow)"}
			}
			return nil
		}
		if cmd.Flags().Changed("from-snapshot") {
			inc.FromSnapshotID = &fromSnap
		} else {
			inc.FromDate, r.From = r.From, ""
		}
		if cmd.Flags().Changed("to-snapshot") {
			inc.ToSnapshotID = &toSnap
		} else {
			inc.ToDate, r.To = r.To, ""
		}
		r.Incremental = &inc
		return nil
	}
	return c
}

func (a *app) backfillGetCmd() *cobra.Command {
	var watch bool
	var interval time.Duration
	c := &cobra.Command{
		Use:   "get BACKFILL_ID",
		Short: "Show a backfill: status, counts, partitions and downstream runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			if watch {
				return a.watchBackfill(cmd.Context(), cl, args[0], interval)
			}
			b, raw, err := cl.Backfill(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			a.printBackfill(b)
			return nil
		},
	}
	c.Flags().BoolVar(&watch, "watch", false, "show a progress bar until the backfill ends")
	c.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch refreshes")
	return c
}

func (a *app) backfillListCmd() *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:   "list WORKFLOW",
		Short: "List a workflow's backfills, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			l, raw, err := cl.Backfills(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			a.printf("%-36s  %-9s  %-10s  %10s  %s\n", "BACKFILL", "STATUS", "PARAM", "PARTITIONS", "RANGE")
			for _, b := range l.Backfills {
				a.printf("%-36s  %-9s  %-10s  %10d  %s\n", b.BackfillID, a.status(b.Status), b.Param, b.PartitionCount, rangeOf(&b))
			}
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().IntVar(&limit, "limit", 100, "most backfills to list")
	return c
}

func (a *app) backfillActionCmd(action string) *cobra.Command {
	short := map[string]string{
		"pause":  "Pause a backfill: no new partition starts; runs in flight go on",
		"resume": "Resume a paused backfill",
		"cancel": "Cancel a backfill: stop its runs in flight (and, with downstream, theirs)",
		"retry":  "Start a backfill's FAILED and STOPPED partitions again",
	}[action]
	return &cobra.Command{
		Use:   action + " BACKFILL_ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			b, raw, err := cl.ActOnBackfill(cmd.Context(), args[0], action)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			a.printf("backfill %s is %s\n", b.BackfillID, a.status(b.Status))
			return nil
		},
	}
}

func rangeOf(b *wire.Backfill) string {
	if len(b.Values) > 0 {
		s := strings.Join(b.Values, ",")
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return s
	}
	s := b.From + ".." + b.To
	if b.Interval != "" {
		s += " every " + b.Interval
	}
	return s
}

// partitionsDone counts the partitions that have ended, by the counts.
func partitionsDone(counts map[string]int) int {
	n := 0
	for _, s := range []string{"SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT", "SKIPPED", "CANCELLED"} {
		n += counts[s]
	}
	return n
}

func sortedCounts(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// progressLine is a backfill's one-line progress: a bar of the partitions
// ended, the counts, the downstream runs.
func progressLine(b *wire.Backfill) string {
	var counts map[string]int
	if b.Counts != nil {
		counts = *b.Counts
	}
	done := partitionsDone(counts)
	line := fmt.Sprintf("%s %s %d/%d  %s", b.Status, bar(int64(done), int64(b.PartitionCount), 30), done, b.PartitionCount,
		sortedCounts(counts))
	if b.Downstream != nil && len(*b.Downstream) > 0 {
		n := 0
		for _, d := range *b.Downstream {
			n += len(d.Runs)
		}
		line += fmt.Sprintf("  downstream: %d runs in %d workflows", n, len(*b.Downstream))
	}
	return line
}

func (a *app) printBackfill(b *wire.Backfill) {
	a.printf("backfill %s of %s version %d: %s\n", b.BackfillID, b.WorkflowID, b.WorkflowVersion, a.status(b.Status))
	a.printf("param %s (%s, %s) %s, concurrency %d, order %s, downstream %v, rerun %v\n", b.Param, b.ParamType, b.Format,
		rangeOf(b), b.Concurrency, b.Order, b.DownstreamEnabled, b.Rerun)
	a.printf("%s\n\n", progressLine(b))
	a.printf("%-12s  %-10s  %s\n", "VALUE", "INSTANCE", "STATUS")
	for _, p := range b.Partitions {
		iid := "-"
		if p.WorkflowInstanceID != nil {
			iid = fmt.Sprint(*p.WorkflowInstanceID)
		}
		a.printf("%-12s  %-10s  %s\n", p.Value, iid, a.status(p.Status))
	}
	if b.Downstream != nil && len(*b.Downstream) > 0 {
		ids := make([]string, 0, len(*b.Downstream))
		for id := range *b.Downstream {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		a.printf("\ndownstream:\n")
		for _, id := range ids {
			d := (*b.Downstream)[id]
			a.printf("  %s: %d runs (%s)\n", id, len(d.Runs), sortedCounts(d.Counts))
		}
	}
}

// watchBackfill redraws a backfill's progress until it ends; the exit code
// tells how it ended (0 SUCCEEDED, 10 FAILED, 12 CANCELLED).
func (a *app) watchBackfill(ctx context.Context, cl *client.Client, id string, interval time.Duration) error {
	last := ""
	for {
		b, raw, err := cl.Backfill(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return &ExitCodeError{Code: ExitError, Message: "maestro: watch interrupted"}
			}
			return err
		}
		line := progressLine(b)
		ended := b.Status == "SUCCEEDED" || b.Status == "FAILED" || b.Status == "CANCELLED"
		switch {
		case a.json():
		case a.tty():
			fmt.Fprintf(a.opts.Stdout, "\r\033[K%s", line)
			if ended {
				fmt.Fprintln(a.opts.Stdout)
			}
		case line != last:
			a.printf("%s\n", line)
		}
		last = line
		if ended {
			if a.json() {
				if err := a.printJSON(raw); err != nil {
					return err
				}
			}
			code := map[string]int{"SUCCEEDED": ExitOK, "FAILED": ExitFailed, "CANCELLED": ExitStopped}[b.Status]
			if code != ExitOK {
				return &ExitCodeError{Code: code}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return &ExitCodeError{Code: ExitError, Message: "maestro: watch interrupted"}
		case <-time.After(interval):
		}
	}
}
