package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
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

func notFound(msg string) *Error {
	return &Error{HTTPStatus: http.StatusNotFound, Code: "NOT_FOUND", Message: msg}
}

func conflict(msg string) *Error {
	return &Error{HTTPStatus: http.StatusConflict, Code: "CONFLICT", Message: msg}
}

func forbidden(msg string) *Error {
	return &Error{HTTPStatus: http.StatusForbidden, Code: "FORBIDDEN", Message: msg}
}

func tooLarge(msg string) *Error {
	return &Error{HTTPStatus: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE", Message: msg}
}

func unavailable(msg string) *Error {
	return &Error{HTTPStatus: http.StatusServiceUnavailable, Code: "SERVICE_UNAVAILABLE", Message: msg, Retryable: true}
}

func internal() *Error {
	return &Error{HTTPStatus: http.StatusInternalServerError, Code: "INTERNAL_ERROR",
		Message: "internal error; the request may be retried", Retryable: true}
}

// writeError maps err to a response. Errors that are not *Error are logged
// by the caller and reported as a retryable internal error without leaking
// their text.
func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	details := e.Details
	if details == nil {
		details = []string{}
	}
	writeJSON(w, e.HTTPStatus, ErrorBody{Status: e.Code, Message: e.Message, Errors: details, Retryable: e.Retryable})
}

// asError maps any error to its response.
func asError(err error) *Error {
	var e *Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
		// A data exception (bad encoding, a number out of range, ...) means
		// the request carried a value the database cannot store: the
		// client's fault, not a retryable failure.
		return badRequest("the request contains a value that cannot be stored: " + pgErr.Message)
	}
	return internal()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
