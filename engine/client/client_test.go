package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The decoders read both shapes of each answer: this implementation's
// first (RFC 3339 times, wrapped answers) and Maestro's (epoch
// milliseconds, flat answers, PaginationResult).
func TestDecodeRunBothShapes(t *testing.T) {
	t.Parallel()
	start := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, body := range map[string]string{
		"first": `{"workflow_id":"w","workflow_instance_id":3,"workflow_run_id":2,"workflow_version_id":1,"status":"IN_PROGRESS",
			"start_time":"2024-01-02T03:04:05Z","timeline":[{"type":"STATUS","timestamp":1704164645000,"status":"IN_PROGRESS"}],
			"runtime_overview":{"total_step_count":3,"step_overview":{"SUCCEEDED":2,"RUNNING":1},
			"rollup_overview":{"total_leaf_count":10,"overview":{"SUCCEEDED":{"cnt":7},"RUNNING":{"cnt":3}}}}}`,
		"maestro": `{"workflow_id":"w","workflow_instance_id":3,"workflow_run_id":2,"workflow_version_id":1,"status":"IN_PROGRESS",
			"start_time":1704164645000,"timeline":{"timeline_events":[{"type":"STATUS","timestamp":1704164645000,"status":"IN_PROGRESS"}]},
			"runtime_overview":{"total_step_count":3,"step_overview":{"SUCCEEDED":{"cnt":2,"steps":[[1,1,2]]},"RUNNING":{"cnt":1}},
			"rollup_overview":{"total_leaf_count":10,"overview":{"SUCCEEDED":{"cnt":7},"RUNNING":{"cnt":3}}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			r, err := decodeRun(json.RawMessage(body))
			if err != nil {
				t.Fatal(err)
			}
			if r.InstanceID != 3 || r.RunID != 2 || !r.StartTime.Equal(start) || r.StepCounts["SUCCEEDED"] != 2 ||
				r.StepCounts["RUNNING"] != 1 || r.Rollup.Total != 10 || r.Rollup.Done() != 7 || len(r.Timeline) != 1 ||
				!r.EndTime.IsZero() {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestDecodeStepsBothShapes(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"first": `{"steps":[{"step_id":"a","step_attempt_id":2,"step_type":"Sleep","status":"SUCCEEDED",
			"start_time":"2024-01-02T03:04:05Z","end_time":"2024-01-02T03:04:07Z","runtime_state":{"message":"slept 2s"}}]}`,
		"maestro": `[{"step_id":"a","step_attempt_id":2,"step_type":"Sleep",
			"runtime_state":{"status":"SUCCEEDED","start_time":1704164645000,"end_time":1704164647000,"message":"slept 2s"}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			steps, err := decodeSteps(json.RawMessage(body))
			if err != nil || len(steps) != 1 {
				t.Fatal(steps, err)
			}
			s := steps[0]
			if s.StepID != "a" || s.AttemptID != 2 || s.Status != "SUCCEEDED" || s.EndTime.Sub(s.StartTime.Time) != 2*time.Second || s.Message != "slept 2s" {
				t.Fatalf("%+v", s)
			}
		})
	}
}

