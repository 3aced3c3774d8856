package instance

import (
	"time"

	"github.com/maestro-aws/maestro/engine/wire"
)

// TimelineEvent is one entry of a workflow instance's or step attempt's
// timeline as stored and served: Maestro's TimelineEvent, declared once in
// engine/wire. The engine writes STATUS events (Maestro's
// TimelineStatusEvent: a timestamp and the status entered, nothing else)
// and LOG events (Maestro's TimelineLogEvent: a level and a message), the
// reason for a status change among them.
type TimelineEvent = wire.TimelineEvent

// StatusChange records entering status, with why, as Maestro writes it: a
// STATUS event with the status alone, then, when reason is not empty, a
// LOG event at the same instant carrying the reason at ReasonLevel(status).
func StatusChange(status, reason string) []TimelineEvent {
	n := 1
	if reason != "" {
		n = 2
	}
	return AppendStatusChange(make([]TimelineEvent, 0, n), status, reason, time.Now())
}

// AppendStatusChange appends to dst the events of StatusChange(status,
// reason) happening at now, without a slice of their own.
func AppendStatusChange(dst []TimelineEvent, status, reason string, now time.Time) []TimelineEvent {
	ms := now.UnixMilli()
	dst = append(dst, TimelineEvent{Type: wire.EventStatus, Timestamp: ms, Status: status})
	if reason != "" {
		dst = append(dst, TimelineEvent{Type: wire.EventLog, Timestamp: ms, Level: ReasonLevel(status), Message: reason})
	}
	return dst
}

// ReasonLevel is the level of the LOG event that says why a run or a step
// entered status: WARN for a failure, a timeout or a stop (Maestro logs a
// termination's reason at WARN), INFO otherwise.
func ReasonLevel(status string) string {
	switch status {
	case string(WorkflowFailed), string(WorkflowStopped), string(WorkflowTimedOut),
		string(StepUserFailed), string(StepPlatformFailed), string(StepTimeoutFailed), string(StepFatallyFailed),
		string(StepInternallyFailed), string(StepCompletedWithError):
		return wire.LevelWarn
	}
	return wire.LevelInfo
}

// LogEvent records a message at level (Maestro's levels: TRACE, DEBUG,
// INFO, WARN, ERROR).
func LogEvent(level, msg string) TimelineEvent {
	return TimelineEvent{Type: wire.EventLog, Timestamp: time.Now().UnixMilli(), Level: level, Message: msg}
}

// RetryInfo counts an attempt's retries against its limits, as Maestro's
// step retry info does.
type RetryInfo struct {
	ErrorRetries       int64 `json:"error_retries"`
	ErrorRetryLimit    int64 `json:"error_retry_limit"`
	PlatformRetries    int64 `json:"platform_retries"`
	PlatformRetryLimit int64 `json:"platform_retry_limit"`
	TimeoutRetries     int64 `json:"timeout_retries"`
	TimeoutRetryLimit  int64 `json:"timeout_retry_limit"`
	ManualRetries      int64 `json:"manual_retries"`
	// Retryable is false once a failure used up its limit.
	Retryable bool `json:"retryable"`
	// Backoff holds the delays in seconds, resolved at the first attempt.
	Backoff Backoff `json:"backoff"`
}

// Backoff is a resolved retry backoff policy.
type Backoff struct {
	Exponential         bool  `json:"exponential"`
	ErrorBackoffSecs    int64 `json:"error_backoff_secs"`
	ErrorExponent       int64 `json:"error_exponent"`
	ErrorLimitSecs      int64 `json:"error_limit_secs"`
	PlatformBackoffSecs int64 `json:"platform_backoff_secs"`
	PlatformExponent    int64 `json:"platform_exponent"`
	PlatformLimitSecs   int64 `json:"platform_limit_secs"`
	TimeoutBackoffSecs  int64 `json:"timeout_backoff_secs"`
	TimeoutExponent     int64 `json:"timeout_exponent"`
	TimeoutLimitSecs    int64 `json:"timeout_limit_secs"`
}

// Delay is how long to wait before retrying after the n-th failure
// (n counts from 1) of the given kind.
func (b Backoff) Delay(kind StepStatus, n int64) time.Duration {
	base, exp, limit := b.ErrorBackoffSecs, b.ErrorExponent, b.ErrorLimitSecs
	switch kind {
	case StepPlatformFailed:
		base, exp, limit = b.PlatformBackoffSecs, b.PlatformExponent, b.PlatformLimitSecs
	case StepTimeoutFailed:
		base, exp, limit = b.TimeoutBackoffSecs, b.TimeoutExponent, b.TimeoutLimitSecs
	}
	secs := base
	if b.Exponential {
		for i := int64(1); i < n && secs < limit; i++ {
			secs *= max(exp, 1)
		}
		if limit > 0 {
			secs = min(secs, limit)
		}
	}
	return time.Duration(secs) * time.Second
}
