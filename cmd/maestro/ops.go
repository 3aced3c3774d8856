package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/ops"
	"github.com/maestro-aws/maestro/engine/ops/redrive"
)

// opsUsage lists the operator commands (docs/cli.md, "maestro ops").
const opsUsage = `usage:
  maestro ops stuck [--idle 15m] [--unowned 30s] [--limit 100] [--json]
  maestro ops nodes [--json]
  maestro ops drain --node ID [--undo] [--force] [--wait 2m] [--reason TEXT]
  maestro ops triggers pause|resume|status [--reason TEXT]
  maestro ops dlq redrive --queue-url URL [--to URL] [--max N]
  maestro ops audit [--since 24h] [--limit 50] [--json]
every command but stuck, nodes, status and audit is recorded in operator_action
and as an ALERT event (alert_type OPERATOR_ACTION); --as names the operator
(default MAESTRO_OPERATOR, else the login name)`

// runOps runs one operator command against the database at DATABASE_URL.
func runOps(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, opsUsage)
		return 2
	}
	cmd, args := args[0], args[1:]
	if cmd == "triggers" || cmd == "dlq" {
		if len(args) == 0 {
			fmt.Fprintln(stderr, opsUsage)
			return 2
		}
		cmd, args = cmd+" "+args[0], args[1:]
	}
	fs := flag.NewFlagSet("ops "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	actor := fs.String("as", operatorName(), "the operator recorded in the audit log")
	reason := fs.String("reason", "", "why, recorded in the audit log")
	idle := fs.Duration("idle", 15*time.Minute, "stuck: a live run unchanged this long")
	unowned := fs.Duration("unowned", 30*time.Second, "stuck: a live run whose flow group no live engine holds, unchanged this long")
	limit := fs.Int("limit", 100, "the most rows to print")
	node := fs.String("node", "", "drain: the engine node id (maestro ops nodes lists them)")
	undo := fs.Bool("undo", false, "drain: end the drain of the node")
	force := fs.Bool("force", false, "drain: even the last node that is not draining")
	wait := fs.Duration("wait", 2*time.Minute, "drain: how long to wait for the node to hand its groups over (0: do not wait)")
	queueURL := fs.String("queue-url", "", "dlq redrive: the dead-letter queue's URL")
	to := fs.String("to", "", "dlq redrive: the queue to move the messages to (default the one whose redrive policy names the dead-letter queue)")
	maxMsgs := fs.Int("max", 0, "dlq redrive: the most messages to move (0: all)")
	since := fs.Duration("since", 24*time.Hour, "audit: how far back")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *actor == "" {
		fmt.Fprintln(stderr, "maestro ops: name the operator with --as or MAESTRO_OPERATOR")
		return 2
	}
	known := map[string]bool{"stuck": true, "nodes": true, "drain": true, "triggers pause": true, "triggers resume": true,
		"triggers status": true, "dlq redrive": true, "audit": true}
	if !known[cmd] || fs.NArg() > 0 || (cmd == "drain" && *node == "") || (cmd == "dlq redrive" && *queueURL == "") {
		fmt.Fprintln(stderr, opsUsage)
		return 2
	}
	logger := newLogger(false)
	dsn, _, err := resolveDSN(ctx, logger, false)
	if err != nil {
		fmt.Fprintln(stderr, "maestro ops:", err)
		return 1
	}
	pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 2, ApplicationName: "maestro-ops"})
	if err != nil {
		fmt.Fprintln(stderr, "maestro ops:", err)
		return 1
	}
	defer pool.Close()
	store := ops.New(pool)
	print := func(v any, table func(w *tabwriter.Writer)) {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(v)
			return
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		table(w)
		_ = w.Flush()
	}

	err = func() error {
		switch cmd {
		case "stuck":
			runs, err := store.StuckRuns(ctx, *idle, *unowned, *limit)
			if err != nil {
				return err
			}
			print(runs, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "WORKFLOW\tINSTANCE\tRUN\tSTATUS\tGROUP\tOWNER\tLAST CHANGE\tREASON\tLIVE STEPS")
				for _, r := range runs {
					fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", r.WorkflowID, r.InstanceID, r.RunID, r.Status, r.Group,
						orDash(r.Owner), r.LastChange.UTC().Format(time.RFC3339), r.Reason, orDash(strings.Join(r.Waiting, ",")))
				}
			})
			if !*asJSON {
				fmt.Fprintf(stdout, "%d stuck runs\n", len(runs))
			}
		case "nodes":
			nodes, err := store.Nodes(ctx)
			if err != nil {
				return err
			}
			print(nodes, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "NODE\tGROUPS\tDRAINING\tSTARTED\tHEARTBEAT")
				for _, n := range nodes {
					fmt.Fprintf(w, "%s\t%d\t%v\t%s\t%s\n", n.NodeID, n.Groups, n.Draining,
						n.StartedAt.UTC().Format(time.RFC3339), n.Heartbeat.UTC().Format(time.RFC3339))
				}
			})
		case "drain":
			if err := store.Drain(ctx, *node, !*undo, *force, *actor, *reason); err != nil {
				return err
			}
			if *undo {
				fmt.Fprintf(stdout, "%s is no longer draining: it takes its share of the flow groups at its next heartbeat\n", *node)
				return nil
			}
			fmt.Fprintf(stdout, "%s is draining: it hands its flow groups over at its next heartbeat and claims none\n", *node)
			if *wait <= 0 {
				return nil
			}
			deadline := time.Now().Add(*wait)
			for {
				held := -1
				nodes, err := store.Nodes(ctx)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					if n.NodeID == *node {
						held = n.Groups
					}
				}
				if held <= 0 {
					fmt.Fprintf(stdout, "%s holds no flow group: stop it when you like (SIGTERM)\n", *node)
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s still holds %d flow groups after %s (is it running this release?)", *node, held, *wait)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
		case "triggers pause", "triggers resume":
			on := cmd == "triggers pause"
			before, err := store.SetTriggersPaused(ctx, on, *actor, *reason)
			if err != nil {
				return err
			}
			switch {
			case on && before:
				fmt.Fprintln(stdout, "triggers were already paused; still paused")
			case on:
				fmt.Fprintln(stdout, "every trigger is paused: no time trigger fires, signals start no triggered run (they are kept)")
			case !before:
				fmt.Fprintln(stdout, "triggers were not paused")
			default:
				fmt.Fprintln(stdout, "triggers resumed: due time triggers fire (missed-fire policy), kept signals are matched")
			}
		case "triggers status":
			m, err := store.Maintenance(ctx)
			if err != nil {
				return err
			}
			print(m, func(w *tabwriter.Writer) {
				if !m.TriggersPaused {
					fmt.Fprintf(w, "triggers: running\nsignals kept for the triggers:\t%d\n", m.DeferredSignals)
					return
				}
				fmt.Fprintf(w, "triggers: PAUSED\nby:\t%s\nsince:\t%s\nreason:\t%s\nsignals kept for the triggers:\t%d\n", m.PausedBy,
					m.PausedAt.UTC().Format(time.RFC3339), orDash(m.Reason), m.DeferredSignals)
			})
		case "dlq redrive":
			opts := []func(*config.LoadOptions) error{}
			if ep := strings.TrimSpace(os.Getenv("MAESTRO_AWS_ENDPOINT")); ep != "" {
				opts = append(opts, config.WithBaseEndpoint(ep))
			}
			cfg, err := awsconf.Load(ctx, opts...)
			if err != nil {
				return fmt.Errorf("load the AWS configuration: %w", err)
			}
			res, runErr := redrive.Run(ctx, sqs.NewFromConfig(cfg), redrive.Options{DLQ: *queueURL, Target: *to, Max: *maxMsgs})
			detail := map[string]any{"reason": *reason, "dlq": res.DLQ, "target": res.Target, "moved": res.Moved}
			if runErr != nil {
				detail["error"] = runErr.Error()
			}
			if res.Moved > 0 || runErr == nil {
				if err := store.Record(ctx, ops.ActionRedriveDLQ, *actor, *queueURL, detail); err != nil {
					return errors.Join(runErr, err)
				}
			}
			if runErr != nil {
				return fmt.Errorf("%d messages moved before: %w", res.Moved, runErr)
			}
			fmt.Fprintf(stdout, "moved %d messages from %s to %s\n", res.Moved, res.DLQ, res.Target)
		case "audit":
			acts, err := store.Actions(ctx, time.Now().Add(-*since), *limit)
			if err != nil {
				return err
			}
			print(acts, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tTIME\tACTION\tBY\tTARGET\tDETAIL")
				for _, a := range acts {
					d, _ := json.Marshal(a.Detail)
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Time.UTC().Format(time.RFC3339), a.Action, a.Actor, orDash(a.Target), d)
				}
			})
		}
		return nil
	}()
	if err != nil {
		fmt.Fprintln(stderr, "maestro ops:", err)
		return 1
	}
	return 0
}

// operatorName is who runs maestro ops: MAESTRO_OPERATOR, else the login
// name.
func operatorName() string {
	if v := strings.TrimSpace(os.Getenv("MAESTRO_OPERATOR")); v != "" {
		return v
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
