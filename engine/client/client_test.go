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

	"github.com/maestro-aws/maestro/engine/wire"
)

// The decoders read the answers as the API writes them: the engine/wire
// types, marshalled here as the API marshals them.
func TestDecodeRun(t *testing.T) {
	t.Parallel()
	start := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := start.UnixMilli()
	body := mustJSON(t, wire.WorkflowInstance{WorkflowID: "w", InstanceID: 3, RunID: 2, VersionID: 1, Status: "IN_PROGRESS",
		CreateTime: ms, StartTime: &ms,
		Timeline: mustJSON(t, []wire.TimelineEvent{{Type: wire.EventStatus, Timestamp: ms, Status: "IN_PROGRESS"}}),
		RuntimeOverview: &wire.RuntimeOverview{TotalStepCount: 3,
			StepOverview: map[string]*wire.StepStatusSummary{"SUCCEEDED": {Count: 2, Steps: [][]*int64{{&ms}}}, "RUNNING": {Count: 1}},
			RollupOverview: &wire.RollupOverview{TotalLeafCount: 10,
				Overview: map[string]*wire.CountReference{"SUCCEEDED": {Count: 7}, "RUNNING": {Count: 3}}}}})
	r, err := decodeRun(body)
	if err != nil {
		t.Fatal(err)
	}
	if r.InstanceID != 3 || r.RunID != 2 || !r.StartTime.Equal(start) || !r.CreateTime.Equal(start) || r.StepCounts["SUCCEEDED"] != 2 ||
		r.StepCounts["RUNNING"] != 1 || r.TotalSteps != 3 || r.Rollup.Total != 10 || r.Rollup.Done() != 7 ||
		len(r.Timeline) != 1 || r.Timeline[0].Status != "IN_PROGRESS" || !r.EndTime.IsZero() {
		t.Fatalf("%+v", r)
	}
	// The first API's shape (RFC 3339 times) is not read any more.
	if _, err := decodeRun(json.RawMessage(`{"workflow_id":"w","start_time":"2024-01-02T03:04:05Z"}`)); err == nil {
		t.Fatal("an RFC 3339 start_time decoded")
	}
}

func TestDecodeSteps(t *testing.T) {
	t.Parallel()
	start, end := int64(1704164645000), int64(1704164647000)
	body := mustJSON(t, []wire.StepInstance{{StepID: "a", AttemptID: 2, StepType: "Sleep",
		StepRetry:    &wire.StepRetry{ErrorRetries: 1, ErrorRetryLimit: 2},
		RuntimeState: &wire.StepRuntime{Status: "SUCCEEDED", StartTime: &start, EndTime: &end, Message: "slept 2s"}}})
	steps, err := decodeSteps(body)
	if err != nil || len(steps) != 1 {
		t.Fatal(steps, err)
	}
	s := steps[0]
	if s.StepID != "a" || s.AttemptID != 2 || s.Type != "Sleep" || s.Status != "SUCCEEDED" ||
		s.EndTime.Sub(s.StartTime.Time) != 2*time.Second || s.Message != "slept 2s" || !strings.Contains(string(s.Retry), `"error_retries":1`) {
		t.Fatalf("%+v", s)
	}
	// A listing is a bare array or Maestro's PaginationResult.
	page := mustJSON(t, wire.PaginationResult[json.RawMessage]{Elements: []json.RawMessage{mustJSON(t, wire.StepInstance{StepID: "b"})}})
	if steps, err := decodeSteps(page); err != nil || len(steps) != 1 || steps[0].StepID != "b" {
		t.Fatal(steps, err)
	}
}

func TestDecodeStartVersionSignal(t *testing.T) {
	t.Parallel()
	r, err := decodeStart(mustJSON(t, wire.WorkflowStartResponse{WorkflowID: "w", VersionID: 4, InstanceID: 7, RunID: 1, UUID: "u",
		Status: wire.RunCreated, TimelineEvent: wire.LogEvent("started")}))
	if err != nil || r.WorkflowID != "w" || r.VersionID != 4 || r.InstanceID != 7 || r.RunID != 1 || r.Status != "CREATED" {
		t.Errorf("%+v %v", r, err)
	}
	// The first API's wrapped answer is not read any more.
	r, err = decodeStart(json.RawMessage(`{"status":"CREATED","workflow_instance":{"workflow_id":"w","workflow_instance_id":7}}`))
	if err != nil || r.InstanceID != 0 {
		t.Errorf("wrapped start answer decoded: %+v %v", r, err)
	}
	for _, body := range []string{
		`{"workflow_definition":{"metadata":{"workflow_id":"w","workflow_version_id":2,"version_author":"x"},"workflow":{"id":"w","steps":[]},"is_active":true},"created":true}`,
		`{"metadata":{"workflow_id":"w","workflow_version_id":2,"version_author":"x"},"workflow":{"id":"w","steps":[]},"is_active":true}`,
	} {
		wantCreated := strings.Contains(body, "created")
		v, err := decodeVersion(json.RawMessage(body))
		if err != nil || v.WorkflowID != "w" || v.VersionID != 2 || !v.IsActive || (v.Created != nil) != wantCreated ||
			v.CreatedBy != "x" || !strings.Contains(string(v.Workflow), `"steps"`) {
			t.Errorf("%s: %+v %v", body, v, err)
		}
	}
	for _, dup := range []bool{true, false} {
		r, err := decodeSignal(mustJSON(t, wire.SignalInstance{Name: "s", SeqID: 3, Duplicated: dup}))
		if err != nil || r.Name != "s" || r.SeqID != 3 || r.Duplicated != dup {
			t.Errorf("%+v %v", r, err)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
