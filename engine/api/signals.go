package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/signal"
	"github.com/maestro-aws/maestro/engine/wire"
)

// signalRoutes registers the signal endpoints (docs/signals.md).
func (s *Server) signalRoutes() {
	s.handle("POST /api/v3/signals", s.announceSignal)
	s.handle("GET /api/v3/signals/{name}/instances/latest", s.latestSignal)
	s.handle("GET /api/v3/signals/{name}/instances/{seq}", s.getSignal)
}

// signalFields are the fields of Maestro's SignalCreateRequest; any other
// top-level field (Maestro's "extra", ...) goes into the payload, as
// Maestro keeps it.
var signalFields = map[string]bool{"name": true, "params": true, "payload": true, "request_id": true, "request_time": true}

// announceSignal stores a signal and answers Maestro's SignalInstance
// (200); an announcement that repeats a request id answers the stored one
// ("duplicated": true).
func (s *Server) announceSignal(w http.ResponseWriter, r *http.Request) error {
	var fields map[string]json.RawMessage
	if err := decodeStrict(r, &fields); err != nil {
		return err
	}
	req := signal.Request{Params: map[string]any{}, Payload: map[string]any{}}
	if raw, ok := fields["name"]; ok && json.Unmarshal(raw, &req.Name) != nil {
		return badRequest("malformed request body", "name must be a string")
	}
	if raw, ok := fields["request_id"]; ok && string(raw) != "null" && json.Unmarshal(raw, &req.RequestID) != nil {
		return badRequest("malformed request body", "request_id must be a string")
	}
	if raw, ok := fields["request_time"]; ok && string(raw) != "null" && json.Unmarshal(raw, &req.RequestTime) != nil {
		return badRequest("malformed request body", "request_time must be epoch milliseconds")
	}
	if raw, ok := fields["params"]; ok && string(raw) != "null" {
		var ps map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ps); err != nil {
			return badRequest("malformed request body", "params must be a JSON object")
		}
		// Numbers are kept exact (json.Number): a LONG param may use all 64 bits.
		for k, v := range ps {
			var x any
			if err := decodeExact(v, &x); err != nil {
				return badRequest("malformed request body", "params."+k+": "+err.Error())
			}
			req.Params[k] = x
		}
	}
	if raw, ok := fields["payload"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := decodeExact(raw, &req.Payload); err != nil {
			return badRequest("malformed request body", "payload must be a JSON object: "+err.Error())
		}
	}
	for k, raw := range fields {
		if signalFields[k] {
			continue
		}
		var x any
		if err := decodeExact(raw, &x); err != nil {
			return badRequest("malformed request body", k+": "+err.Error())
		}
		req.Payload[k] = x
	}
	res, err := s.cfg.Runs.AnnounceSignal(r.Context(), req)
	if err != nil {
		return signalError(err)
	}
	view := signalView(res.Signal)
	view.Duplicated = res.Duplicate
	writeJSON(w, http.StatusOK, view)
	return nil
}

// signalNamespace names the instance ids of signals (name-based UUIDs).
var signalNamespace = uuid.MustParse("6ba7b811-9dad-11d1-80b4-00c04fd430c8")

// signalView is a signal as Maestro's SignalInstance: its instance id is
// a UUID of its name and request id (else its seq id); its request time is
// the announcer's, else its create time.
func signalView(sig *signal.Signal) *wire.SignalInstance {
	key := fmt.Sprintf("%s\x00%d", sig.Name, sig.Seq)
	if sig.RequestID != "" {
		key = sig.Name + "\x00" + sig.RequestID
	}
	v := &wire.SignalInstance{Name: sig.Name, SeqID: sig.Seq, InstanceID: uuid.NewMD5(signalNamespace, []byte(key)).String(),
		Params: sig.Params, Payload: sig.Payload, RequestID: sig.RequestID, RequestTime: sig.RequestTime,
		CreateTime: wire.Millis(sig.CreateTime)}
	if v.RequestTime == 0 {
		v.RequestTime = v.CreateTime
	}
	return v
}

func (s *Server) latestSignal(w http.ResponseWriter, r *http.Request) error {
	sig, err := signal.NewStore(s.cfg.DB).Latest(r.Context(), r.PathValue("name"))
	if err != nil {
		return signalError(err)
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
		return signalError(err)
	}
	writeJSON(w, http.StatusOK, signalView(sig))
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
