package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/wire"
)

// Managed backfills (docs/backfill.md): create, read, list and act. The
// engine's driver starts the runs.

func (s *Server) backfillRoutes() {
	s.handle("POST /api/v3/workflows/{id}/backfills", s.createBackfill)
	s.handle("GET /api/v3/workflows/{id}/backfills", s.listBackfills)
	s.handle("GET /api/v3/backfills/{backfill_id}", s.getBackfill)
	s.handle("POST /api/v3/backfills/{backfill_id}/actions/{action}", s.actOnBackfill)
}

func (s *Server) backfills() *backfill.Store {
	return backfill.NewStore(s.cfg.DB, s.cfg.Definitions, s.cfg.Runs)
}

// backfillBody is the body of POST /api/v3/workflows/{id}/backfills. From,
// to and values may be JSON strings or numbers (20240101); version a
// number or a selector ("active", "latest").
type backfillBody struct {
	Version     json.RawMessage   `json:"version"`
	Param       string            `json:"param"`
	From        json.RawMessage   `json:"from"`
	To          json.RawMessage   `json:"to"`
	Interval    string            `json:"interval"`
	Values      []json.RawMessage `json:"values"`
	Format      string            `json:"format"`
	Concurrency int               `json:"concurrency"`
	Order       string            `json:"order"`
	Downstream  bool              `json:"downstream"`
	Rerun       bool              `json:"rerun"`
	RequestID   string            `json:"request_id"`
	// Incremental walks snapshot ranges of an incremental workflow's
	// table instead of param values (docs/incremental.md).
	Incremental *wire.BackfillIncremental `json:"incremental"`
}

// scalarText reads a JSON string or integer as text; field names it in the
// error.
func scalarText(raw json.RawMessage, field string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return str, nil
	}
	var n json.Number
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return n.String(), nil
		}
	}
	return "", badRequest(field + " must be a string or an integer")
}

func (s *Server) createBackfill(w http.ResponseWriter, r *http.Request) error {
	var body backfillBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	req := backfill.CreateRequest{WorkflowID: r.PathValue("id"), Param: body.Param, Concurrency: body.Concurrency,
		Downstream: body.Downstream, Rerun: body.Rerun, RequestID: body.RequestID, Caller: CallerFrom(r.Context()),
		Spec: backfill.Spec{Interval: body.Interval, Format: body.Format, Order: body.Order}}
	var err error
	if req.Version, err = scalarText(body.Version, "version"); err != nil {
		return err
	}
	if req.Spec.From, err = scalarText(body.From, "from"); err != nil {
		return err
	}
	if req.Spec.To, err = scalarText(body.To, "to"); err != nil {
		return err
	}
	if i := body.Incremental; i != nil {
		req.Spec.Incremental = &backfill.IncrementalSpec{Table: i.Table, FromSnapshotID: i.FromSnapshotID,
			ToSnapshotID: i.ToSnapshotID, FromDate: i.FromDate, ToDate: i.ToDate, SnapshotsPerRun: i.SnapshotsPerRun,
			ResetWatermark: i.ResetWatermark}
	}
	for _, v := range body.Values {
		text, err := scalarText(v, "each of values")
		if err != nil {
			return err
		}
		req.Spec.Values = append(req.Spec.Values, text)
	}
	b, dup, err := s.backfills().Create(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.BackfillCreated{BackfillID: b.ID, WorkflowID: b.WorkflowID, WorkflowVersion: b.Version,
		Partitions: b.Partitions, Status: string(b.Status), Duplicated: dup})
	return nil
}

func (s *Server) getBackfill(w http.ResponseWriter, r *http.Request) error {
	d, err := s.backfills().Get(r.Context(), r.PathValue("backfill_id"))
	if err != nil {
		return err
	}
	out := backfillView(&d.Backfill)
	counts := d.Counts
	out.Counts = &counts
	out.Partitions = make([]wire.BackfillPartition, len(d.Partitions))
	for i, p := range d.Partitions {
		out.Partitions[i] = wire.BackfillPartition{Value: p.Value, WorkflowInstanceID: p.InstanceID, WorkflowRunID: p.RunID,
			Status: p.Status, Attempt: p.Attempt}
	}
	ds := make(map[string]*wire.BackfillDownstream, len(d.Downstream))
	for wf, x := range d.Downstream {
		v := &wire.BackfillDownstream{Counts: x.Counts, Runs: make([]wire.BackfillRun, len(x.Runs))}
		for i, run := range x.Runs {
			v.Runs[i] = wire.BackfillRun{WorkflowInstanceID: run.InstanceID, WorkflowRunID: run.RunID, Status: run.Status}
		}
		ds[wf] = v
	}
	out.Downstream = &ds
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listBackfills(w http.ResponseWriter, r *http.Request) error {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be a number from 1 to 1000")
		}
		limit = n
	}
	wf := r.PathValue("id")
	if _, err := s.cfg.Definitions.Access(r.Context(), wf); err != nil {
		return err
	}
	bs, err := s.backfills().List(r.Context(), wf, limit)
	if err != nil {
		return err
	}
	out := wire.BackfillList{Backfills: make([]wire.Backfill, len(bs))}
	for i, b := range bs {
		out.Backfills[i] = backfillView(b)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) actOnBackfill(w http.ResponseWriter, r *http.Request) error {
	a, ok := backfill.ParseAction(r.PathValue("action"))
	if !ok {
		return notFound("no backfill action " + strconv.Quote(r.PathValue("action")) + "; the actions are pause, resume, cancel and retry")
	}
	b, err := s.backfills().Act(r.Context(), r.PathValue("backfill_id"), a, CallerFrom(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, backfillView(b))
	return nil
}

// backfillView is a backfill without its partitions.
func backfillView(b *backfill.Backfill) wire.Backfill {
	var inc *wire.BackfillIncremental
	if i := b.Spec.Incremental; i != nil {
		inc = &wire.BackfillIncremental{Table: i.Table, FromSnapshotID: i.FromSnapshotID, ToSnapshotID: i.ToSnapshotID,
			FromDate: i.FromDate, ToDate: i.ToDate, SnapshotsPerRun: i.SnapshotsPerRun, ResetWatermark: i.ResetWatermark}
	}
	return wire.Backfill{Incremental: inc, BackfillID: b.ID, WorkflowID: b.WorkflowID, WorkflowVersion: b.Version, Status: string(b.Status),
		Param: b.Param, ParamType: string(b.ParamType), Format: b.Format, From: b.Spec.From, To: b.Spec.To,
		Interval: b.Spec.Interval, Values: b.Spec.Values, Order: b.Spec.Order, Concurrency: b.Concurrency,
		DownstreamEnabled: b.Downstream, Rerun: b.Rerun, RequestID: b.RequestID, CreatedBy: b.CreatedBy,
		PartitionCount: b.Partitions, CreateTime: wire.Millis(b.CreateTime), ModifyTime: wire.Millis(b.ModifyTime),
		EndTime: wire.MillisPtr(b.EndTime)}
}

// backfillInPath finds the workflow of the backfill in the path: acting
// on a backfill acts on that workflow's runs.
func backfillInPath(s *Server, r *http.Request) (authz.Target, *http.Request, error) {
	b, err := s.backfills().Backfill(r.Context(), r.PathValue("backfill_id"))
	if err != nil {
		return authz.Target{}, r, err
	}
	t, err := s.workflowTarget(r.Context(), b.WorkflowID)
	return t, r, err
}
