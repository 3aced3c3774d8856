package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/client"
)

func (a *app) pushCmd() *cobra.Command {
	var validate bool
	c := &cobra.Command{
		Use:   "push FILE",
		Short: "Push a workflow definition (Maestro JSON or the YAML DSL) as a new version",
		Long: `Push a workflow definition as a new version. Files ending in .yaml or .yml are sent as
the YAML DSL, others as Maestro JSON; "-" reads standard input as JSON. Pushing a
definition identical to the latest version creates nothing and says so.`,
		Example: "  maestro push examples/hello.yaml\n  maestro push --validate wf.json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var def []byte
			var err error
			if args[0] == "-" {
				def, err = readAll(os.Stdin)
			} else {
				def, err = os.ReadFile(args[0])
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", args[0], err)
			}
			ext := strings.ToLower(filepath.Ext(args[0]))
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			v, err := c.Push(cmd.Context(), def, ext == ".yaml" || ext == ".yml", validate)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(v.Raw)
			}
			switch {
			case validate:
				a.printf("%s is valid\n", v.WorkflowID)
			case v.Created != nil && !*v.Created:
				a.printf("workflow %s unchanged: version %d is the latest\n", v.WorkflowID, v.VersionID)
			default:
				state := "inactive"
				if v.IsActive {
					state = "active"
				}
				a.printf("pushed workflow %s version %d (%s)\n", v.WorkflowID, v.VersionID, state)
			}
			for _, w := range v.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&validate, "validate", false, "only validate the definition; store nothing")
	return c
}

func (a *app) startCmd() *cobra.Command {
	var version, paramsFile, requestID string
	var params []string
	var watch bool
	c := &cobra.Command{
		Use:   "start WORKFLOW",
		Short: "Start a run of a workflow",
		Long: `Start a run of a workflow's default version (the active one, else the latest).

Run params: -p name=value infers the type (LONG, DOUBLE, BOOLEAN, else STRING);
-p name:TYPE=value names it (value as JSON for non-string types, e.g.
-p 'ids:LONG_ARRAY=[1,2]'). --params-file reads Maestro run_params JSON
({"name": {"value": ..., "type": ...}}); -p overrides it.`,
		Example: "  maestro start hello\n  maestro start hello -p day=20240102 -p region=eu --watch",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rp, err := runParams(paramsFile, params)
			if err != nil {
				return &ExitCodeError{Code: ExitUsage, Message: "maestro: " + err.Error()}
			}
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.Start(cmd.Context(), client.StartRequest{WorkflowID: args[0], Version: version, RunParams: rp, RequestID: requestID})
			if err != nil {
				return err
			}
			if a.json() && !watch {
				return a.printJSON(res.Raw)
			}
			if !a.json() {
				a.printf("started %s instance %d run %d (%s)\n", res.WorkflowID, res.InstanceID, res.RunID, a.status(res.Status))
			}
			if watch {
				return a.watch(cmd.Context(), c, res.WorkflowID, res.InstanceID, res.RunID, time.Second)
			}
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	f := c.Flags()
	f.StringVar(&version, "version", "default", "version to run: a number, latest, active or default")
	f.StringArrayVarP(&params, "param", "p", nil, "run param name=value or name:TYPE=value (repeatable)")
	f.StringVar(&paramsFile, "params-file", "", "file of Maestro run_params JSON")
	f.StringVar(&requestID, "request-id", "", "idempotency key: a repeated start with it is a duplicate")
	f.BoolVarP(&watch, "watch", "w", false, "watch the run until it ends (exit code from its status)")
	return c
}

// runParams builds Maestro run params from a file and -p flags.
func runParams(file string, flags []string) (map[string]any, error) {
	out := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read params file: %w", err)
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("params file %s is not a JSON object of run params: %w", file, err)
		}
	}
	for _, p := range flags {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("param %q is not name=value", p)
		}
		name, typ, typed := strings.Cut(name, ":")
		if !typed {
			out[name] = inferParam(value)
			continue
		}
		typ = strings.ToUpper(typ)
		if typ == "STRING" {
			out[name] = map[string]any{"type": typ, "value": value}
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			return nil, fmt.Errorf("param %s of type %s: value %q is not JSON", name, typ, value)
		}
		out[name] = map[string]any{"type": typ, "value": v}
	}
	return out, nil
}

