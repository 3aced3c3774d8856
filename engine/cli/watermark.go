package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/wire"
)

// watermarkCmd is `maestro watermark get|reset` (docs/incremental.md).
func (a *app) watermarkCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "watermark",
		Short: "The watermarks of a workflow's incremental trigger and the ranges its runs covered",
		Long: `A signal trigger with "incremental": true keeps a watermark per table: the last snapshot a
SUCCEEDED run covered. Each run processes the snapshots after it (from exclusive, to inclusive).
See docs/incremental.md.`,
	}
	c.AddCommand(a.watermarkGetCmd(), a.watermarkResetCmd())
	return c
}

func (a *app) watermarkGetCmd() *cobra.Command {
	var (
		table string
		limit int
	)
	c := &cobra.Command{
		Use:     "get WORKFLOW",
		Short:   "Show the watermarks and the ranges of the latest runs",
		Example: "  maestro watermark get orders-incremental\n  maestro watermark get orders-incremental --table sales.orders --limit 50",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			w, raw, err := cl.Watermarks(cmd.Context(), args[0], table, limit)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			if len(w.Watermarks) == 0 {
				a.printf("%s has no watermark (no table change received)\n", w.WorkflowID)
				return nil
			}
			for _, m := range w.Watermarks {
				a.printf("%s  watermark %d (%s)  latest %d  pending %d  in flight: %s\n", m.Table, m.SnapshotID,
					millis(m.CommitTime), m.LatestSnapshotID, m.PendingChanges, inflight(m.InFlightInstanceID))
			}
			if len(w.Runs) > 0 {
				a.printf("\n%-8s %-20s %-22s %-22s %-5s %-9s %s\n", "RUN", "TABLE", "FROM (excl.)", "TO (incl.)", "SNAPS", "STATE", "FLAGS")
				for _, r := range w.Runs {
					a.printf("%-8d %-20s %-22d %-22d %-5d %-9s %s\n", r.WorkflowInstanceID, r.Table, r.FromSnapshotID,
						r.ToSnapshotID, r.SnapshotCount, r.State, flags(r))
				}
			}
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().StringVar(&table, "table", "", "only this table (namespace.table)")
	c.Flags().IntVar(&limit, "limit", 0, "how many runs' ranges (default 20)")
	return c
}

func (a *app) watermarkResetCmd() *cobra.Command {
	var (
		r          wire.WatermarkReset
		snapshot   int64
		commitTime int64
	)
	c := &cobra.Command{
		Use:   "reset WORKFLOW --table T --snapshot N",
		Short: "Move a table's watermark (0: the table's beginning); the changes after it run again",
		Example: "  maestro watermark reset orders-incremental --table sales.orders --snapshot 0\n" +
			"  maestro watermark reset orders-incremental --table sales.orders --snapshot 4611686018427387905",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r.Table == "" || !cmd.Flags().Changed("snapshot") {
				return &ExitCodeError{Code: ExitUsage, Message: "maestro: --table and --snapshot are required"}
			}
			r.SnapshotID = &snapshot
			if cmd.Flags().Changed("commit-time") {
				r.CommitTime = &commitTime
			}
			cl, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			m, raw, err := cl.ResetWatermark(cmd.Context(), args[0], r)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			a.printf("%s of %s: watermark %d (%s), latest %d, pending %d\n", m.Table, args[0], m.SnapshotID,
				millis(m.CommitTime), m.LatestSnapshotID, m.PendingChanges)
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().StringVar(&r.Table, "table", "", "the table (namespace.table, or catalog/namespace.table)")
	c.Flags().Int64Var(&snapshot, "snapshot", 0, "the snapshot id the watermark moves to (0: the table's beginning)")
	c.Flags().Int64Var(&commitTime, "commit-time", 0, "its commit time in epoch ms, for a snapshot no change announced")
	return c
}

func millis(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func inflight(id *int64) string {
	if id == nil {
		return "none"
	}
	return fmt.Sprintf("run %d", *id)
}

func flags(r wire.RunRange) string {
	s := ""
	if r.HasOverwrite {
		s += "overwrite "
	}
	if r.HasDelete {
		s += "delete"
	}
	return s
}
