package localstack_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedulertypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/localstack"
)

// scheduleInput is the time-trigger schedule's input: the Scheduler's
// context attributes, which the handler logs.
const scheduleInput = `{"scheduled_time":"<aws.scheduler.scheduled-time>","execution_id":"<aws.scheduler.execution-id>"}`

// The time-trigger Lambda's real bootstrap, run by the emulator's Lambda
// service: invoked with a Scheduler-shaped event it fires a due trigger
// against a real PostgreSQL; then an EventBridge Scheduler schedule (every
// minute, with a retry policy and a dead-letter queue, as the stack wires
// it) invokes it and it fires the next one.
func TestTimeTriggerLambdaInEmulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := localstack.Config(t)
	dsn := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, id := range []string{"direct", "scheduled"} {
		d, err := workflow.DecodeJSON([]byte(`{"workflow":{"id":"` + id + `","time_triggers":[{"cron":"0 0 * * *"}],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := definition.NewStore(pool).Create(ctx, d, "o"); err != nil {
			t.Fatal(err)
		}
	}
	due := func(id string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = date_trunc('day', now()),
                next_fire_at = date_trunc('day', now()) WHERE workflow_id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	runs := func(id string) (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = $1 AND initiator->>'type' = 'TIME'`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	lc, name, arn := deployFunction(t, cfg, "maestro-timetrigger", "../functions/timetrigger", dsn, 55)

	// A direct invocation with the schedule's input.
	due("direct")
	out, err := lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name),
		Payload: []byte(`{"scheduled_time":"2024-05-01T00:00:00Z","execution_id":"test","attempt":"1"}`)})
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if out.FunctionError != nil {
		t.Fatalf("function error %s: %s", aws.ToString(out.FunctionError), out.Payload)
	}
	var st struct {
		Claimed, Started int
	}
	if err := json.Unmarshal(out.Payload, &st); err != nil || st.Started != 1 || runs("direct") != 1 {
		t.Fatalf("invocation returned %s (%v); %d runs", out.Payload, err, runs("direct"))
	}

	// The schedule → Lambda wiring: EventBridge Scheduler at the start of every
	// minute, as infra.TimeTriggerSchedule wires it.
	due("scheduled")
	sc := scheduler.NewFromConfig(cfg)
	schedName := "maestro-time-triggers-" + time.Now().Format("150405")
	_, err = sc.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:               aws.String(schedName),
		ScheduleExpression: aws.String("cron(* * * * ? *)"),
		FlexibleTimeWindow: &schedulertypes.FlexibleTimeWindow{Mode: schedulertypes.FlexibleTimeWindowModeOff},
		Target: &schedulertypes.Target{
			Arn:              aws.String(arn),
			RoleArn:          aws.String("arn:aws:iam::000000000000:role/maestro-scheduler"),
			Input:            aws.String(scheduleInput),
			RetryPolicy:      &schedulertypes.RetryPolicy{MaximumEventAgeInSeconds: aws.Int32(120), MaximumRetryAttempts: aws.Int32(3)},
			DeadLetterConfig: &schedulertypes.DeadLetterConfig{Arn: aws.String("arn:aws:sqs:us-east-1:000000000000:maestro-time-trigger-dlq")},
		},
	})
	if err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	t.Cleanup(func() {
		_, _ = sc.DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{Name: aws.String(schedName)})
	})
	deadline := time.Now().Add(4 * time.Minute)
	for runs("scheduled") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the schedule never invoked the function into firing the due trigger")
		}
		time.Sleep(2 * time.Second)
	}
	if n := runs("direct") + runs("scheduled"); n != 2 {
		t.Fatalf("%d runs, want one per trigger", n)
	}
}
