package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
	"github.com/maestro-aws/maestro/engine/wire"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// signalRoutes registers the signal endpoints (docs/signals.md).
func (s *Server) signalRoutes() {
	s.handle("POST /api/v3/signals", s.announceSignal)
	s.handle("POST /api/v3/signals/messages", s.announceMessage)
	s.handle("GET /api/v3/signals/{name}/instances", s.listSignals)
	s.handle("GET /api/v3/signals/{name}/instances/latest", s.latestSignal)
	s.handle("GET /api/v3/signals/{name}/instances/{seq}", s.getSignal)
	s.handle("GET /api/v3/signals/{name}/instances/{seq}/lineage", s.signalLineage)
	s.handle("GET /api/v3/workflows/{id}/signal-triggers", s.listSignalTriggers)
	s.handle("GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/signals", s.runSignals)
	s.handle("GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/signals", s.runSignals)
}

// The responses of the signal endpoints, each built in one place.

// signalView is a stored signal as Maestro's SignalInstance.
func signalView(sig *signal.Signal) *wire.SignalInstance {
	return &wire.SignalInstance{Name: sig.Name, SeqID: sig.Seq, InstanceID: sig.InstanceID,
		Params: sig.Params, Payload: sig.Payload, RequestID: sig.RequestID,
		RequestTime: wire.Millis(sig.RequestTime), CreateTime: wire.Millis(sig.CreateTime)}
}

// announcedJSON is one announcement's answer: Maestro's SignalInstance of
// the new signal, or of the one stored before ("duplicated": true).
func announcedJSON(r signalbroker.Result) *wire.SignalInstance {
	v := signalView(r.Signal)
	v.Duplicated = r.Duplicate
	return v
}

// signalViews are stored signals as Maestro's SignalInstances.
func signalViews(sigs []*signal.Signal) []*wire.SignalInstance {
	out := make([]*wire.SignalInstance, 0, len(sigs))
	for _, sig := range sigs {
		out = append(out, signalView(sig))
	}
	return out
}

// signalListJSON is a page of signal instances, newest first.
func signalListJSON(name string, sigs []*signal.Signal, next int64) map[string]any {
	out := map[string]any{"name": name, "signal_instances": signalViews(sigs)}
	if next > 0 {
		out["next_before"] = next
	}
	return out
}

// lineageJSON is the lineage of a signal instance or of a run (or step).
func lineageJSON(key string, of any, ls []signal.Lineage) map[string]any {
	if ls == nil {
		ls = []signal.Lineage{}
	}
	return map[string]any{key: of, "lineage": ls}
}

// announceSignal answers Maestro's SignalInstance: the new one, or the one
// stored before when the signal was announced before (same name and
// instance id: the request id, or else the name and params, as in
// Maestro), with "duplicated": true.
func (s *Server) announceSignal(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := signalmsg.DecodeSignal(data)
	if err != nil {
		return badRequest("malformed request body", err.Error())
	}
	res, _, err := s.signals.Announce(r.Context(), []signal.Request{req})
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	writeJSON(w, http.StatusOK, announcedJSON(res[0]))
	return nil
}

// announceMessage reads one message as the signals queue would carry it
// (Maestro signal JSON, an S3 event notification, a table update, or one
// of these in an SNS or EventBridge envelope; docs/signals.md) and
// announces the signals it holds, as the signals Lambda does: 200 with
// each signal's answer (none for an S3 event no rule takes).
func (s *Server) announceMessage(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	reqs, err := s.messages.ParseContext(r.Context(), data)
	if errors.Is(err, signalmsg.ErrUnreadable) {
		return badRequest("unreadable signal message", err.Error())
	}
	if err != nil {
		return fmt.Errorf("read the signal message: %w", err)
	}
	res, _, err := s.signals.Announce(r.Context(), reqs)
	if err != nil {
		return err
	}
	out := make([]*wire.SignalInstance, 0, len(res))
	var problems []string
	for i, x := range res {
		if x.Err != nil {
			problems = append(problems, fmt.Sprintf("signal %d (%s): %v", i, reqs[i].Name, x.Err))
			continue
		}
		out = append(out, announcedJSON(x))
	}
	if len(problems) > 0 {
		return badRequest("the message holds invalid signals; none was announced", problems...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"signals": out})
	return nil
}

