package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// readRaw reads the request body (ServeHTTP caps it at MaxBodyBytes). Text
// that is not UTF-8 is refused here: Go's JSON decoder would silently turn
// it into U+FFFD and store something the client never sent.
func readRaw(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
		}
		return nil, badRequest("cannot read the request body")
	}
	if !utf8.Valid(data) {
		return nil, badRequest("the request body is not valid UTF-8")
	}
	return data, nil
}

// readBody reads a non-empty request body.
func readBody(r *http.Request) ([]byte, error) {
	data, err := readRaw(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, badRequest("the request body is empty")
	}
	return data, nil
}

// decodeBody reads an optional JSON body strictly: unknown fields, trailing
// data and invalid UTF-8 are refused; an empty body leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	data, err := readRaw(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := decodeJSON(data, v, true); err != nil {
		return badRequest("malformed request body", err.Error())
	}
	return nil
}

// decodeStrict reads a required JSON body strictly, as decodeBody does.
func decodeStrict(r *http.Request, v any) error {
	data, err := readRaw(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("a JSON body is required")
	}
	if err := decodeJSON(data, v, true); err != nil {
		return badRequest("malformed request body", err.Error())
	}
	return nil
}

// decodeJSON decodes exactly one JSON value from data into v; strict
// refuses fields v does not have. The authorization layer reads bodies
// with it too (peekBody), so both see the same values.
func decodeJSON(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
