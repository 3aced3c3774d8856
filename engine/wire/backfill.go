package wire

// The bodies of the backfill endpoints (docs/backfill.md), this API's own:
// Maestro has no managed backfill.

// BackfillCreated answers POST /api/v3/workflows/{id}/backfills.
type BackfillCreated struct {
	BackfillID      string `json:"backfill_id"`
	WorkflowID      string `json:"workflow_id"`
	WorkflowVersion int64  `json:"workflow_version"`
	Partitions      int    `json:"partitions"`
	Status          string `json:"status"`
	// Duplicated: the request id had created this backfill already.
	Duplicated bool `json:"duplicated,omitempty"`
}

// Backfill is a backfill as GET /api/v3/backfills/{backfill_id} and the
// list and action endpoints answer it; the list and actions leave Counts,
// PartitionList and Downstream out.
type Backfill struct {
	BackfillID      string   `json:"backfill_id"`
	WorkflowID      string   `json:"workflow_id"`
	WorkflowVersion int64    `json:"workflow_version"`
	Status          string   `json:"status"`
	Param           string   `json:"param"`
	ParamType       string   `json:"param_type"`
	Format          string   `json:"format"`
	From            string   `json:"from,omitempty"`
	To              string   `json:"to,omitempty"`
	Interval        string   `json:"interval,omitempty"`
	Values          []string `json:"values,omitempty"`
	Order           string   `json:"order"`
	// Incremental is the snapshot range of a backfill over an incremental
	// workflow.
	Incremental *BackfillIncremental `json:"incremental,omitempty"`
	Concurrency int                  `json:"concurrency"`
	// DownstreamEnabled is the request's downstream flag (downstream is
	// the map of downstream runs).
	DownstreamEnabled bool   `json:"downstream_enabled"`
	Rerun             bool   `json:"rerun"`
	RequestID         string `json:"request_id,omitempty"`
	CreatedBy         string `json:"created_by,omitempty"`
	PartitionCount    int    `json:"partition_count"`
	CreateTime        int64  `json:"create_time"`
	ModifyTime        int64  `json:"modify_time"`
	EndTime           *int64 `json:"end_time,omitempty"`
	// Counts are the partitions by status: a started partition's run
	// status, else PENDING, SKIPPED or CANCELLED.
	// (Pointers: GET answers an empty map as {}, the list leaves it out.)
	Counts     *map[string]int                 `json:"counts,omitempty"`
	Partitions []BackfillPartition             `json:"partitions,omitempty"`
	Downstream *map[string]*BackfillDownstream `json:"downstream,omitempty"`
}

// BackfillPartition is one value of a backfill with its run.
type BackfillPartition struct {
	Value              string `json:"value"`
	WorkflowInstanceID *int64 `json:"workflow_instance_id"`
	WorkflowRunID      *int64 `json:"workflow_run_id,omitempty"`
	Status             string `json:"status"`
	Attempt            int    `json:"attempt,omitempty"`
}

// BackfillDownstream is what a backfill caused in one downstream workflow.
type BackfillDownstream struct {
	Runs   []BackfillRun  `json:"runs"`
	Counts map[string]int `json:"counts"`
}

// BackfillRun is a downstream run.
type BackfillRun struct {
	WorkflowInstanceID int64  `json:"workflow_instance_id"`
	WorkflowRunID      int64  `json:"workflow_run_id"`
	Status             string `json:"status"`
}

// BackfillList answers GET /api/v3/workflows/{id}/backfills.
type BackfillList struct {
	Backfills []Backfill `json:"backfills"`
}

// BackfillIncremental is the range of table snapshots a backfill over an
// incremental workflow walks instead of partition values
// (docs/incremental.md, "Backfill").
type BackfillIncremental struct {
	Table           string `json:"table"`
	FromSnapshotID  *int64 `json:"from_snapshot_id,omitempty"`
	ToSnapshotID    *int64 `json:"to_snapshot_id,omitempty"`
	FromDate        string `json:"from_date,omitempty"`
	ToDate          string `json:"to_date,omitempty"`
	SnapshotsPerRun int    `json:"snapshots_per_run,omitempty"`
	ResetWatermark  bool   `json:"reset_watermark,omitempty"`
}