// Limits of a signal list.
const (
	defaultSignalPage = 20
	maxSignalPage     = 200
)

// listSignals answers a page of a name's signal instances, newest first:
// ?limit (default 20, at most 200), ?before (a seq id: older ones), and
// ?param filters, each "<param><op><value>" with op one of =, <, <=, >, >=
// (a value that is an integer compares as a LONG, else as a STRING), all
// of which an instance must satisfy.
func (s *Server) listSignals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := defaultSignalPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSignalPage {
			return badRequest(fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", maxSignalPage, v))
		}
		limit = n
	}
	var before int64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return badRequest("before must be a positive seq id, got " + strconv.Quote(v))
		}
		before = n
	}
	var filters []signal.Match
	for _, f := range q["param"] {
		m, err := parseFilter(f)
		if err != nil {
			return badRequest("param: " + err.Error())
		}
		filters = append(filters, m)
	}
	name := r.PathValue("name")
	sigs, next, err := signal.NewStore(s.cfg.DB).List(r.Context(), name, before, limit, filters)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signalListJSON(name, sigs, next))
	return nil
}

// parseFilter reads "<param><op><value>".
func parseFilter(f string) (signal.Match, error) {
	i := strings.IndexAny(f, "=<>")
	if i <= 0 {
		return signal.Match{}, fmt.Errorf("%q is not <param><op><value> with op one of =, <, <=, >, >=", f)
	}
	op, value := f[i:i+1], f[i+1:]
	if strings.HasPrefix(value, "=") && op != "=" {
		op, value = op+"=", value[1:]
	}
	m := signal.Match{Param: f[:i], Operator: workflow.SignalOperator(op), Value: value}
	if !m.Operator.Valid() {
		return signal.Match{}, fmt.Errorf("%q: unknown operator %q", f, op)
	}
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		m.Value = n
	}
	return m, nil
}

func (s *Server) latestSignal(w http.ResponseWriter, r *http.Request) error {
	sig, err := signal.NewStore(s.cfg.DB).Latest(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signalView(sig))
	return nil
}

func (s *Server) getSignal(w http.ResponseWriter, r *http.Request) error {
	seq, err := pathInt(r, "seq")
	if err != nil {
		return err
	}
	sig, err := signal.NewStore(s.cfg.DB).Get(r.Context(), r.PathValue("name"), seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signalView(sig))
	return nil
}

// signalLineage answers what a signal instance is related to: the step
// attempt that produced it, the runs it started through signal triggers,
// the step attempts whose dependencies it met.
func (s *Server) signalLineage(w http.ResponseWriter, r *http.Request) error {
	seq, err := pathInt(r, "seq")
	if err != nil {
		return err
	}
	st := signal.NewStore(s.cfg.DB)
	sig, err := st.Get(r.Context(), r.PathValue("name"), seq)
	if err != nil {
		return err
	}
	ls, err := st.LineageOfSignal(r.Context(), seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, lineageJSON("signal_instance", signalView(sig), ls))
	return nil
}

// runSignals answers the signal instances related to a run, or to one of
// its steps: those that started it, those its step attempts produced and
// those that met their dependencies.
func (s *Server) runSignals(w http.ResponseWriter, r *http.Request) error {
	iid, run, err := pathRun(r)
	if err != nil {
		return err
	}
	id, step := r.PathValue("id"), r.PathValue("step")
	if _, err := s.cfg.Runs.Detail(r.Context(), id, iid, run); err != nil {
		return err
	}
	ls, err := signal.NewStore(s.cfg.DB).LineageOfRun(r.Context(), id, iid, run, step)
	if err != nil {
		return err
	}
	of := map[string]any{"workflow_id": id, "workflow_instance_id": iid, "workflow_run_id": run}
	if step != "" {
		of["step_id"] = step
	}
	writeJSON(w, http.StatusOK, lineageJSON("of", of, ls))
	return nil
}

// listSignalTriggers answers a workflow's signal triggers (those of its
// active version) with their states and what they matched.
func (s *Server) listSignalTriggers(w http.ResponseWriter, r *http.Request) error {
	return listWorkflowTriggers(s, w, r, "signal_triggers", trigger.ListSignals)
}
