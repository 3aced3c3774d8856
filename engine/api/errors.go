package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/breakpoint"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/jobtemplate"
	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/tagpermit"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// ErrorBody is the JSON body of every error response, shaped like Maestro's:
// status is the error code name, errors lists the individual problems (for
// validation failures, "path: message"), and retryable tells the client
// whether sending the same request again may succeed.
type ErrorBody struct {
	Status    string   `json:"status"`
	Message   string   `json:"message"`
	Errors    []string `json:"errors"`
	Retryable bool     `json:"retryable"`
}

// Error is an error that knows its HTTP response. Handlers return it (or
// wrap it) and writeError turns it into an ErrorBody in one place.
type Error struct {
	HTTPStatus int
	Code       string
	Message    string
	Details    []string
	Retryable  bool
}

func (e *Error) Error() string { return e.Message }

// Errorf-style constructors for the codes handlers use.
func badRequest(msg string, details ...string) *Error {
	return &Error{HTTPStatus: http.StatusBadRequest, Code: "BAD_REQUEST", Message: msg, Details: details}
}

func forbidden(msg string) *Error {
	return &Error{HTTPStatus: http.StatusForbidden, Code: "FORBIDDEN", Message: msg}
}

func notFound(msg string) *Error {
	return &Error{HTTPStatus: http.StatusNotFound, Code: "NOT_FOUND", Message: msg}
}

func tooLarge(msg string) *Error {
	return &Error{HTTPStatus: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE", Message: msg}
}

func unavailable(msg string) *Error {
	return &Error{HTTPStatus: http.StatusServiceUnavailable, Code: "SERVICE_UNAVAILABLE", Message: msg, Retryable: true}
}

// internal is an unexpected failure. It is never marked retryable: the
// same request would most likely fail the same way, and a client that
// follows the hint would retry forever.
func internal() *Error {
	return &Error{HTTPStatus: http.StatusInternalServerError, Code: "INTERNAL_ERROR", Message: "internal error"}
}

// writeError maps err to a response. Errors that are not *Error are logged
// by the caller and reported without leaking their text: a transient cause
// as 503 (retryable), anything else as 500 (not retryable).
func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	details := e.Details
	if details == nil {
		details = []string{}
	}
	writeJSON(w, e.HTTPStatus, ErrorBody{Status: e.Code, Message: e.Message, Errors: details, Retryable: e.Retryable})
}

