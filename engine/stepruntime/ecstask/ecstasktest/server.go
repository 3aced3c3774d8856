package ecstasktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
)

// Handler serves the fake over ECS's JSON protocol (awsJson1_1, the
// X-Amz-Target header names the operation), for the five operations the
// runtime uses. Point an SDK client at it with a custom base endpoint.
func (f *Fake) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		op := target[strings.LastIndex(target, ".")+1:]
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, err)
			return
		}
		out, err := f.dispatch(r.Context(), op, body)
		if err != nil {
			writeError(w, err)
			return
		}
		b, err := json.Marshal(lowerCamel(out))
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write(b)
	})
}

func (f *Fake) dispatch(ctx context.Context, op string, body []byte) (any, error) {
	switch op {
	case "RunTask":
		return call(ctx, body, f.RunTask)
	case "DescribeTasks":
		return call(ctx, body, f.DescribeTasks)
	case "StopTask":
		return call(ctx, body, f.StopTask)
	case "ListTasks":
		return call(ctx, body, f.ListTasks)
	case "DescribeTaskDefinition":
		return call(ctx, body, f.DescribeTaskDefinition)
	}
	return nil, clientError("UnknownOperationException", "unsupported operation "+op)
}

// call decodes the request into the SDK's input type (encoding/json
// matches the protocol's lowerCamel names case-insensitively) and calls
// the fake.
func call[In, Out any](ctx context.Context, body []byte, fn func(context.Context, *In, ...func(*ecs.Options)) (*Out, error)) (any, error) {
	var in In
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, clientError("SerializationException", err.Error())
	}
	return fn(ctx, &in)
}

func writeError(w http.ResponseWriter, err error) {
	code, status := "ServerException", http.StatusInternalServerError
	var api smithy.APIError
	if errors.As(err, &api) {
		code = api.ErrorCode()
		if api.ErrorFault() != smithy.FaultServer {
			status = http.StatusBadRequest
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"__type": code, "message": fmt.Sprint(err)})
	_, _ = w.Write(b)
}

// lowerCamel turns an SDK output struct into the protocol's JSON shape:
// member names start with a lower-case letter, and unset members and the
// SDK's result metadata are left out.
func lowerCamel(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var generic any
	_ = json.Unmarshal(b, &generic)
	return rename(generic)
}

func rename(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == nil || k == "ResultMetadata" {
				continue
			}
			r, n := utf8.DecodeRuneInString(k)
			out[string(unicode.ToLower(r))+k[n:]] = rename(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = rename(e)
		}
		return x
	}
	return v
}