func TestDecodeStartVersionSignalBothShapes(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"status":"CREATED","workflow_instance":{"workflow_id":"w","workflow_version_id":4,"workflow_instance_id":7,"workflow_run_id":1}}`,
		`{"workflow_id":"w","workflow_version_id":4,"workflow_instance_id":7,"workflow_run_id":1,"workflow_uuid":"u","status":"CREATED","timeline_event":{}}`,
	} {
		r, err := decodeStart(json.RawMessage(body))
		if err != nil || r.WorkflowID != "w" || r.VersionID != 4 || r.InstanceID != 7 || r.RunID != 1 || r.Status != "CREATED" {
			t.Errorf("%s: %+v %v", body, r, err)
		}
	}
	for _, body := range []string{
		`{"workflow_id":"w","workflow_version_id":2,"created":true,"is_active":true,"definition":{"id":"w","steps":[]}}`,
		`{"workflow_definition":{"metadata":{"workflow_id":"w","workflow_version_id":2,"version_author":"x"},"workflow":{"id":"w","steps":[]},"is_active":true},"created":true}`,
	} {
		v, err := decodeVersion(json.RawMessage(body))
		if err != nil || v.WorkflowID != "w" || v.VersionID != 2 || !v.IsActive || v.Created == nil || !*v.Created || !strings.Contains(string(v.Workflow), `"steps"`) {
			t.Errorf("%s: %+v %v", body, v, err)
		}
	}
	for body, dup := range map[string]bool{
		`{"status":"DUPLICATED","signal_instance":{"name":"s","seq_id":3}}`: true,
		`{"name":"s","seq_id":3,"duplicated":false}`:                        false,
	} {
		r, err := decodeSignal(json.RawMessage(body))
		if err != nil || r.Name != "s" || r.SeqID != 3 || r.Duplicated != dup {
			t.Errorf("%s: %+v %v", body, r, err)
		}
	}
}

// An error answer keeps Maestro's message and details; a foreign body
// (API Gateway's {"message"}) its text.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v3/workflows/w/overview":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"status":"NOT_FOUND","message":"workflow w does not exist","errors":["x"],"retryable":false}`)
		default:
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"Missing Authentication Token"}`)
		}
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Overview(context.Background(), "w")
	if !IsNotFound(err) || err.Error() != "404 NOT_FOUND: workflow w does not exist\n  x" {
		t.Errorf("404: %v", err)
	}
	_, err = c.Overview(context.Background(), "other")
	if err == nil || err.Error() != "403 FORBIDDEN: Missing Authentication Token" {
		t.Errorf("403: %v", err)
	}
	if _, err := New(Options{BaseURL: "ftp://x"}); err == nil {
		t.Error("an ftp URL was accepted")
	}
}

// checkSigV4 verifies a request's SigV4 signature as API Gateway does: it
// signs a copy of what arrived (the headers the signature names, the body,
// the same time) and compares.
func checkSigV4(t *testing.T, r *http.Request, body []byte, creds aws.CredentialsProvider, region string) {
	t.Helper()
	auth := r.Header.Get("Authorization")
	date := r.Header.Get("X-Amz-Date")
	if len(date) < 8 || !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"+date[:8]+"/"+region+"/execute-api/aws4_request") ||
		r.Header.Get("X-Amz-Security-Token") != "token" {
		t.Errorf("auth %q, token %q", auth, r.Header.Get("X-Amz-Security-Token"))
		return
	}
	at, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		t.Error(err)
	}
	req, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), strings.NewReader(string(body)))
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	for _, h := range strings.Split(signed, ";") {
		if h != "host" && h != "x-amz-date" && h != "x-amz-security-token" {
			req.Header.Set(h, r.Header.Get(h))
		}
	}
	cr, _ := creds.Retrieve(context.Background())
	if err := v4.NewSigner().SignHTTP(context.Background(), cr, req, payloadHash(body), "execute-api", region, at); err != nil {
		t.Error(err)
	}
	if got := req.Header.Get("Authorization"); got != auth {
		t.Errorf("signature does not verify:\n got  %s\n want %s", auth, got)
	}
}

// Requests to API Gateway are signed with SigV4 over the body: the server
// here recomputes the signature from what it received, as API Gateway does.
func TestSigV4Signing(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "token")
	var checked bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		checkSigV4(t, r, body, creds, "eu-west-1")
		checked = true
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"workflow_id":"w","workflow_version_id":1,"workflow_instance_id":1,"workflow_run_id":1,"status":"CREATED"}`)
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL + "/prod", Signer: &Signer{Credentials: aws.NewCredentialsCache(creds), Region: "eu-west-1"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Start(context.Background(), StartRequest{WorkflowID: "w", RunParams: map[string]any{"x": map[string]any{"type": "LONG", "value": 1}}})
	if err != nil || res.InstanceID != 1 || !checked {
		t.Fatalf("%+v %v", res, err)
	}
}