// inferParam types a -p value the way a person writing it means it.
func inferParam(v string) map[string]any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return map[string]any{"type": "LONG", "value": n}
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && strings.ContainsAny(v, ".eE") {
		return map[string]any{"type": "DOUBLE", "value": f}
	}
	if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		return map[string]any{"type": "BOOLEAN", "value": b}
	}
	return map[string]any{"type": "STRING", "value": v}
}

func (a *app) listCmd() *cobra.Command {
	var search string
	var limit int
	c := &cobra.Command{
		Use:   "list [WORKFLOW]",
		Short: "List workflows, or the instances of one workflow",
		Example: "  maestro list                 # workflows\n  maestro list --search daily  # workflows whose id, name or description holds 'daily'\n" +
			"  maestro list hello           # instances of hello, newest first",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return a.listWorkflows(cmd.Context(), c, search, limit)
			}
			runs, raw, err := c.Instances(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(raw)
			}
			now := time.Now()
			rows := make([][]string, 0, len(runs))
			for _, r := range runs {
				rows = append(rows, []string{fmt.Sprint(r.InstanceID), fmt.Sprint(r.RunID), fmt.Sprint(r.VersionID),
					a.status(r.Status), when(r.CreateTime), elapsed(r.StartTime, r.EndTime, now), initiator(r.Initiator)})
			}
			return table(a.opts.Stdout, []string{"INSTANCE", "RUN", "VERSION", "STATUS", "CREATED", "ELAPSED", "INITIATOR"}, rows)
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().StringVarP(&search, "search", "s", "", "only workflows whose id, name or description holds this text")
	c.Flags().IntVar(&limit, "limit", 50, "at most this many rows")
	return c
}

func (a *app) listWorkflows(ctx context.Context, c *client.Client, search string, limit int) error {
	p, err := c.ListWorkflows(ctx, search, "", limit)
	if err != nil {
		return err
	}
	if a.json() {
		return a.printJSON(p.Raw)
	}
	rows := make([][]string, 0, len(p.Items))
	for _, w := range p.Items {
		last := "-"
		if w.LatestInstanceID > 0 {
			last = fmt.Sprint(w.LatestInstanceID)
		}
		rows = append(rows, []string{w.WorkflowID, w.Owner, ptrVersion(w.ActiveVersionID), fmt.Sprint(w.LatestVersionID), last,
			when(w.ModifyTime), w.Name})
	}
	if err := table(a.opts.Stdout, []string{"WORKFLOW", "OWNER", "ACTIVE", "LATEST", "LAST INSTANCE", "MODIFIED", "NAME"}, rows); err != nil {
		return err
	}
	if p.Next != "" {
		a.printf("(more: narrow with --search or raise --limit)\n")
	}
	return nil
}

// initiator names who started a run: MANUAL (user), TIME, SIGNAL, ...
func initiator(raw json.RawMessage) string {
	var in struct {
		Type string `json:"type"`
		User string `json:"user"`
	}
	if json.Unmarshal(raw, &in) != nil || in.Type == "" {
		return "-"
	}
	if in.User != "" {
		return in.Type + " (" + in.User + ")"
	}
	return in.Type
}

func (a *app) getCmd() *cobra.Command {
	var run int64
	c := &cobra.Command{
		Use:     "get WORKFLOW [INSTANCE]",
		Short:   "Show a workflow (versions, triggers, recent runs) or one instance's run and its steps",
		Example: "  maestro get hello\n  maestro get hello 1\n  maestro get hello 1 --run 2 -o json",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return a.getWorkflow(cmd.Context(), c, args[0])
			}
			iid, err := instanceArg(args[1])
			if err != nil {
				return err
			}
			r, steps, rawSteps, err := c.RunWithSteps(cmd.Context(), args[0], iid, run)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printValue(map[string]json.RawMessage{"workflow_instance": r.Raw, "steps": rawSteps})
			}
			a.printRun(r, steps, time.Now())
			return nil
		},
		ValidArgsFunction: a.completeWorkflows,
	}
	c.Flags().Int64Var(&run, "run", 0, "run of the instance (default: the latest)")
	return c
}

