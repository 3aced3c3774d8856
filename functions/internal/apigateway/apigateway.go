// Package apigateway adapts an http.Handler to API Gateway REST API proxy
// events, so the Lambda serves exactly the handler `maestro dev` serves.
package apigateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// Handler serves API Gateway proxy events with h.
type Handler struct {
	h http.Handler
}

// New wraps h.
func New(h http.Handler) *Handler { return &Handler{h: h} }

// Handle is the Lambda entry point.
func (a *Handler) Handle(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	req, err := toRequest(ctx, ev)
	if err != nil {
		return events.APIGatewayProxyResponse{
			StatusCode: http.StatusBadRequest,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       fmt.Sprintf(`{"status":"BAD_REQUEST","message":%q,"errors":[],"retryable":false}`, err.Error()),
		}, nil
	}
	rw := newResponseWriter()
	a.h.ServeHTTP(rw, req)
	return rw.toResponse(), nil
}

func toRequest(ctx context.Context, ev events.APIGatewayProxyRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("body is not valid base64: %w", err)
		}
		body = b
	}
	q := url.Values{}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = append(q[k], vs...)
	}
	for k, v := range ev.QueryStringParameters {
		if _, ok := q[k]; !ok {
			q.Set(k, v)
		}
	}
	u := url.URL{Path: ev.Path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, ev.HTTPMethod, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range ev.MultiValueHeaders {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	for k, v := range ev.Headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	req.ContentLength = int64(len(body))
	req.RemoteAddr = ev.RequestContext.Identity.SourceIP
	if id := ev.RequestContext.RequestID; id != "" {
		req.Header.Set(tracing.RequestIDHeader, id) // the logs' request_id (tracing.Middleware)
	}
	// With IAM auth, API Gateway puts the verified principal in the request
	// context; a client-sent `user` header is never trusted here.
	if caller := callerOf(ev.RequestContext.Identity); caller != "" {
		req = req.WithContext(api.WithCaller(req.Context(), caller))
	}
	return req, nil
}

func callerOf(id events.APIGatewayRequestIdentity) string {
	switch {
	case id.UserArn != "":
		return id.UserArn
	case id.Caller != "":
		return id.Caller
	case id.User != "":
		return id.User
	}
	return ""
}

// responseWriter buffers what the handler writes.
type responseWriter struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func newResponseWriter() *responseWriter {
	return &responseWriter{header: http.Header{}}
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) toResponse() events.APIGatewayProxyResponse {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	resp := events.APIGatewayProxyResponse{
		StatusCode:        w.status,
		MultiValueHeaders: map[string][]string{},
	}
	for k, vs := range w.header {
		resp.MultiValueHeaders[k] = append([]string(nil), vs...)
	}
	b := w.body.Bytes()
	ct := w.header.Get("Content-Type")
	if utf8.Valid(b) && (ct == "" || strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "text/")) {
		resp.Body = string(b)
	} else {
		resp.Body = base64.StdEncoding.EncodeToString(b)
		resp.IsBase64Encoded = true
	}
	return resp
}
