package apigateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/api"
)

// echo reports what the adapter turned the event into.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.Query(),
		"body": string(body), "caller": api.CallerFrom(r.Context()), "header": r.Header.Get("X-Trace"),
	})
})

func TestHandleTranslatesRequestAndResponse(t *testing.T) {
	t.Parallel()
	ev := events.APIGatewayProxyRequest{
		HTTPMethod:                      http.MethodPost,
		Path:                            "/api/v3/workflows/wf1/versions/latest/actions/start",
		MultiValueQueryStringParameters: map[string][]string{"a": {"1", "2"}},
		Headers:                         map[string]string{"X-Trace": "t1", "user": "mallory"},
		Body:                            base64.StdEncoding.EncodeToString([]byte(`{"k":"v"}`)),
		IsBase64Encoded:                 true,
		RequestContext: events.APIGatewayProxyRequestContext{
			Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::123:user/alice"},
		},
	}
	resp, err := New(echo).Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || resp.IsBase64Encoded {
		t.Fatalf("status %d base64 %v", resp.StatusCode, resp.IsBase64Encoded)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatal(err)
	}
	if got["method"] != "POST" || got["path"] != ev.Path || got["body"] != `{"k":"v"}` ||
		got["caller"] != "arn:aws:iam::123:user/alice" || got["header"] != "t1" {
		t.Fatalf("request seen by handler: %v", got)
	}
	if q := got["query"].(map[string]any)["a"].([]any); len(q) != 2 {
		t.Fatalf("multi-value query lost: %v", q)
	}
	if resp.MultiValueHeaders["Content-Type"][0] != "application/json" {
		t.Fatalf("headers %v", resp.MultiValueHeaders)
	}
}

func TestHandleRejectsBadBase64(t *testing.T) {
	t.Parallel()
	resp, err := New(echo).Handle(context.Background(), events.APIGatewayProxyRequest{
		HTTPMethod: "POST", Path: "/x", Body: "!!!", IsBase64Encoded: true,
	})
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("got %d %v", resp.StatusCode, err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || body["status"] != "BAD_REQUEST" {
		t.Fatalf("body %q", resp.Body)
	}
}
