package instance

import (
	"strconv"
	"strings"
)

// Inline runs (the iterations of foreach and while steps) have workflow
// ids that extend the pushed workflow's id with ':' parts ("wf:1:loop",
// "wf:loop"); a pushed workflow id never contains ':'.

// RootWorkflowID is the pushed workflow a run belongs to: the part of its
// workflow id before the first ':'.
func RootWorkflowID(workflowID string) string {
	root, _, _ := strings.Cut(workflowID, ":")
	return root
}

// ForeachWorkflowID is the workflow id of the iterations of a foreach step
// of one parent instance.
func ForeachWorkflowID(workflowID string, instanceID int64, stepID string) string {
	return workflowID + ":" + strconv.FormatInt(instanceID, 10) + ":" + stepID
}

// OfWorkflowSQL holds for a row whose workflow_id column is workflow $1's
// or one of its inline runs': a range of any index on workflow_id, exact
// because workflow_id columns compare byte-wise (COLLATE "C", migration
// 00010, checked by a test), where ';' sorts right after ':'.
const OfWorkflowSQL = `(workflow_id = $1 OR (workflow_id > $1 || ':' AND workflow_id < $1 || ';'))`
