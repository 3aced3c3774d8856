// Package temporal holds the Temporal side of issue 18's comparison: the
// counterparts of engine/flow's BenchmarkStepLaunchOverhead and
// BenchmarkThroughput, run against a Temporal dev server on this machine
// with NoOp work (an activity that returns at once). It is a module of its
// own so that the engine's module never depends on the Temporal SDK.
//
// The benchmarks need a running dev server; `make bench-temporal`
// (.ci/bench-temporal) starts one, runs them, stops it, then runs the
// engine's counterparts in the same sitting and writes
// build/bench/temporal.md. Without a server the benchmarks skip. They read:
//
//   - TEMPORAL_BENCH_ADDRESS: the dev server's frontend, host:port;
//   - TEMPORAL_BENCH_SERVER: how that server was started, "default" or
//     "tuned" (it selects the configurations run against it);
//   - TEMPORAL_BENCH_SERVER_PID: the server's process, whose CPU is counted.
//
// Configurations (sub-benchmark config=NAME):
//
//   - default: SDK and dev server defaults, regular activities.
//   - tuned-eager: regular activities (each step's completion written to
//     history before the next is scheduled, as the engine writes each
//     step), against a dev server started with tuned_flags in
//     .ci/bench-temporal: eager activity execution (the SDK requests it by
//     default, the server allows it only when told), task queues of one
//     partition (with the default four, a task on a partition without a
//     poller is forwarded at most 10 times a second), the one history
//     shard's queues read up to 1,000 times a second instead of 20, SQLite
//     in write-ahead-log mode (still synchronous=FULL: every commit
//     fsynced), frontend rate limits raised; in the worker, eager workflow
//     start and 8 workflow and 8 activity task pollers.
//   - tuned: the same, with local activities: the worker runs a workflow
//     task's steps one after another in process and records them as markers
//     when the workflow task completes, so a step's completion is not
//     durable before the next step starts (a crash runs them again).
package temporal
