package incremental

import (
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// The run params of an incremental run (docs/incremental.md).
const (
	ParamTable              = "table"
	ParamFromSnapshotID     = "from_snapshot_id"
	ParamToSnapshotID       = "to_snapshot_id"
	ParamFromCommitTime     = "from_commit_time"
	ParamToCommitTime       = "to_commit_time"
	ParamHasOverwrite       = "has_overwrite"
	ParamHasDelete          = "has_delete"
	ParamSnapshotCount      = "snapshot_count"
	ParamAddedFiles         = "added_files"
	ParamAddedFilesCount    = "added_files_count"
	ParamAddedRecords       = "added_records"
	ParamAddedFilesManifest = "added_files_manifest"
)

// MaxAddedFiles bounds the added_files param; a range that added more
// hands its run a manifest (added_files_manifest) with all of them.
const MaxAddedFiles = 1000

// Added is what a table reader found a range added, for the added_*
// params.
type Added struct {
	Files []tablechange.DataFile
	// Manifest is the s3:// URI of the JSON manifest of every file, set
	// when there are more than MaxAddedFiles.
	Manifest string
}

// RunParams are the params of the run that covers p: the table, the range
// and what the received changes say of it, and when added is not nil, the
// files the range added.
func RunParams(p Planned, added *Added) workflow.Params {
	lit := workflow.LiteralParam
	ps := workflow.Params{
		ParamTable:          lit(workflow.ParamTypeString, p.Table),
		ParamFromSnapshotID: lit(workflow.ParamTypeLong, p.FromSnapshotID),
		ParamToSnapshotID:   lit(workflow.ParamTypeLong, p.ToSnapshotID),
		ParamFromCommitTime: lit(workflow.ParamTypeLong, fromCommitTime(p)),
		ParamToCommitTime:   lit(workflow.ParamTypeLong, p.ToCommitTime),
		ParamHasOverwrite:   lit(workflow.ParamTypeBoolean, p.HasOverwrite),
		ParamHasDelete:      lit(workflow.ParamTypeBoolean, p.HasDelete),
		ParamSnapshotCount:  lit(workflow.ParamTypeLong, p.SnapshotCount),
	}
	if added == nil {
		return ps
	}
	var records int64
	paths := make([]any, 0, min(len(added.Files), MaxAddedFiles))
	for i, f := range added.Files {
		records += f.Records
		if i < MaxAddedFiles {
			paths = append(paths, f.Path)
		}
	}
	ps[ParamAddedFiles] = lit(workflow.ParamTypeStringArray, paths)
	ps[ParamAddedFilesCount] = lit(workflow.ParamTypeLong, int64(len(added.Files)))
	ps[ParamAddedRecords] = lit(workflow.ParamTypeLong, records)
	ps[ParamAddedFilesManifest] = lit(workflow.ParamTypeString, added.Manifest)
	return ps
}

// fromCommitTime is 0 for a range from the table's beginning.
func fromCommitTime(p Planned) int64 {
	if p.FromSnapshotID == 0 {
		return 0
	}
	return p.FromCommitTime
}

// Initiator is the "incremental" object of an incremental run's
// initiator: the range, which the engine reads back to end it and the
// run's events carry.
func Initiator(p Planned) map[string]any {
	return map[string]any{
		ParamTable:          p.Table,
		ParamFromSnapshotID: p.FromSnapshotID,
		ParamToSnapshotID:   p.ToSnapshotID,
		ParamFromCommitTime: fromCommitTime(p),
		ParamToCommitTime:   p.ToCommitTime,
	}
}
