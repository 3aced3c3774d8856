package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/localstack"
)

// opsCmd runs `maestro ops args...` against dsn as operator "oncall" and
// returns its exit code and output.
func opsCmd(t *testing.T, dsn string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(maestroBinary(t), append([]string{"ops"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"DATABASE_URL=" + dsn, "MAESTRO_OPERATOR=oncall"}, env...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// `maestro ops drain` on a live engine among two: the drained node hands
// every flow group over (cleanly, its runs finish on the other node, none
// twice) and stays up as a healthy standby; the last node that is not
// draining cannot be drained; --undo gives the node its share back. Each
// change is in the audit log.
func TestOpsDrainHandsAnEnginesGroupsOver(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	f := startRuns(t, dsn, 12)
	p1 := engineProcess(t, dsn, "drain-1", "2")
	waitOwned(t, f.pool, "drain-1", 2)
	engineProcess(t, dsn, "drain-2", "4")
	waitOwnedWithin(t, f.pool, map[string]int{"drain-1": 2, "drain-2": 2}, 30*time.Second)
	f.waitProgress(t, 4)

	code, out := opsCmd(t, dsn, nil, "drain", "--node", "drain-1", "--reason", "host patch", "--wait", "60s")
	if code != 0 || !strings.Contains(out, "drain-1 holds no flow group") {
		t.Fatalf("drain: %d %s", code, out)
	}
	waitOwnedWithin(t, f.pool, map[string]int{"drain-1": 0, "drain-2": 4}, 30*time.Second)
	f.checkFinished(t)
	if err := p1.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the drained engine exited: %v", err)
	}
	if code, out := opsCmd(t, dsn, nil, "drain", "--node", "drain-2"); code != 1 || !strings.Contains(out, "leaves no live engine node") {
		t.Errorf("draining the last node: %d %s", code, out)
	}
	if code, out := opsCmd(t, dsn, nil, "drain", "--node", "nobody"); code != 1 || !strings.Contains(out, "no live engine node") {
		t.Errorf("draining an unknown node: %d %s", code, out)
	}
	code, out = opsCmd(t, dsn, nil, "nodes", "--json")
	var nodes []struct {
		NodeID   string `json:"node_id"`
		Draining bool   `json:"draining"`
		Groups   int    `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &nodes); code != 0 || err != nil || len(nodes) != 2 || !nodes[0].Draining || nodes[0].Groups != 0 {
		t.Errorf("nodes: %d %s %v", code, out, err)
	}
	if code, out := opsCmd(t, dsn, nil, "drain", "--node", "drain-1", "--undo"); code != 0 {
		t.Fatalf("undo: %d %s", code, out)
	}
	waitOwnedWithin(t, f.pool, map[string]int{"drain-1": 2, "drain-2": 2}, 30*time.Second)

	code, out = opsCmd(t, dsn, nil, "audit", "--json")
	var acts []struct {
		Action, Actor, Target string
		Detail                map[string]any
	}
	if err := json.Unmarshal([]byte(out), &acts); code != 0 || err != nil || len(acts) != 2 ||
		acts[0].Action != "undrain" || acts[1].Action != "drain" || acts[1].Actor != "oncall" || acts[1].Detail["reason"] != "host patch" {
		t.Errorf("audit: %d %s %v", code, out, err)
	}
}

// `maestro ops triggers pause|status|resume` and `maestro ops stuck`
// through the binary: the pause shows in status, and stuck lists a run
// whose group no engine holds.
func TestOpsTriggersAndStuck(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	f := startRuns(t, dsn, 2) // no engine: nobody holds their groups
	if code, out := opsCmd(t, dsn, nil, "triggers", "pause", "--reason", "db upgrade"); code != 0 || !strings.Contains(out, "every trigger is paused") {
		t.Fatalf("pause: %d %s", code, out)
	}
	if code, out := opsCmd(t, dsn, nil, "triggers", "status"); code != 0 || !strings.Contains(out, "PAUSED") || !strings.Contains(out, "oncall") ||
		!strings.Contains(out, "db upgrade") {
		t.Errorf("status: %d %s", code, out)
	}
	if code, out := opsCmd(t, dsn, nil, "triggers", "resume"); code != 0 || !strings.Contains(out, "resumed") {
		t.Errorf("resume: %d %s", code, out)
	}
	code, out := opsCmd(t, dsn, nil, "stuck", "--unowned", "0s", "--json")
	var runs []struct {
		WorkflowID string `json:"workflow_id"`
		Reason     string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil || len(runs) != len(f.insts) || runs[0].Reason != "group unowned" {
		t.Errorf("stuck: %d %s %v", code, out, err)
	}
	if code, out := opsCmd(t, dsn, nil, "frobnicate"); code != 2 || !strings.Contains(out, "usage") {
		t.Errorf("unknown command: %d %s", code, out)
	}
}

// `maestro ops dlq redrive` moves a dead-letter queue's messages back with
// the real SQS client (the emulator's endpoint) and audits the move.
func TestOpsRedriveDLQ(t *testing.T) {
	t.Parallel()
	cfg := localstack.Config(t)
	client := sqs.NewFromConfig(cfg)
	ctx := context.Background()
	mk := func(name string) string {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-" + strings.ReplaceAll(t.Name(), "/", "-") +
			"-" + time.Now().Format("150405.000000")[7:])})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	dlq, source := mk("ops-dlq"), mk("ops-src")
	for range 3 {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(`{"failed":true}`)}); err != nil {
			t.Fatal(err)
		}
	}
	dsn := dbtest.URL(t)
	env := []string{"MAESTRO_AWS_ENDPOINT=" + localstack.Endpoint(t), "AWS_REGION=" + localstack.Region,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
	code, out := opsCmd(t, dsn, env, "dlq", "redrive", "--queue-url", dlq, "--to", source)
	// "moved 3" or more: a SendMessage of the fill the SDK retried may have
	// put a message in the dead-letter queue twice (at least once).
	if code != 0 || !regexp.MustCompile(`moved [3-9] messages`).MatchString(out) {
		t.Fatalf("redrive: %d %s", code, out)
	}
	got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(source), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
	// At least 3: SQS is at least once, and a SendMessage the SDK retried
	// after a broken connection (the emulator had stored it) arrives twice.
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(got.Attributes["ApproximateNumberOfMessages"]); n < 3 {
		t.Errorf("source queue holds %d messages, want the 3 moved", n)
	}
	code, out = opsCmd(t, dsn, nil, "audit")
	if code != 0 || !strings.Contains(out, "redrive-dlq") || !regexp.MustCompile(`"moved":[3-9]`).MatchString(out) {
		t.Errorf("audit: %d %s", code, out)
	}
}
