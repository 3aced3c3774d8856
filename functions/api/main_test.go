package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/functions/api/internal/apienv"
	"github.com/maestro-aws/maestro/functions/internal/apigateway"
)

// The Lambda's cold-start wiring, driven with a real API Gateway proxy event
// against a real database.
func TestLambdaServesHealth(t *testing.T) {
	t.Setenv("DATABASE_URL", dbtest.URL(t))
	t.Setenv("MAESTRO_GROUP_COUNT", "16")
	handler, err := apienv.Handler(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := apigateway.New(handler).Handle(context.Background(), events.APIGatewayProxyRequest{
		HTTPMethod: http.MethodGet,
		Path:       "/api/v3/health",
		RequestContext: events.APIGatewayProxyRequestContext{
			Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::123456789012:user/ci"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	if resp.StatusCode != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("got %d %v", resp.StatusCode, body)
	}
}

func TestColdStartFailsWithoutDatabase(t *testing.T) {
	for _, k := range []string{"DATABASE_URL", "DB_SECRET_ARN", "DB_HOST"} {
		t.Setenv(k, "")
	}
	if _, err := apienv.Handler(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("cold start succeeded with no database configured")
	}
}
