// Package trigger keeps the trigger rows of workflows, time and signal,
// in step with each workflow's active version: one time_trigger row per
// time trigger (state, next fire time) and one signal_trigger row per
// signal trigger with a signal_subscription row per signal name it
// listens to. The definition store calls Sync and SyncSignals in the
// transaction of every change of a workflow's active version or
// properties, so the rows always follow the active version. The time
// trigger scheduler claims due rows (Claim) and advances them (AdvanceAll)
// in the transaction that starts their runs; the signal broker matches
// new signals against the subscriptions (signal_match.go). The SQL is in
// queries.go; docs/triggers.md and docs/signals.md draw the states.
//
// Everything that starts runs without a user lives under this directory:
//
//	engine/trigger               trigger rows: Sync, Claim, AdvanceAll, List (time);
//	                             SyncSignals, subscriptions, matching state (signal)
//	engine/trigger/schedule      cron (Unix and Quartz), predefined, interval, time
//	                             zones, fuzzy delay: a time trigger's fire times;
//	                             Maestro's trigger keys, uuids and request ids
//	engine/trigger/scheduler     fires due time triggers exactly once: claim, start
//	                             (execution's batch start), advance in one
//	                             transaction; maestro dev's loop and the Lambda's
//	                             handler
//	engine/trigger/signal        signal instances: instance id, validation, param
//	                             matching, lineage, the signal_instance SQL
//	engine/trigger/signalmsg     the signals queue's message shapes (Maestro signal
//	                             JSON, S3 events, table updates) into signal requests
//	engine/trigger/signalbroker  announces signals exactly once: stores them, wakes
//	                             waiting steps, starts one run per satisfied signal
//	                             trigger; the output-signal sweeper; incremental
//	                             triggers: a run per snapshot range, the sweep of
//	                             ranges owed (their watermark is engine/incremental)
//
// A trigger's definition (workflow.TimeTrigger, workflow.SignalTrigger) is
// part of the model, in engine/workflow. The Lambdas that drive this code
// are functions/timetrigger and functions/signals.
package trigger
