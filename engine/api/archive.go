package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/engine/wire"
)

// archivedInstance answers GET of a run the database no longer holds from
// the archive (docs/operations.md, "Retention and archival"): Maestro's
// WorkflowInstance of the run as it was archived, with "archived": true and
// the archive object's key; without the aggregated view of the instance's
// runs, which the archive does not keep. notFound is the database's answer,
// returned when the archive does not hold the run either.
func (s *Server) archivedInstance(w http.ResponseWriter, r *http.Request, workflowID string, iid, run int64, notFound error) error {
	got, err := s.cfg.Archive.Lookup(r.Context(), workflowID, iid, run)
	if errors.Is(err, retention.ErrNotArchived) {
		return notFound
	}
	if err != nil {
		return err
	}
	inst, err := got.Record.Instance()
	if err != nil {
		return err
	}
	view, err := instanceView(inst)
	if err != nil {
		return err
	}
	body, err := markArchived(view, got)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// markArchived is v's JSON with "archived": true, "archive_key" and
// "archived_at" (epoch milliseconds) added.
func markArchived(v any, got *retention.Archived) (map[string]json.RawMessage, error) {
	raw, err := wire.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("render archived run: %w", err)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("render archived run: %w", err)
	}
	out["archived"] = json.RawMessage("true")
	key, err := json.Marshal(got.Key)
	if err != nil {
		return nil, err
	}
	out["archive_key"] = key
	out["archived_at"] = json.RawMessage(strconv.FormatInt(got.Record.ArchivedAt.UnixMilli(), 10))
	return out, nil
}

// getArchivedRun answers the archive's whole record of a run (the run,
// every step attempt with its timeline, signal waits, lineage, signals,
// output data), marked "archived": true: the latest archived run of the
// instance, or run ?run=N. 404 when the archive does not hold it (or no
// archive is configured).
func (s *Server) getArchivedRun(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	var run int64
	if q := r.URL.Query().Get("run"); q != "" {
		if run, err = strconv.ParseInt(q, 10, 64); err != nil || run < 1 {
			return badRequest(fmt.Sprintf("run must be a positive integer, got %q", q))
		}
	}
	if s.cfg.Archive == nil {
		return notFound("this deployment has no run archive")
	}
	got, err := s.cfg.Archive.Lookup(r.Context(), r.PathValue("id"), iid, run)
	if err != nil {
		return err
	}
	body, err := markArchived(got.Record, got)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
