package external

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// throttling are AWS error codes that mean "slow down": the platform's
// trouble, retried.
var throttling = map[string]bool{
	"Throttling": true, "ThrottlingException": true, "ThrottledException": true, "TooManyRequestsException": true,
	"RequestLimitExceeded": true, "RequestThrottled": true, "RequestThrottledException": true,
	"ProvisionedThroughputExceededException": true, "SlowDown": true, "EC2ThrottledException": true,
	"ServerException": true, "ServiceUnavailableException": true, "ServiceException": true,
}

// AWSState classifies an error of an AWS SDK call (after the SDK's own
// retries): a cancelled context is Stopped and an expired one TimedOut
// (the step's own stop and timeout); throttling, a 5xx or no answer at all
// is the platform's (PlatformError, retried by the platform retry
// policy); any other error the service answered (not found, access
// denied, invalid parameters) is FatalError, since repeating the same
// request cannot help.
func AWSState(ctx context.Context, err error) stepruntime.State {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return stepruntime.TimedOut
	case ctx.Err() != nil:
		return stepruntime.Stopped
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if throttling[api.ErrorCode()] || api.ErrorFault() == smithy.FaultServer {
			return stepruntime.PlatformError
		}
		var resp *smithyhttp.ResponseError
		if errors.As(err, &resp) && (resp.HTTPStatusCode() >= 500 || resp.HTTPStatusCode() == 429) {
			return stepruntime.PlatformError
		}
		return stepruntime.FatalError
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 400 && resp.HTTPStatusCode() < 500 && resp.HTTPStatusCode() != 429 {
		return stepruntime.FatalError
	}
	return stepruntime.PlatformError
}

// AWSMessage words an AWS error for the step's timeline: the operation,
// the error code and the service's message.
func AWSMessage(op string, err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return fmt.Sprintf("%s: %s: %s", op, api.ErrorCode(), api.ErrorMessage())
	}
	return fmt.Sprintf("%s: %v", op, err)
}
