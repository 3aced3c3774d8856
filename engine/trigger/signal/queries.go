package signal

// The package's SQL, named and kept together. Tables are defined in
// migrations/00008_signals.sql and migrations/00070_signal_triggers.sql.

// lockClass is the first key of the advisory locks on signal names.
// Matching a new signal against the waiting steps takes the name's lock
// exclusively and a dependency check takes it shared, so a check either
// sees the signal or is registered as a waiter before the announcement
// looks for waiters: an arrival can never slip between a check and its
// registration.
const lockClass = 0x5349474e // "SIGN"

// sqlLockNames takes the locks of a set of names, in the order of their
// lock keys, so that two transactions locking overlapping sets cannot
// deadlock (two names may share a key).
const (
	sqlLockNames = `SELECT count(pg_advisory_xact_lock($1, h)) FROM
    (SELECT DISTINCT hashtext(n) AS h FROM unnest($2::text[]) AS n ORDER BY 1) AS k`
	sqlLockNamesShared = `SELECT count(pg_advisory_xact_lock_shared($1, h)) FROM
    (SELECT DISTINCT hashtext(n) AS h FROM unnest($2::text[]) AS n ORDER BY 1) AS k`
)

// sqlInsertSignals stores a batch of signals; a signal whose name and
// instance id are stored already (or come earlier in the batch) is left
// out of the returned rows: a duplicate.
const sqlInsertSignals = `
INSERT INTO signal_instance (name, instance_id, request_id, params, payload, request_time)
SELECT n, i, NULLIF(r, ''), p, l, coalesce(t, now())
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::timestamptz[]) AS x(n, i, r, p, l, t)
ON CONFLICT (name, instance_id) DO NOTHING
RETURNING seq, name, instance_id, request_time, create_time`

const signalColumns = `seq, name, instance_id, params, payload, COALESCE(request_id, ''), request_time, create_time`

// sqlSignalsByKey reads stored signals by name and instance id.
const sqlSignalsByKey = `SELECT ` + signalColumns + ` FROM signal_instance
WHERE (name, instance_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

const sqlSignalBySeq = `SELECT ` + signalColumns + ` FROM signal_instance WHERE name = $1 AND seq = $2`

// sqlSignalsBySeq reads signals by seq.
const sqlSignalsBySeq = `SELECT ` + signalColumns + ` FROM signal_instance WHERE seq = ANY($1::bigint[])`

// sqlSignalsBefore pages through the signals of a name, newest first.
const sqlSignalsBefore = `SELECT ` + signalColumns + ` FROM signal_instance
WHERE name = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`

// sqlWaiters finds the attempts still waiting for any of a set of signal
// names, with the names each waits for. Rows of attempts that ended while
// waiting (stopped, timed out) are closed on the way, so the index only
// ever holds live waiters.
const sqlWaiters = `
WITH candidate AS (
    SELECT w.workflow_id, w.instance_id, w.run_id, w.step_id, w.attempt_id, w.group_id, w.signal_names, s.status
    FROM step_signal_wait w
    LEFT JOIN step_instance s USING (workflow_id, instance_id, run_id, step_id, attempt_id)
    WHERE w.signal_names && $1::text[] AND w.done_time IS NULL),
closed AS (
    UPDATE step_signal_wait w SET done_time = now() FROM candidate c
    WHERE (w.workflow_id, w.instance_id, w.run_id, w.step_id, w.attempt_id) =
          (c.workflow_id, c.instance_id, c.run_id, c.step_id, c.attempt_id)
      AND c.status = ANY ($2::text[]))
SELECT workflow_id, instance_id, run_id, step_id, group_id, signal_names FROM candidate
WHERE status = 'WAITING_FOR_SIGNALS'`

// endedStatuses are the step statuses after which an attempt never waits
// again.
var endedStatuses = []string{
	"SUCCEEDED", "COMPLETED_WITH_ERROR", "UNSATISFIED", "SKIPPED", "DISABLED", "FATALLY_FAILED",
	"INTERNALLY_FAILED", "STOPPED", "TIMED_OUT", "USER_FAILED", "PLATFORM_FAILED", "TIMEOUT_FAILED",
}

// sqlRegister records an attempt as waiting (or finds it recorded) and
// returns when it began and whether its dependencies were bypassed.
const sqlRegister = `
INSERT INTO step_signal_wait (workflow_id, instance_id, run_id, step_id, attempt_id, group_id, signal_names)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (workflow_id, instance_id, run_id, step_id, attempt_id)
    DO UPDATE SET group_id = EXCLUDED.group_id, signal_names = EXCLUDED.signal_names
RETURNING create_time, COALESCE(bypassed_by, '')`

// sqlDone closes a wait with the signals that met it, and records them as
// the attempt's UNBLOCKED lineage (replacing any an earlier check wrote
// before a crash).
const sqlDone = `
WITH done AS (
    UPDATE step_signal_wait SET done_time = now(), matched = $6
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5
    RETURNING 1),
gone AS (
    DELETE FROM signal_lineage WHERE kind = 'UNBLOCKED'
      AND workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5)