// asError maps any error to its response, in one place: an *Error as it
// is, then the stores' sentinels (sentinels), a definition that does not
// validate, a body over the limit, a value the database cannot store, a
// transient cause (503); anything else is an internal error.
func asError(err error) *Error {
	var e *Error
	var ve *workflow.ValidationError
	var tooBig *http.MaxBytesError
	var pgErr *pgconn.PgError
	if errors.As(err, &e) {
		return e
	}
	for _, m := range sentinels {
		if errors.Is(err, m.err) {
			return m.response(err)
		}
	}
	switch {
	case errors.As(err, &ve):
		return invalidDefinition(ve)
	case errors.As(err, &tooBig):
		return tooLarge(fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
	case errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54")):
		// A data exception (bad encoding, a number out of range, ...) or a
		// program limit (a key too long for its index, ...) means the
		// request carried a value the database cannot store: the client's
		// fault, not a retryable failure.
		return badRequest("the request contains a value that cannot be stored: " + pgErr.Message)
	case transient(err):
		return unavailable("the service is temporarily unavailable (database unreachable or busy); retry the request")
	}
	return internal()
}

// sentinel is how one store error answers.
type sentinel struct {
	err       error
	status    int
	code      string
	retryable bool
	// trim drops ": <sentinel>" from the message: those stores word their
	// errors to read well without it.
	trim bool
	// internal hides the message (the client can do nothing with it).
	internal bool
}

func (m sentinel) response(err error) *Error {
	if m.internal {
		return internal()
	}
	msg := err.Error()
	if m.trim {
		msg = strings.TrimSuffix(msg, ": "+m.err.Error())
	}
	return &Error{HTTPStatus: m.status, Code: m.code, Message: msg, Retryable: m.retryable}
}

// sentinels maps the errors of the packages the API calls to responses,
// first match wins. execution.ErrConflict is an action the run's or step's
// status does not allow: Maestro answers its invalid status with 400.
var sentinels = []sentinel{
	{err: authz.ErrUnauthenticated, status: http.StatusUnauthorized, code: "UNAUTHORIZED", trim: true},
	{err: authz.ErrForbidden, status: http.StatusForbidden, code: "FORBIDDEN", trim: true},

	{err: definition.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND", trim: true},
	{err: definition.ErrInvalidSelector, status: http.StatusBadRequest, code: "BAD_REQUEST", trim: true},
	{err: definition.ErrForbidden, status: http.StatusForbidden, code: "FORBIDDEN", trim: true},
	{err: definition.ErrDeleting, status: http.StatusConflict, code: "CONFLICT", trim: true, retryable: true},
	{err: definition.ErrConflict, status: http.StatusConflict, code: "CONFLICT", trim: true},

	{err: execution.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND"},
	{err: execution.ErrInvalid, status: http.StatusBadRequest, code: "BAD_REQUEST"},
	{err: execution.ErrConflict, status: http.StatusBadRequest, code: "BAD_REQUEST"},

	{err: jobtemplate.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND", trim: true},
	{err: jobtemplate.ErrInvalid, status: http.StatusBadRequest, code: "BAD_REQUEST"},

	{err: signal.ErrInvalid, status: http.StatusBadRequest, code: "BAD_REQUEST"},
	{err: signal.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND"},

	{err: completion.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND"},
	{err: completion.ErrForbidden, status: http.StatusForbidden, code: "FORBIDDEN"},
	{err: completion.ErrBadToken, status: http.StatusForbidden, code: "FORBIDDEN"},
	{err: completion.ErrConflict, status: http.StatusConflict, code: "CONFLICT"},
	{err: completion.ErrNotRunning, status: http.StatusConflict, code: "CONFLICT"},
	{err: completion.ErrOutputsTooLarge, status: http.StatusBadRequest, code: "BAD_REQUEST", trim: true},

	{err: tagpermit.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND", trim: true},
	{err: breakpoint.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND", trim: true},
	{err: backfill.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND"},
	{err: backfill.ErrInvalid, status: http.StatusBadRequest, code: "BAD_REQUEST"},
	{err: backfill.ErrInvalidTransition, status: http.StatusConflict, code: "CONFLICT"},

	{err: incremental.ErrNotFound, status: http.StatusNotFound, code: "NOT_FOUND"},
	{err: incremental.ErrInvalid, status: http.StatusBadRequest, code: "BAD_REQUEST"},
	{err: incremental.ErrInFlight, status: http.StatusConflict, code: "CONFLICT", retryable: true},

	{err: retention.ErrNotArchived, status: http.StatusNotFound, code: "NOT_FOUND"},

	{err: event.ErrNoStream, internal: true},
}

// transient reports whether err comes from a cause that goes away by
// itself: the database unreachable, restarting, out of connections or too
// slow to answer, a lock or serialization conflict, or an engine node that
// lost its lease on a flow group.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"),          // insufficient resources (too many connections, ...)
			pgErr.Code == "40001", pgErr.Code == "40P01", // serialization failure, deadlock
			pgErr.Code == "55P03", pgErr.Code == "57014", // lock not available, statement timeout
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutting down, cannot connect now
			return true
		}
		return false // the server answered: a real error
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.Is(err, run.ErrFenced):
		return true
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case pgconn.Timeout(err), pgconn.SafeToRetry(err), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, puddle.ErrClosedPool),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED):
		return true
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
