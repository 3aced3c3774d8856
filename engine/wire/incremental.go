package wire

// The bodies of the incremental endpoints (docs/incremental.md), this
// API's own: Maestro has no incremental trigger.

// Watermark is one (workflow, table)'s watermark.
type Watermark struct {
	Table       string `json:"table"`
	TriggerUUID string `json:"trigger_uuid,omitempty"`
	// SnapshotID and CommitTime (epoch ms) are the last snapshot a
	// SUCCEEDED run covered; 0 when none has.
	SnapshotID int64 `json:"snapshot_id"`
	CommitTime int64 `json:"commit_time"`
	// LatestSnapshotID and LatestCommitTime are the newest change
	// received.
	LatestSnapshotID int64 `json:"latest_snapshot_id"`
	LatestCommitTime int64 `json:"latest_commit_time"`
	// InFlightInstanceID is the run covering the range after the
	// watermark, absent when none.
	InFlightInstanceID *int64 `json:"inflight_instance_id,omitempty"`
	// PendingChanges counts the changes received after the watermark.
	PendingChanges int64 `json:"pending_changes"`
	RunsStarted    int64 `json:"runs_started"`
	ModifyTime     int64 `json:"modify_time"`
}

// RunRange is the range of snapshots one run covers.
type RunRange struct {
	WorkflowInstanceID int64  `json:"workflow_instance_id"`
	Table              string `json:"table"`
	FromSnapshotID     int64  `json:"from_snapshot_id"`
	ToSnapshotID       int64  `json:"to_snapshot_id"`
	FromCommitTime     int64  `json:"from_commit_time"`
	ToCommitTime       int64  `json:"to_commit_time"`
	SnapshotCount      int64  `json:"snapshot_count"`
	HasOverwrite       bool   `json:"has_overwrite"`
	HasDelete          bool   `json:"has_delete"`
	BackfillID         string `json:"backfill_id,omitempty"`
	// State is RUNNING until the run ends, then its terminal status.
	State      string `json:"state"`
	CreateTime int64  `json:"create_time"`
	EndTime    *int64 `json:"end_time,omitempty"`
}

// Watermarks answers GET /api/v3/workflows/{id}/watermarks: the
// workflow's watermarks by table and the ranges of its latest runs,
// newest first.
type Watermarks struct {
	WorkflowID string      `json:"workflow_id"`
	Watermarks []Watermark `json:"watermarks"`
	Runs       []RunRange  `json:"runs"`
}

// WatermarkReset is the body of POST /api/v3/workflows/{id}/watermarks/reset:
// the watermark of Table moves to SnapshotID (0: the table's beginning).
// CommitTime (epoch ms) is needed only for a snapshot no change announced.
type WatermarkReset struct {
	Table      string `json:"table"`
	SnapshotID *int64 `json:"snapshot_id"`
	CommitTime *int64 `json:"commit_time,omitempty"`
}
