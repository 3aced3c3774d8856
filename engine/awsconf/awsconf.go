// Package awsconf loads the AWS configuration every Maestro process uses
// (engine, Lambdas) from the SDK's standard chain, in one place, and can
// record each AWS API call the process makes.
//
// Recording exists for the end-to-end IAM check (localstack/iamcheck): with
// MAESTRO_AWS_CALL_LOG naming a file, each call appends one JSON line
// {principal, service, operation, error} to it, where principal is
// MAESTRO_AWS_CALL_PRINCIPAL, else the Lambda's AWS_LAMBDA_FUNCTION_NAME,
// else "process". The check then holds every recorded call against the
// principal's deployed IAM policy. Unset, nothing is added to the clients.
package awsconf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// CallLogEnv names the file recorded calls are appended to.
const CallLogEnv = "MAESTRO_AWS_CALL_LOG"

// PrincipalEnv names the principal recorded calls are attributed to.
const PrincipalEnv = "MAESTRO_AWS_CALL_PRINCIPAL"

// Call is one recorded AWS API call.
type Call struct {
	// Principal is who made it: a Lambda's function name, or the process's
	// MAESTRO_AWS_CALL_PRINCIPAL (e.g. "engine").
	Principal string `json:"principal"`
	// Service is the SDK's service id ("SQS", "Secrets Manager", ...).
	Service string `json:"service"`
	// Operation is the API operation ("SendMessage", ...).
	Operation string `json:"operation"`
	// Error is the service's error code when the call failed with one
	// ("AccessDenied", ...); empty on success or a transport failure.
	Error string `json:"error,omitempty"`
}

// Load is config.LoadDefaultConfig plus, when MAESTRO_AWS_CALL_LOG is set,
// a recorder of every call made with the configuration.
func Load(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return cfg, err
	}
	if path := os.Getenv(CallLogEnv); path != "" {
		cfg.APIOptions = append(cfg.APIOptions, Recorder(path, principal()).Register)
	}
	return cfg, nil
}

func principal() string {
	for _, k := range []string{PrincipalEnv, "AWS_LAMBDA_FUNCTION_NAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "process"
}

// CallRecorder appends the calls it sees to a file, one JSON line each.
type CallRecorder struct {
	path      string
	principal string
}

// Recorder records calls made by principal to the file at path.
func Recorder(path, principal string) *CallRecorder {
	return &CallRecorder{path: path, principal: principal}
}

// fileMu serialises this process's appends; lines from several processes
// (the Lambdas and the engine share one log in the e2e run) stay whole
// because each is a single O_APPEND write.
var fileMu sync.Mutex

// Register adds the recorder to a client's middleware stack: it runs first
// and sees the call's outcome last.
func (r *CallRecorder) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("MaestroCallRecorder",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			c := Call{Principal: r.principal, Service: awsmiddleware.GetServiceID(ctx), Operation: awsmiddleware.GetOperationName(ctx)}
			// Some service modules (sfn v1.41) set these as stack values
			// only inside the stack, after this middleware; they name the
			// call in the context too.
			if c.Service == "" {
				c.Service = middleware.GetServiceID(ctx)
			}
			if c.Operation == "" {
				c.Operation = middleware.GetOperationName(ctx)
			}
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) {
				c.Error = apiErr.ErrorCode()
			}
			r.append(c)
			return out, md, err
		}), middleware.Before)
}

func (r *CallRecorder) append(c Call) {
	line, err := json.Marshal(c)
	if err != nil {
		return
	}
	fileMu.Lock()
	defer fileMu.Unlock()
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "awsconf: record call: %v\n", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
}

// ReadCalls reads a call log written by recorders.
func ReadCalls(path string) ([]Call, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read call log: %w", err)
	}
	var calls []Call
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var c Call
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("call log %s: %w", path, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}
