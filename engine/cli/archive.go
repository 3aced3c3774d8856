package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
)

// archiveCmd is `maestro archive`: runs the retention archiver moved out
// of the database (docs/operations.md, "Retention and archival").
func (a *app) archiveCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "archive",
		Short: "Read runs the retention archiver moved to the archive",
	}
	c.AddCommand(a.archiveGetCmd())
	return c
}

func (a *app) archiveGetCmd() *cobra.Command {
	var run int64
	c := &cobra.Command{
		Use:     "get WORKFLOW INSTANCE",
		Short:   "Show an archived run with its steps (the latest archived run of the instance, or --run)",
		Example: "  maestro archive get hello 1\n  maestro archive get hello 1 --run 2 -o json",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			iid, err := instanceArg(args[1])
			if err != nil {
				return err
			}
			if run < 0 {
				return fmt.Errorf("--run must be positive, got %d", run)
			}
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			raw, err := c.ArchivedRun(cmd.Context(), args[0], iid, run)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			return a.printArchived(raw)
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().Int64Var(&run, "run", 0, "run of the instance (default: the latest archived run)")
	return c
}

// archivedRecord is the part of an archive record the table shows.
type archivedRecord struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"workflow_instance_id"`
	RunID      int64  `json:"workflow_run_id"`
	ArchiveKey string `json:"archive_key"`
	ArchivedAt int64  `json:"archived_at"`
	Run        struct {
		Status     string     `json:"status"`
		StartTime  *time.Time `json:"start_time"`
		EndTime    *time.Time `json:"end_time"`
		Version    int64      `json:"workflow_version"`
		UUID       string     `json:"uuid"`
		CreateTime time.Time  `json:"create_time"`
	} `json:"run"`
	Steps []struct {
		StepID    string     `json:"step_id"`
		AttemptID int64      `json:"attempt_id"`
		StepType  string     `json:"step_type"`
		Status    string     `json:"status"`
		StartTime *time.Time `json:"start_time"`
		EndTime   *time.Time `json:"end_time"`
	} `json:"steps"`
	Lineage []json.RawMessage `json:"signal_lineage"`
}

func (a *app) printArchived(raw json.RawMessage) error {
	var r archivedRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("decode the archived run: %w", err)
	}
	a.printf("workflow %s instance %d run %d (ARCHIVED)\n", r.WorkflowID, r.InstanceID, r.RunID)
	a.printf("  status:      %s\n  version:     %d\n  uuid:        %s\n", r.Run.Status, r.Run.Version, r.Run.UUID)
	a.printf("  created:     %s\n  started:     %s\n  ended:       %s\n", stamp(&r.Run.CreateTime), stamp(r.Run.StartTime), stamp(r.Run.EndTime))
	a.printf("  archived at: %s\n  object:      %s\n", stamp(new(time.UnixMilli(r.ArchivedAt))), r.ArchiveKey)
	if len(r.Lineage) > 0 {
		a.printf("  lineage:     %d signal links\n", len(r.Lineage))
	}
	sort.SliceStable(r.Steps, func(i, j int) bool {
		if r.Steps[i].StepID != r.Steps[j].StepID {
			return r.Steps[i].StepID < r.Steps[j].StepID
		}
		return r.Steps[i].AttemptID < r.Steps[j].AttemptID
	})
	a.printf("\n%-24s %-8s %-12s %-20s %s\n", "STEP", "ATTEMPT", "TYPE", "STATUS", "ENDED")
	for _, s := range r.Steps {
		a.printf("%-24s %-8d %-12s %-20s %s\n", s.StepID, s.AttemptID, s.StepType, s.Status, stamp(s.EndTime))
	}
	return nil
}

// stamp writes a time in UTC, "-" when unset.
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
