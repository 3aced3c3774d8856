package flowstore

import (
	"fmt"
	"strings"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// The Writer's statements: one per kind of write, each writing any number
// of rows given as column arrays, each row fenced on its own and recording
// its event in the same statement. Each returns the keys of the rows it
// wrote; a row it did not write was refused by its fence or guard.
//
// The fence is the flow group's row. A batch first locks the rows of the
// groups it writes for FOR KEY SHARE, at the generations its ops carry, in
// group order (lockGroupsSQL); every row of its statements then checks its
// group's generation. Every statement that moves a generation (claim,
// reclaim, release: engine/membership) locks the row FOR UPDATE, which a
// KEY SHARE lock excludes: so a batch's writes either commit before the
// new owner's claim (and its adoption, which reads the runs afterwards,
// sees them) or are refused. The heartbeat's FOR NO KEY UPDATE does not
// conflict with KEY SHARE, so a lease is extended while batches are in
// flight and no batch waits for a heartbeat. A run's own row is neither
// locked nor read to fence a step write.

// stepSource unnests the column arrays of step writes ($2 ... $19; $1 is
// the event kind; $19 the output signals a row announces, NULL for none);
// an insert adds its uuids and step types ($20, $21), an update the
// patches of its params ($20: with params NULL, the keys to set on the
// stored ones), then both the 1-based indexes of each row's retry and
// timeline in $14 and $15, which hold each distinct value once (the next
// two parameters: the steps of a foreach's iterations share one retry
// policy, and those written in the same millisecond one timeline, parsed
// once each instead of once per row), and a statement with startedFence
// the live flags (the parameter after them). Each row carries
// its place in the arrays (ord): a statement may write several writes of
// one run (a chain of steps each written once, SUCCEEDED), given in the
// run's order, and records their events in that order.
func stepSource(insert, live bool) string {
	cols := `u.workflow_id COLLATE "C" AS workflow_id, u.instance_id, u.run_id, u.group_id, u.gen, u.step_id,
        u.attempt_id, u.status, u.seq, u.params, u.outputs, u.runtime_state,
        ($14::jsonb[])[u.retry_i] AS retry, ($15::jsonb[])[u.timeline_i] AS timeline, u.start, u.fin, u.ev, u.sig`
	arrays := `$2::text[], $3::bigint[], $4::bigint[], $5::integer[], $6::bigint[], $7::text[], $8::bigint[],
        $9::text[], $10::bigint[], $11::jsonb[], $12::jsonb[], $13::jsonb[],
        $16::boolean[], $17::boolean[], $18::json[], $19::jsonb[]`
	names := `workflow_id, instance_id, run_id, group_id, gen, step_id, attempt_id, status, seq, params, outputs,
        runtime_state, start, fin, ev, sig`
	next := 20
	if insert {
		cols, arrays, names = cols+", u.uuid, u.step_type", arrays+", $20::uuid[], $21::text[]", names+", uuid, step_type"
		next = 22
	} else {
		cols, arrays, names = cols+", u.patch", arrays+", $20::jsonb[]", names+", patch"
		next = 21
	}
	arrays += fmt.Sprintf(", $%d::integer[], $%d::integer[]", next, next+1)
	names += ", retry_i, timeline_i"
	next += 2
	if live {
		cols, arrays, names = cols+", u.live", arrays+fmt.Sprintf(", $%d::boolean[]", next), names+", live"
	}
	return `
    SELECT ` + cols + `, u.ord
    FROM unnest(` + arrays + `) WITH ORDINALITY AS u(` + names + `, ord)`
}

// lockGroupsSQL key-share-locks the flow group rows of a batch ($1 groups,
// $2 generations), in group order so that batches and the claims that
// skip them never deadlock. A group another node has claimed since (a new generation) is
// not locked, and the rows for it are refused.
const lockGroupsSQL = `
SELECT group_id FROM flow_group
WHERE (group_id, generation) IN (SELECT * FROM unnest($1::integer[], $2::bigint[]))
ORDER BY group_id
FOR KEY SHARE`

// groupFence joins a batch's rows (u) to their locked group at their
// generation.
const groupFence = `JOIN flow_group g ON g.group_id = u.group_id AND g.generation = u.gen`

// startedFence refuses a step write that follows its run's start (a
// CREATED -> IN_PROGRESS write, StartOp) in the same batch unless that
// start was written: the batch writes runs before steps, so the run's row
// shows it (IN_PROGRESS at the writer's generation). The rows carry a flag
// (live) marking those writes, in an array after the others; only a batch
// that holds such a write uses the statements with this fence
// (insertStepsAfterStartSQL, updateStepsAfterStartSQL), so that the others
// stay as simple to plan as they were.
const startedFence = `(NOT u.live OR EXISTS (SELECT 1 FROM workflow_instance i
        WHERE i.workflow_id = u.workflow_id AND i.instance_id = u.instance_id AND i.run_id = u.run_id
          AND i.status = 'IN_PROGRESS' AND i.generation = u.gen))`

// stepEventSource unnests, of stepSource's arrays, only the keys, events
// and output signals: what an insert's rows written are joined to. A
// second reference to stepSource itself would make PostgreSQL materialize
// it, copying every row's params and timeline twice (into the CTE's store
// and the join's hash table) to read three small columns.
const stepEventSource = `
        SELECT k.workflow_id COLLATE "C" AS workflow_id, k.instance_id, k.run_id, k.step_id, k.attempt_id, k.ev, k.sig, k.ord
        FROM unnest($2::text[], $3::bigint[], $4::bigint[], $7::text[], $8::bigint[], $18::json[], $19::jsonb[]) WITH ORDINALITY
          AS k(workflow_id, instance_id, run_id, step_id, attempt_id, ev, sig, ord)`

// insertStepsStatement inserts new attempts. A row that exists already is
// refused (ON CONFLICT), not an error: a write repeated after a lost
// acknowledgement.
func insertStepsStatement(afterStart bool) string {
	cols, where := stepSource(true, afterStart), ""
	if afterStart {
		where = "\n    WHERE " + startedFence
	}
	return `
WITH u AS (` + cols + `),
ws AS (
    INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, seq, step_type,
        params, outputs, runtime_state, retry, timeline, start_time, end_time)
    SELECT u.workflow_id, u.instance_id, u.run_id, u.step_id, u.attempt_id, u.uuid, u.status, u.seq, u.step_type,
        u.params, u.outputs, u.runtime_state, u.retry, u.timeline,
        CASE WHEN u.start THEN now() END, CASE WHEN u.fin THEN now() END
    FROM u ` + groupFence + where + `
    ON CONFLICT DO NOTHING
    RETURNING workflow_id, instance_id, run_id, step_id, attempt_id, seq),
wu AS (
    SELECT ws.workflow_id, ws.seq, k.ev, k.sig, k.ord FROM ws JOIN (` + stepEventSource + `) AS k ON k.workflow_id = ws.workflow_id
        AND k.instance_id = ws.instance_id AND k.run_id = ws.run_id AND k.step_id = ws.step_id AND k.attempt_id = ws.attempt_id),
e AS (
    ` + event.InsertSQL + `
    SELECT $1::smallint, wu.workflow_id, wu.seq, wu.ev FROM wu WHERE wu.ev IS NOT NULL ORDER BY wu.ord)` +
		outputsSQL("wu") + `
SELECT workflow_id, instance_id, run_id, step_id, attempt_id FROM ws`
}

// updateStepsStatement writes later states of attempts. Besides the
// group's generation it checks the attempt's seq, so a write repeated
// after a lost acknowledgement fails instead of writing its event twice.
func updateStepsStatement(afterStart bool) string {
	cols, fence := stepSource(false, afterStart), ""
	if afterStart {
		fence = " AND " + startedFence
	}
	return `
WITH u AS (` + cols + `),
ws AS (
    UPDATE step_instance s SET
        status = u.status, seq = u.seq,
        params = COALESCE(u.params, s.params || u.patch, s.params),
        outputs = COALESCE(u.outputs, s.outputs),
        runtime_state = u.runtime_state, retry = u.retry,
        timeline = s.timeline || u.timeline,
        start_time = CASE WHEN u.start THEN now() ELSE s.start_time END,
        end_time = CASE WHEN u.fin THEN now() ELSE s.end_time END,
        modify_time = now()
    FROM u ` + groupFence + `
    WHERE s.workflow_id = u.workflow_id AND s.instance_id = u.instance_id AND s.run_id = u.run_id
      AND s.step_id = u.step_id AND s.attempt_id = u.attempt_id AND s.seq = u.seq - 1` + fence + `
    RETURNING s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id, s.seq, u.ev, u.sig, u.ord),
e AS (
    ` + event.InsertSQL + `
    SELECT $1::smallint, ws.workflow_id, ws.seq, ws.ev FROM ws WHERE ws.ev IS NOT NULL ORDER BY ws.ord)` +
		outputsSQL("ws") + `
SELECT workflow_id, instance_id, run_id, step_id, attempt_id FROM ws`
}

var (
	insertStepsSQL           = insertStepsStatement(false)
	insertStepsAfterStartSQL = insertStepsStatement(true)
	updateStepsSQL           = updateStepsStatement(false)
	updateStepsAfterStartSQL = updateStepsStatement(true)
)

// updateInstancesSQL writes runs' own states. A run is written only while
// it is still in the status the writer knew (From), so a write repeated
// after a lost acknowledgement is refused rather than applied (and
// reported) twice. The event is completed with the run's new seq. A run
// started from CREATED (StartOp) takes the writer's generation and its
// start time; one queued under its run strategy is never started here.
// The timelines appended are $10's distinct values, each run's named by
// its 1-based index ($13): runs ending in the same millisecond append the
// same events, parsed once.
const updateInstancesSQL = `
WITH u AS (
    SELECT u.workflow_id COLLATE "C" AS workflow_id, u.instance_id, u.run_id, u.group_id, u.gen, u.from_status,
        u.status, u.params, ($10::jsonb[])[u.timeline_i] AS timeline, u.fin, u.ev
    FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::integer[], $6::bigint[], $7::text[], $8::text[],
        $9::jsonb[], $13::integer[], $11::boolean[], $12::json[])
      AS u(workflow_id, instance_id, run_id, group_id, gen, from_status, status, params, timeline_i, fin, ev)),
w AS (
    UPDATE workflow_instance i SET
        status = u.status, seq = i.seq + 1, generation = u.gen,
        start_time = CASE WHEN u.from_status = 'CREATED' THEN COALESCE(i.start_time, now()) ELSE i.start_time END,
        params = COALESCE(u.params, i.params),
        timeline = i.timeline || u.timeline,
        end_time = CASE WHEN u.fin THEN now() ELSE i.end_time END,
        modify_time = now()
    FROM u ` + groupFence + `
    WHERE i.workflow_id = u.workflow_id AND i.instance_id = u.instance_id AND i.run_id = u.run_id
      AND i.group_id = u.group_id AND i.status = u.from_status AND NOT (u.from_status = 'CREATED' AND i.queued)
    RETURNING i.workflow_id, i.instance_id, i.run_id, i.seq, u.ev),
e AS (
    ` + event.InsertSQL + `
    SELECT $1::smallint, w.workflow_id, w.seq, w.ev FROM w WHERE w.ev IS NOT NULL)
SELECT workflow_id, instance_id, run_id FROM w`

// outputsSQL announces the output signals of the step rows written (the
// CTE written, with sig and ord columns), in the order of the rows' writes: signal.OutputsSQL, in the same
// statement as the rows' terminal states, over the outputs of every row
// written gathered into one array. signal.OutputsSQL reads a CTE "w" that
// has one row when its outputs are to be written: here, when any row
// written has outputs. A row its fence refused announces nothing.
func outputsSQL(written string) string {
	return `,
sig AS (
    SELECT jsonb_agg(x.o ORDER BY ` + written + `.ord, x.n) AS outs
    FROM ` + written + ` CROSS JOIN LATERAL jsonb_array_elements(` + written + `.sig) WITH ORDINALITY AS x(o, n)),
w AS (SELECT 1 FROM sig WHERE outs IS NOT NULL)` + strings.ReplaceAll(signal.OutputsSQL, "$N", "(SELECT outs FROM sig)")
}
