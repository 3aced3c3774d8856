package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/client"
)

func (a *app) restartCmd() *cobra.Command {
	var fromStep, policy string
	var watch bool
	c := &cobra.Command{
		Use:   "restart WORKFLOW INSTANCE",
		Short: "Restart an instance: its next run, from its incomplete steps, the beginning or a step",
		Long: `Restart an instance as a new run. By default the run restarts from its incomplete
steps (RESTART_FROM_INCOMPLETE); --policy RESTART_FROM_BEGINNING starts over;
--from-step restarts from that step (RESTART_FROM_SPECIFIC).`,
		Example: "  maestro restart hello 1\n  maestro restart hello 1 --from-step b --watch",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, iid, err := a.instanceClient(cmd, args[1])
			if err != nil {
				return err
			}
			res, err := c.Restart(cmd.Context(), client.RestartRequest{WorkflowID: args[0], InstanceID: iid, Policy: policy, FromStep: fromStep})
			if err != nil {
				return err
			}
			if a.json() && !watch {
				return a.printJSON(res.Raw)
			}
			if !a.json() {
				a.printf("restarted %s instance %d as run %d (%s)\n", args[0], iid, res.RunID, a.status(res.Status))
			}
			if watch {
				return a.watch(cmd.Context(), c, args[0], iid, res.RunID, time.Second)
			}
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().StringVar(&fromStep, "from-step", "", "restart from this step")
	c.Flags().StringVar(&policy, "policy", "", "RESTART_FROM_INCOMPLETE (default) or RESTART_FROM_BEGINNING")
	c.Flags().BoolVarP(&watch, "watch", "w", false, "watch the new run until it ends")
	_ = c.RegisterFlagCompletionFunc("policy", cobra.FixedCompletions([]string{"RESTART_FROM_INCOMPLETE", "RESTART_FROM_BEGINNING"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// actionCmd is stop or kill of an instance's current run.
func (a *app) actionCmd(action string) *cobra.Command {
	short := map[string]string{
		"stop": "Stop an instance's run: running steps are stopped, the run ends STOPPED",
		"kill": "Kill an instance's run: running steps are killed, the run ends FAILED",
	}[action]
	return &cobra.Command{
		Use:     action + " WORKFLOW INSTANCE",
		Short:   short,
		Example: fmt.Sprintf("  maestro %s hello 3", action),
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, iid, err := a.instanceClient(cmd, args[1])
			if err != nil {
				return err
			}
			raw, err := c.Act(cmd.Context(), args[0], iid, action)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			a.printf("%s of %s instance %d accepted\n", action, args[0], iid)
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
}

func (a *app) signalCmd() *cobra.Command {
	parent := &cobra.Command{Use: "signal", Short: "Send signals"}
	var params []string
	var requestID string
	send := &cobra.Command{
		Use:   "send NAME",
		Short: "Announce a signal: it starts workflows whose signal triggers match and wakes steps waiting on it",
		Long: `Announce a signal with params. -p name=value sends a number, a boolean or a string
as the value reads; -p name:=JSON sends any JSON value.`,
		Example: "  maestro signal send table_ready -p table=db.orders -p date=20240102",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ps := map[string]any{}
			for _, p := range params {
				name, value, ok := strings.Cut(p, "=")
				if !ok || name == "" {
					return &ExitCodeError{Code: ExitUsage, Message: fmt.Sprintf("maestro: param %q is not name=value", p)}
				}
				if n, isJSON := strings.CutSuffix(name, ":"); isJSON {
					var v any
					if err := json.Unmarshal([]byte(value), &v); err != nil {
						return &ExitCodeError{Code: ExitUsage, Message: fmt.Sprintf("maestro: param %s: %q is not JSON", n, value)}
					}
					ps[n] = v
					continue
				}
				ps[name] = inferParam(value)["value"]
			}
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			si, err := c.SendSignal(cmd.Context(), args[0], ps, requestID)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(si.Raw)
			}
			if si.Duplicated {
				a.printf("signal %s already announced with this request id (seq %d)\n", args[0], si.SeqID)
			} else {
				a.printf("signal %s announced (seq %d)\n", args[0], si.SeqID)
			}
			return nil
		},
	}
	send.Flags().StringArrayVarP(&params, "param", "p", nil, "signal param name=value, or name:=JSON (repeatable)")
	send.Flags().StringVar(&requestID, "request-id", "", "idempotency key")
	parent.AddCommand(send)
	return parent
}

func (a *app) eventsCmd() *cobra.Command {
	parent := &cobra.Command{Use: "events", Short: "Read Maestro's events"}
	var f client.EventFilter
	var follow bool
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print events as they happen (definition changes, run and step status changes)",
		Long: `Print Maestro's events. With --follow (the default) it keeps printing new events:
over the live stream where the server has one (maestro dev), else by polling the
retained events. --after EVENT_ID starts after that event; without it, a followed
tail starts now and an unfollowed one prints the retained events.`,
		Example: "  maestro events tail --workflow hello\n  maestro events tail --follow=false --after 0-0 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			if !follow && f.After == "" {
				f.After = "0-0"
			}
			return c.Events(cmd.Context(), f, follow, 2*time.Second, func(e client.Event) error {
				if a.json() {
					_, err := fmt.Fprintf(a.opts.Stdout, "%s\n", compact(e.Data))
					return err
				}
				return a.printEvent(a.opts.Stdout, e)
			})
		},
	}
	fl := tail.Flags()
	fl.StringVar(&f.WorkflowID, "workflow", "", "only this workflow's events")
	fl.Int64Var(&f.InstanceID, "instance", 0, "only this instance's events (with --workflow)")
	fl.StringSliceVar(&f.Types, "type", nil, "only these event types (comma separated)")
	fl.StringVar(&f.After, "after", "", "start after this event_id")
	fl.BoolVarP(&follow, "follow", "f", true, "keep printing new events")
	parent.AddCommand(tail)
	return parent
}

func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// printEvent writes an event as one line.
func (a *app) printEvent(w io.Writer, e client.Event) error {
	var ev struct {
		Type       string      `json:"type"`
		WorkflowID string      `json:"workflow_id"`
		InstanceID int64       `json:"workflow_instance_id"`
		RunID      int64       `json:"workflow_run_id"`
		StepID     string      `json:"step_id"`
		Status     string      `json:"status"`
		NewStatus  string      `json:"new_status"`
		OldStatus  string      `json:"old_status"`
		EventTime  client.Time `json:"event_time"`
		SyncTime   client.Time `json:"sync_time"`
		Records    []struct {
			OldStatus string `json:"old_status"`
			NewStatus string `json:"new_status"`
		} `json:"status_change_records"`
	}
	_ = json.Unmarshal(e.Data, &ev) // unknown shapes print their type only
	if n := len(ev.Records); n > 0 {
		ev.OldStatus, ev.NewStatus = ev.Records[0].OldStatus, ev.Records[n-1].NewStatus
	}
	t := ev.EventTime
	if t.IsZero() {
		t = ev.SyncTime
	}
	ts := "--:--:--"
	if !t.IsZero() {
		ts = t.Local().Format("15:04:05")
	}
	where := ev.WorkflowID
	if ev.InstanceID > 0 {
		where += fmt.Sprintf(" #%d/%d", ev.InstanceID, ev.RunID)
	}
	if ev.StepID != "" {
		where += " step " + ev.StepID
	}
	change := a.status(ev.NewStatus)
	if ev.OldStatus != "" {
		change = ev.OldStatus + " -> " + change
	}
	if change == "" {
		change = a.status(ev.Status)
	}
	_, err := fmt.Fprintf(w, "%s  %-12s %-42s %s %s\n", ts, e.ID, ev.Type, where, change)
	return err
}

func (a *app) triggerCmd() *cobra.Command {
	parent := &cobra.Command{Use: "trigger", Short: "Time triggers"}
	var tz, after string
	var count int
	preview := &cobra.Command{
		Use:   "preview CRON|JSON",
		Short: "List the next fire times of a cron schedule (Unix or Quartz) or a time trigger object",
		Example: "  maestro trigger preview '0 9 * * MON-FRI' --timezone Europe/Paris\n" +
			`  maestro trigger preview '{"cron": "0 0 12 1/1 * ? *", "timezone": "UTC"}' --count 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var trig json.RawMessage
			if strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
				trig = json.RawMessage(args[0])
			} else {
				t := map[string]any{"cron": args[0]}
				if tz != "" {
					t["timezone"] = tz
				}
				trig, _ = json.Marshal(t) // a map of strings always encodes
			}
			var at time.Time
			if after != "" {
				var err error
				if at, err = time.Parse(time.RFC3339, after); err != nil {
					return &ExitCodeError{Code: ExitUsage, Message: "maestro: --after must be an RFC 3339 time, e.g. 2024-01-02T00:00:00Z"}
				}
			}
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			p, err := c.PreviewTrigger(cmd.Context(), trig, count, at)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(p.Raw)
			}
			a.printf("next fire times (%s):\n", p.Timezone)
			for _, t := range p.FireTimes {
				a.printf("  %s\n", t)
			}
			return nil
		},
	}
	preview.Flags().StringVar(&tz, "timezone", "", "time zone of the cron (default UTC)")
	preview.Flags().IntVarP(&count, "count", "n", 10, "how many fire times")
	preview.Flags().StringVar(&after, "after", "", "list fire times after this RFC 3339 time (default now)")
	parent.AddCommand(preview)
	return parent
}
