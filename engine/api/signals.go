package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/maestro-aws/maestro/engine/signal"
)

// signalRoutes registers the signal endpoints (docs/signals.md).
func (s *Server) signalRoutes() {
	s.handle("POST /api/v3/signals", s.announceSignal)
	s.handle("GET /api/v3/signals/{name}/instances/latest", s.latestSignal)
	s.handle("GET /api/v3/signals/{name}/instances/{seq}", s.getSignal)
}

// signalBody is a signal announcement, as Maestro's SignalCreateRequest.
type signalBody struct {
	Name      string                     `json:"name"`
	Params    map[string]json.RawMessage `json:"params"`
	Payload   json.RawMessage            `json:"payload"`
	RequestID string                     `json:"request_id"`
}

// announceSignal answers 201 with the new signal instance, or 200 with the
// stored one when the request id was announced before.
func (s *Server) announceSignal(w http.ResponseWriter, r *http.Request) error {
	var body signalBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	req := signal.Request{Name: body.Name, RequestID: body.RequestID, Params: make(map[string]any, len(body.Params))}
	// Numbers are kept exact (json.Number): a LONG param may use all 64 bits.
	for k, raw := range body.Params {
		var v any
		if err := decodeExact(raw, &v); err != nil {
			return badRequest("malformed request body", "params."+k+": "+err.Error())
		}
		req.Params[k] = v
	}
	if len(body.Payload) > 0 && !bytes.Equal(body.Payload, []byte("null")) {
		if err := decodeExact(body.Payload, &req.Payload); err != nil {
			return badRequest("malformed request body", "payload must be a JSON object: "+err.Error())
		}
	}
	res, err := s.cfg.Runs.AnnounceSignal(r.Context(), req)
	if err != nil {
		return signalError(err)
	}
	code, status := http.StatusCreated, "CREATED"
	if res.Duplicate {
		code, status = http.StatusOK, "DUPLICATED"
	}
	writeJSON(w, code, map[string]any{"status": status, "signal_instance": res.Signal})
	return nil
}

func (s *Server) latestSignal(w http.ResponseWriter, r *http.Request) error {
	sig, err := signal.NewStore(s.cfg.DB).Latest(r.Context(), r.PathValue("name"))
	if err != nil {
		return signalError(err)
	}
	writeJSON(w, http.StatusOK, sig)
	return nil
}

func (s *Server) getSignal(w http.ResponseWriter, r *http.Request) error {
	seq, err := pathInt(r, "seq")
	if err != nil {
		return err
	}
	sig, err := signal.NewStore(s.cfg.DB).Get(r.Context(), r.PathValue("name"), seq)
	if err != nil {
		return signalError(err)
	}
	writeJSON(w, http.StatusOK, sig)
	return nil
}

// bypassDependencies is the bypass-dependencies step action; the caller is
// recorded on the step's timeline.
func (s *Server) bypassDependencies(w http.ResponseWriter, r *http.Request) error {
	iid, run, err := pathRunOrLatest(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Runs.BypassDependencies(r.Context(), r.PathValue("id"), iid, run, r.PathValue("step"),
		CallerFrom(r.Context()))
	if err != nil {
		return controlError(err)
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}

// signalError maps signal errors; the rest as runError does.
func signalError(err error) error {
	switch {
	case errors.Is(err, signal.ErrInvalid):
		return badRequest(err.Error())
	case errors.Is(err, signal.ErrNotFound):
		return notFound(err.Error())
	}
	return runError(err)
}