func (a *app) getWorkflow(ctx context.Context, c *client.Client, id string) error {
	ov, err := c.Overview(ctx, id)
	if err != nil {
		return err
	}
	v, err := c.Version(ctx, id, "latest")
	if err != nil {
		return err
	}
	if a.json() {
		return a.printValue(map[string]json.RawMessage{"overview": ov.Raw, "latest_version": v.Raw})
	}
	a.printf("workflow %s\n  owner:           %s\n  active version:  %s\n  latest version:  %d (pushed %s by %s)\n",
		ov.WorkflowID, ov.Owner, ptrVersion(ov.ActiveVersionID), ov.LatestVersionID, when(v.CreateTime), v.CreatedBy)
	var wf struct {
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Steps       []json.RawMessage `json:"steps"`
	}
	_ = json.Unmarshal(v.Workflow, &wf) // a definition we cannot read shows no steps
	if wf.Name != "" {
		a.printf("  name:            %s\n", wf.Name)
	}
	if wf.Description != "" {
		a.printf("  description:     %s\n", wf.Description)
	}
	a.printf("  steps:           %d\n", len(wf.Steps))
	if len(ov.StatusCounts) > 0 {
		keys := make([]string, 0, len(ov.StatusCounts))
		for k := range ov.StatusCounts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", a.status(k), ov.StatusCounts[k]))
		}
		a.printf("  instances:       %s\n", strings.Join(parts, ", "))
	}
	runs, _, err := c.Instances(ctx, id, 10)
	if err != nil {
		return err
	}
	if len(runs) > 0 {
		a.printf("\nrecent instances:\n")
		now := time.Now()
		rows := make([][]string, 0, len(runs))
		for _, r := range runs {
			rows = append(rows, []string{fmt.Sprint(r.InstanceID), fmt.Sprint(r.RunID), a.status(r.Status), when(r.CreateTime), elapsed(r.StartTime, r.EndTime, now)})
		}
		return table(a.opts.Stdout, []string{"INSTANCE", "RUN", "STATUS", "CREATED", "ELAPSED"}, rows)
	}
	return nil
}

// printRun writes a run's header, rollup and steps table.
func (a *app) printRun(r *client.Run, steps []*client.Step, now time.Time) {
	a.printf("%s instance %d run %d (version %d): %s   elapsed %s\n", r.WorkflowID, r.InstanceID, r.RunID, r.VersionID,
		a.status(r.Status), elapsed(r.StartTime, r.EndTime, now))
	if r.Rollup != nil && r.Rollup.Total > len64(steps) {
		done := r.Rollup.Done()
		a.printf("leaf steps %s %d/%d done%s\n", bar(done, r.Rollup.Total, 30), done, r.Rollup.Total, rollupCounts(a, r.Rollup))
	}
	rows := make([][]string, 0, len(steps))
	for _, s := range steps {
		msg := s.Message
		if len(msg) > 60 {
			msg = msg[:57] + "..."
		}
		rows = append(rows, []string{s.StepID, s.Type, fmt.Sprint(s.AttemptID), a.status(s.Status), elapsed(s.StartTime, s.EndTime, now), msg})
	}
	_ = table(a.opts.Stdout, []string{"STEP", "TYPE", "ATTEMPT", "STATUS", "ELAPSED", "MESSAGE"}, rows)
}

func len64[T any](s []T) int64 { return int64(len(s)) }

// rollupCounts lists a rollup's non-zero counts: " (SUCCEEDED 9, RUNNING 1)".
func rollupCounts(a *app, r *client.Rollup) string {
	keys := make([]string, 0, len(r.Counts))
	for k, n := range r.Counts {
		if n > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", a.status(k), r.Counts[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// instanceClient reads an INSTANCE argument and builds the API client.
func (a *app) instanceClient(cmd *cobra.Command, arg string) (*client.Client, int64, error) {
	iid, err := instanceArg(arg)
	if err != nil {
		return nil, 0, err
	}
	c, err := a.apiClient(cmd.Context())
	return c, iid, err
}

func instanceArg(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, &ExitCodeError{Code: ExitUsage, Message: fmt.Sprintf("maestro: instance must be a positive number, got %q", s)}
	}
	return n, nil
}

// completeWorkflows completes a workflow id from the API.
func (a *app) completeWorkflows(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, 3*time.Second)
	defer cancel()
	c, err := a.apiClient(ctx)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveError
	}
	p, err := c.ListWorkflows(ctx, prefix, "", 100)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveError
	}
	out := []string{}
	for _, w := range p.Items {
		if strings.HasPrefix(w.WorkflowID, prefix) {
			out = append(out, w.WorkflowID)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
