package localstack_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/localstack"
)

// buildLambda builds a function's bootstrap the way `make build` does, for
// this machine's architecture, and zips it.
func buildLambda(t *testing.T, pkg string) []byte {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	hdr := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// deployFunction deploys a function's real bootstrap (built from pkg) to
// the emulator, with its database credentials in a Secrets Manager secret
// as in AWS, waits until it is active and deletes it when t ends. It
// returns the client, the function's name and its ARN.
func deployFunction(t *testing.T, cfg aws.Config, prefix, pkg, dsn string, timeoutSeconds int32) (*lambda.Client, string, string) {
	t.Helper()
	ctx := context.Background()
	stamp := time.Now().Format("150405.000000")
	sm := secretsmanager.NewFromConfig(cfg)
	secretName := aws.String(prefix + "-db-" + stamp)
	secretARN := ""
	secret, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: secretName, SecretString: aws.String(dbSecret(t, dsn))})
	var exists *smtypes.ResourceExistsException
	switch {
	case err == nil:
		secretARN = aws.ToString(secret.ARN)
	case errors.As(err, &exists):
		// The name is this call's own: the SDK retried a CreateSecret whose
		// connection broke after the emulator had created the secret.
		desc, derr := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: secretName})
		if derr != nil {
			t.Fatalf("create secret: %v; then describe it: %v", err, derr)
		}
		secretARN = aws.ToString(desc.ARN)
	default:
		t.Fatalf("create secret: %v", err)
	}
	lc := lambda.NewFromConfig(cfg)
	name := prefix + "-" + strings.ReplaceAll(stamp, ".", "")
	fn, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName:  aws.String(name),
		Runtime:       lambdatypes.RuntimeProvidedal2023,
		Handler:       aws.String("bootstrap"),
		Role:          aws.String("arn:aws:iam::000000000000:role/" + prefix),
		Code:          &lambdatypes.FunctionCode{ZipFile: buildLambda(t, pkg)},
		Architectures: []lambdatypes.Architecture{lambdatypes.Architecture(archName())},
		Timeout:       aws.Int32(timeoutSeconds),
		Environment: &lambdatypes.Environment{Variables: map[string]string{
			"DB_SECRET_ARN":       secretARN,
			"MAESTRO_GROUP_COUNT": "16",
			"AWS_ENDPOINT_URL":    localstack.Endpoint(t),
			"AWS_REGION":          localstack.Region,
			"AWS_ACCESS_KEY_ID":   "test", "AWS_SECRET_ACCESS_KEY": "test",
		}},
	})
	if err != nil {
		t.Fatalf("create function: %v", err)
	}
	t.Cleanup(func() {
		_, _ = lc.DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
	})
	waiter := lambda.NewFunctionActiveV2Waiter(lc)
	if err := waiter.Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("function never became active: %v", err)
	}
	return lc, name, aws.ToString(fn.FunctionArn)
}

// dbSecret is the database URL as an RDS-style secret.
func dbSecret(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	b, _ := json.Marshal(map[string]any{
		"host": u.Hostname(), "port": u.Port(), "username": u.User.Username(), "password": pw,
		"dbname": u.Path[1:],
	})
	return string(b)
}

// The API Lambda's real bootstrap, run by the emulator's Lambda service,
// reads its database credentials from Secrets Manager at cold start and
// serves API Gateway proxy events against a real PostgreSQL.
func TestAPILambdaInEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := localstack.Config(t)
	dsn := dbtest.URL(t)

	lc, name, _ := deployFunction(t, cfg, "maestro-api", "../functions/api", dsn, 30)

	invoke := func(ev events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
		t.Helper()
		payload, _ := json.Marshal(ev)
		out, err := lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name), Payload: payload})
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		if out.FunctionError != nil {
			t.Fatalf("function error %s: %s", aws.ToString(out.FunctionError), out.Payload)
		}
		var resp events.APIGatewayProxyResponse
		if err := json.Unmarshal(out.Payload, &resp); err != nil {
			t.Fatalf("response %s: %v", out.Payload, err)
		}
		return resp
	}
	caller := events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::000000000000:user/alice"}}

	health := invoke(events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/api/v3/health", RequestContext: caller})
	if health.StatusCode != 200 {
		t.Fatalf("health: %d %s", health.StatusCode, health.Body)
	}
	push := invoke(events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/api/v3/workflows", RequestContext: caller,
		Body: `{"workflow":{"id":"from_lambda","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`})
	if push.StatusCode != 200 {
		t.Fatalf("push: %d %s", push.StatusCode, push.Body)
	}
	// Maestro's WorkflowCreateResponse: the version's author in its metadata.
	var created struct {
		WorkflowDefinition struct {
			Metadata struct {
				VersionAuthor string `json:"version_author"`
			} `json:"metadata"`
		} `json:"workflow_definition"`
	}
	_ = json.Unmarshal([]byte(push.Body), &created)
	if by := created.WorkflowDefinition.Metadata.VersionAuthor; by != "arn:aws:iam::000000000000:user/alice" {
		t.Errorf("the IAM principal was not the caller: %q", by)
	}
	bad := invoke(events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/api/v3/workflows", RequestContext: caller, Body: `{"workflow":`})
	if bad.StatusCode != 400 {
		t.Fatalf("malformed push: %d %s", bad.StatusCode, bad.Body)
	}
}

func archName() string {
	if runtime.GOARCH == "arm64" {
		return "arm64"
	}
	return "x86_64"
}
