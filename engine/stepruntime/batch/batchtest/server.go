package batchtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/smithy-go"
)

// Handler serves the fake over Batch's REST-JSON protocol (POST
// /v1/<operation>), for the four operations the runtime uses. Point an SDK
// client at it with a custom base endpoint.
func (f *Fake) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, err)
			return
		}
		var out any
		switch strings.ToLower(strings.TrimSuffix(r.URL.Path, "/")) {
		case "/v1/submitjob":
			out, err = call(r.Context(), body, f.SubmitJob)
			if f.SubmitAnswerDelay > 0 {
				select {
				case <-time.After(f.SubmitAnswerDelay):
				case <-r.Context().Done():
					f.mu.Lock()
					f.lostAnswers++
					f.mu.Unlock()
					return
				}
			}
		case "/v1/describejobs":
			out, err = call(r.Context(), body, f.DescribeJobs)
		case "/v1/listjobs":
			out, err = call(r.Context(), body, f.ListJobs)
		case "/v1/terminatejob":
			out, err = call(r.Context(), body, f.TerminateJob)
		default:
			err = clientError("InvalidAction", "unsupported path "+r.URL.Path)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		b, err := json.Marshal(lowerCamel(out))
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// call decodes the request into the SDK's input type (encoding/json
// matches the protocol's lowerCamel names case-insensitively) and calls
// the fake.
func call[In, Out any](ctx context.Context, body []byte, fn func(context.Context, *In, ...func(*awsbatch.Options)) (*Out, error)) (any, error) {
	var in In
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, clientError("SerializationException", err.Error())
		}
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", code)
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": fmt.Sprint(err)})
	_, _ = w.Write(b)
}

// lowerCamel turns an SDK output struct into the protocol's JSON shape:
// member names start with a lower-case letter, and unset members and the
// SDK's result metadata are left out. Tags and parameters are maps whose
// keys are the user's, and keep their spelling.
func lowerCamel(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var generic any
	_ = json.Unmarshal(b, &generic)
	return rename(generic, false)
}

func rename(v any, keep bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == nil || k == "ResultMetadata" {
				continue
			}
			name := k
			if !keep {
				r, n := utf8.DecodeRuneInString(k)
				name = string(unicode.ToLower(r)) + k[n:]
			}
			out[name] = rename(e, !keep && (k == "Tags" || k == "Parameters"))
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = rename(e, false)
		}
		return x
	}
	return v
}
