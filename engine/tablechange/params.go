package tablechange

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The names of a table-change signal's params (docs/incremental.md).
const (
	ParamCatalog          = "catalog"
	ParamNamespace        = "namespace"
	ParamTable            = "table"
	ParamSnapshotID       = "snapshot_id"
	ParamParentSnapshotID = "parent_snapshot_id"
	ParamCommitTime       = "commit_time"
	ParamOperation        = "operation"
)

// SignalParams renders the change as a table-change signal's params:
// catalog, namespace and table (the TableRef's string) as STRING,
// snapshot_id, parent_snapshot_id (0 when none) and commit_time (epoch
// milliseconds) as LONG, and operation as STRING.
func (c Change) SignalParams() map[string]any {
	return map[string]any{
		ParamCatalog:          c.Table.Catalog,
		ParamNamespace:        c.Table.Namespace,
		ParamTable:            c.Table.String(),
		ParamSnapshotID:       c.SnapshotID,
		ParamParentSnapshotID: c.ParentSnapshotID,
		ParamCommitTime:       c.CommitTime.UnixMilli(),
		ParamOperation:        string(c.Operation),
	}
}

// ChangeFromSignalParams reads a table-change signal's params back into a
// Change: what SignalParams writes, as a stored signal holds it (LONGs as
// int64, json.Number, int or an integral float64; commit_time may also be
// an RFC 3339 string). table is required and is the TableRef's string;
// catalog and namespace, when present and not empty, must agree with it
// (a table without a namespace takes the namespace param's). snapshot_id,
// commit_time and operation are required; parent_snapshot_id defaults to
// 0. Every problem is reported.
func ChangeFromSignalParams(params map[string]any) (Change, error) {
	var c Change
	var problems []error
	str := func(k string) (string, bool, error) {
		v, ok := params[k]
		if !ok || v == nil {
			return "", false, nil
		}
		s, isStr := v.(string)
		if !isStr {
			return "", true, fmt.Errorf("%s: want a STRING, got %T", k, v)
		}
		return s, true, nil
	}
	catalog, _, err := str(ParamCatalog)
	problems = append(problems, err)
	namespace, _, err := str(ParamNamespace)
	problems = append(problems, err)
	table, hasTable, err := str(ParamTable)
	problems = append(problems, err)
	switch {
	case err != nil:
	case !hasTable || strings.TrimSpace(table) == "":
		problems = append(problems, errors.New("table is required"))
	default:
		ref, perr := ParseTableRef(table)
		if perr != nil && namespace != "" && !strings.ContainsAny(table, "./") {
			ref, perr = TableRef{Catalog: catalog, Namespace: namespace, Table: table}, nil
		}
		switch {
		case perr != nil:
			problems = append(problems, perr)
		case namespace != "" && ref.Namespace != namespace:
			problems = append(problems, fmt.Errorf("namespace %q disagrees with table %q", namespace, table))
		case catalog != "" && ref.Catalog != catalog:
			problems = append(problems, fmt.Errorf("catalog %q disagrees with table %q", catalog, table))
		}
		c.Table = ref
	}
	if n, ok, err := long(params, ParamSnapshotID); err != nil {
		problems = append(problems, err)
	} else if !ok {
		problems = append(problems, errors.New("snapshot_id is required"))
	} else {
		c.SnapshotID = n
	}
	if n, _, err := long(params, ParamParentSnapshotID); err != nil {
		problems = append(problems, err)
	} else {
		c.ParentSnapshotID = n
	}
	if s, ok := params[ParamCommitTime].(string); ok {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			if ms, perr := strconv.ParseInt(s, 10, 64); perr == nil {
				t, err = time.UnixMilli(ms).UTC(), nil
			}
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("commit_time: want epoch milliseconds or RFC 3339: %w", err))
		}
		c.CommitTime = t.UTC()
	} else if n, ok, err := long(params, ParamCommitTime); err != nil {
		problems = append(problems, err)
	} else if !ok {
		problems = append(problems, errors.New("commit_time is required"))
	} else {
		c.CommitTime = time.UnixMilli(n).UTC()
	}
	op, hasOp, err := str(ParamOperation)
	switch {
	case err != nil:
		problems = append(problems, err)
	case !hasOp:
		problems = append(problems, errors.New("operation is required"))
	case !Operation(op).Valid():
		problems = append(problems, fmt.Errorf("operation %q: want append, overwrite, delete or replace", op))
	default:
		c.Operation = Operation(op)
	}
	if err := errors.Join(problems...); err != nil {
		return Change{}, fmt.Errorf("table-change params: %w", err)
	}
	if c.SnapshotID == c.ParentSnapshotID {
		return Change{}, fmt.Errorf("table-change params: snapshot_id %d is its own parent", c.SnapshotID)
	}
	return c, nil
}

// long reads an integer param; ok is false when it is absent.
func long(params map[string]any, k string) (n int64, ok bool, err error) {
	v, ok := params[k]
	if !ok || v == nil {
		return 0, false, nil
	}
	switch x := v.(type) {
	case int64:
		return x, true, nil
	case int:
		return int64(x), true, nil
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, true, fmt.Errorf("%s: %s is not a 64-bit integer", k, x)
		}
		return n, true, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, true, fmt.Errorf("%s: %v is not an exact integer", k, x)
		}
		return int64(x), true, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%s: %q is not a 64-bit integer", k, x)
		}
		return n, true, nil
	}
	return 0, true, fmt.Errorf("%s: want a LONG, got %T", k, v)
}