INSERT INTO signal_lineage (seq, signal_name, kind, workflow_id, instance_id, run_id, step_id, attempt_id, position)
SELECT (m.e->>'seq_id')::bigint, m.e->>'name', 'UNBLOCKED', $1, $2, $3, $4, $5, (m.pos - 1)::integer
FROM done, jsonb_array_elements($6::jsonb) WITH ORDINALITY AS m(e, pos)
WHERE m.e ? 'seq_id'
ON CONFLICT DO NOTHING`

// sqlMatched reads what a closed wait recorded per dependency.
const sqlMatched = `
SELECT COALESCE(matched, '[]'::jsonb) FROM step_signal_wait
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5`

// sqlBypass records a bypass, only while the attempt is waiting: its wait
// is open (its dependencies were not found met) and its row says so.
const sqlBypass = `
UPDATE step_signal_wait w SET bypassed_by = $6, bypass_time = now()
WHERE w.workflow_id = $1 AND w.instance_id = $2 AND w.run_id = $3 AND w.step_id = $4 AND w.attempt_id = $5
  AND w.bypassed_by IS NULL AND w.done_time IS NULL
  AND EXISTS (SELECT 1 FROM step_instance s
      WHERE (s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id) =
            (w.workflow_id, w.instance_id, w.run_id, w.step_id, w.attempt_id)
        AND s.status = 'WAITING_FOR_SIGNALS')`

// OutputsSQL is the fragment of the statement that writes a step
// attempt's terminal state (engine/flow) which announces the attempt's
// output signals in that same statement: a data-modifying CTE per table,
// reading the step write's CTE "w" (one row when the step write happened,
// none when it was refused) and the outputs as a JSON array of Output
// rows in parameter $N (see OutputsSQLAt). It stores the signals
// (deduplicated by name and instance id), marks them for the broker to
// match after the commit (signal_pending) and records their PRODUCED
// lineage. It begins with a comma: it follows the step write's CTE.
const OutputsSQL = `,
signal_out AS (
    INSERT INTO signal_instance (name, instance_id, request_id, params, payload)
    SELECT o.name, o.instance_id, o.instance_id, o.params, o.payload
    FROM w CROSS JOIN jsonb_to_recordset($N::jsonb) AS o(name text, instance_id text, params jsonb, payload jsonb)
    ON CONFLICT (name, instance_id) DO NOTHING
    RETURNING seq, name, instance_id),
signal_out_pending AS (
    INSERT INTO signal_pending (seq, name) SELECT seq, name FROM signal_out),
signal_out_lineage AS (
    INSERT INTO signal_lineage (seq, signal_name, kind, workflow_id, instance_id, run_id, step_id, attempt_id, position)
    SELECT s.seq, s.name, 'PRODUCED', o.workflow_id, o.workflow_instance_id, o.workflow_run_id, o.step_id,
        o.step_attempt_id, o.position
    FROM signal_out s JOIN jsonb_to_recordset($N::jsonb) AS o(name text, instance_id text, workflow_id text,
        workflow_instance_id bigint, workflow_run_id bigint, step_id text, step_attempt_id bigint, position integer)
      ON o.name = s.name AND o.instance_id = s.instance_id)
`

// Pending: claim signals not matched yet, oldest first, deleting their
// rows in the transaction that matches them.
//
// A signal a run of a paused backfill produced (with downstream) is held:
// the backfill's downstream is paused with it, and the signal is matched
// once it is resumed (docs/backfill.md).
const sqlClaimPending = `
DELETE FROM signal_pending WHERE seq IN (
    SELECT p.seq FROM signal_pending p WHERE p.create_time <= now() - $2::interval
      AND NOT EXISTS (SELECT 1 FROM signal_lineage l
          JOIN workflow_instance w ON w.workflow_id = l.workflow_id AND w.instance_id = l.instance_id AND w.run_id = l.run_id
          JOIN backfill b ON b.backfill_id = w.initiator->>'backfill_id'
          WHERE l.seq = p.seq AND l.kind = 'PRODUCED' AND w.initiator ? 'backfill_id'
            AND b.status = 'PAUSED' AND b.downstream)
    ORDER BY p.seq LIMIT $1 FOR UPDATE OF p SKIP LOCKED)
RETURNING seq`

const sqlCountPending = `SELECT count(*) FROM signal_pending`

// Lineage reads: of a signal, and of a run (or one step of it).
const lineageColumns = `l.seq, l.signal_name, l.kind, l.workflow_id, l.instance_id, l.run_id, l.step_id, l.attempt_id,
    l.position, l.trigger_uuid::text, l.create_time`

const sqlLineageOfSignal = `SELECT ` + lineageColumns + ` FROM signal_lineage l
WHERE l.seq = $1 ORDER BY l.kind, l.workflow_id, l.instance_id, l.run_id, l.step_id, l.attempt_id, l.position`

const sqlLineageOfRun = `SELECT ` + lineageColumns + ` FROM signal_lineage l
WHERE l.workflow_id = $1 AND l.instance_id = $2 AND l.run_id = $3 AND ($4 = '' OR l.step_id = $4)
ORDER BY l.step_id, l.attempt_id, l.kind, l.position, l.seq`

// sqlInsertStarted records the STARTED lineage of runs a trigger started.
const sqlInsertStarted = `
INSERT INTO signal_lineage (seq, signal_name, kind, workflow_id, instance_id, run_id, trigger_uuid)
SELECT s, n, 'STARTED', w, i, 1, u FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::uuid[])
    AS x(s, n, w, i, u)
ON CONFLICT DO NOTHING`

// Signals deferred while triggers are paused (maestro ops triggers pause).
const sqlDeferTriggers = `INSERT INTO signal_trigger_deferred (seq) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING`

const sqlClaimDeferred = `
DELETE FROM signal_trigger_deferred WHERE seq IN (
    SELECT seq FROM signal_trigger_deferred ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING seq`

// sqlProducers reads the runs that produced signal instances.
const sqlProducers = `SELECT DISTINCT ON (seq) seq, workflow_id, instance_id, run_id FROM signal_lineage
WHERE kind = 'PRODUCED' AND seq = ANY($1::bigint[]) ORDER BY seq, workflow_id, instance_id, run_id`
