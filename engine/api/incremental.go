package api

import (
	"net/http"
	"strconv"

	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/wire"
)

// The incremental endpoints (docs/incremental.md): a workflow's
// watermarks and the ranges its runs covered, and moving a watermark by
// hand.
func (s *Server) incrementalRoutes() {
	s.handle("GET /api/v3/workflows/{id}/watermarks", s.listWatermarks)
	s.handle("POST /api/v3/workflows/{id}/watermarks/reset", s.resetWatermark)
}

// Range list limits of GET .../watermarks (?limit=).
const (
	defaultRangeLimit = 20
	maxRangeLimit     = 1000
)

func (s *Server) listWatermarks(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ok, err := s.cfg.Definitions.Exists(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("workflow " + id + " does not exist")
	}
	limit := defaultRangeLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRangeLimit {
			return badRequest("limit must be an integer from 1 to " + strconv.Itoa(maxRangeLimit))
		}
		limit = n
	}
	table := r.URL.Query().Get("table")
	ws, err := incremental.List(r.Context(), s.cfg.DB, id)
	if err != nil {
		return err
	}
	rs, err := incremental.Runs(r.Context(), s.cfg.DB, id, table, limit)
	if err != nil {
		return err
	}
	out := wire.Watermarks{WorkflowID: id, Watermarks: make([]wire.Watermark, 0, len(ws)), Runs: make([]wire.RunRange, 0, len(rs))}
	for _, x := range ws {
		if table != "" && x.Table != table {
			continue
		}
		out.Watermarks = append(out.Watermarks, watermarkView(x))
	}
	for _, x := range rs {
		out.Runs = append(out.Runs, RangeView(x))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) resetWatermark(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var body wire.WatermarkReset
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	switch {
	case body.Table == "":
		return badRequest("table is required")
	case body.SnapshotID == nil:
		return badRequest("snapshot_id is required (0: the table's beginning)")
	case *body.SnapshotID < 0:
		return badRequest("snapshot_id must not be negative")
	case body.CommitTime != nil && *body.CommitTime < 0:
		return badRequest("commit_time must not be negative")
	}
	ok, err := s.cfg.Definitions.Exists(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("workflow " + id + " does not exist")
	}
	wm, err := incremental.Reset(r.Context(), s.cfg.DB, incremental.Key{WorkflowID: id, Table: body.Table}, *body.SnapshotID, body.CommitTime)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, watermarkView(wm))
	return nil
}

func watermarkView(x incremental.Watermark) wire.Watermark {
	return wire.Watermark{Table: x.Table, TriggerUUID: x.TriggerUUID, SnapshotID: x.SnapshotID, CommitTime: x.CommitTime,
		LatestSnapshotID: x.LatestSnapshotID, LatestCommitTime: x.LatestCommitTime, InFlightInstanceID: x.InFlight,
		PendingChanges: x.Pending, RunsStarted: x.RunsStarted, ModifyTime: x.ModifyTime.UnixMilli()}
}

// RangeView is a run's range as the API renders it.
func RangeView(x incremental.RunRange) wire.RunRange {
	v := wire.RunRange{WorkflowInstanceID: x.InstanceID, Table: x.Table, FromSnapshotID: x.FromSnapshotID,
		ToSnapshotID: x.ToSnapshotID, FromCommitTime: x.FromCommitTime, ToCommitTime: x.ToCommitTime,
		SnapshotCount: x.SnapshotCount, HasOverwrite: x.HasOverwrite, HasDelete: x.HasDelete, BackfillID: x.BackfillID,
		State: x.State, CreateTime: x.CreateTime.UnixMilli()}
	if x.EndTime != nil {
		ms := x.EndTime.UnixMilli()
		v.EndTime = &ms
	}
	return v
}
