// Package httpstep is the Http step runtime: one HTTP request per step
// attempt, in the shape of Maestro's Http step. The request comes from the
// step's `http` MAP param (url, method, headers, body, plus timeout and
// accepted_status_codes); the response's status, headers and body become
// the step's output params. It runs under the external protocol, so a
// request is sent at most once per attempt, with the attempt's uuid as its
// Idempotency-Key header. See docs/step-runtimes.md.
package httpstep

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Type is the step type this runtime runs.
const Type = "Http"

// Names of the step's params and outputs, as in Maestro's Http step.
const (
	// ParamHTTP is the MAP param holding the request.
	ParamHTTP = "http"
	// ParamStateExpr is an optional SEL expression that maps the response
	// to a state (DONE, USER_ERROR, PLATFORM_ERROR, FATAL_ERROR); it sees
	// the step's params and the outputs below.
	ParamStateExpr = "state_expr"

	OutputStatusCode      = "status_code"
	OutputResponseBody    = "response_body"
	OutputResponseHeaders = "response_headers"
	// OutputResponseJSON is the body decoded, when it is a JSON object.
	OutputResponseJSON = "response_json"
)

// IdempotencyHeader carries the attempt's uuid on every request, unless
// the step sets the header itself.
const IdempotencyHeader = "Idempotency-Key"

// NodeHeader names the engine node that sent the request, so a server
// (and whoever reads its logs) can tell which engine called it, as after a
// takeover.
const NodeHeader = "X-Maestro-Node"

// Defaults of Config and of the request.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMethod           = http.MethodGet
)

// Config configures the runtime. The zero value is usable.
type Config struct {
	// Client sends the requests (default: NewClient(AllowedHosts)).
	Client *http.Client
	// AllowedHosts, when not empty, are the only hosts a step may call:
	// exact names or "*.example.com" suffixes, matched case-insensitively.
	// Link-local addresses (the EC2 and ECS metadata and credential
	// endpoints) are refused whatever the list says.
	AllowedHosts []string
	// MaxResponseBytes bounds the response body (default 1 MiB).
	MaxResponseBytes int64
	// DefaultTimeout bounds a request whose step sets no timeout (default
	// 30s). The step's own timeout bounds every request too.
	DefaultTimeout time.Duration
}

// New returns the Http runtime.
func New(cfg Config) stepruntime.Runtime {
	if cfg.Client == nil {
		cfg.Client = NewClient()
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	allowed := make([]string, 0, len(cfg.AllowedHosts))
	for _, h := range cfg.AllowedHosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			allowed = append(allowed, h)
		}
	}
	cfg.AllowedHosts = allowed
	return external.Runtime{Job: &job{cfg: cfg}}
}

// errBlockedAddress is a connection refused by the link-local guard.
var errBlockedAddress = errors.New("link-local addresses (instance metadata and credentials) may not be called")

// NewClient returns the client the runtime uses by default: pooled
// connections for many concurrent steps, no redirects followed (a 3xx is
// the step's answer, as in Maestro), no proxy, and no connection to a
// link-local address, checked on the resolved address so that a DNS name
// cannot point a step at the metadata endpoints.
func NewClient() *http.Client {
	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip != nil && blockedIP(ip) {
				return errBlockedAddress
			}
			return nil
		},
	}
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &guardedConn{Conn: c}, nil
			},
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ecsIMDSv6 is the EC2 instance metadata service's IPv6 address.
var ecsIMDSv6 = net.ParseIP("fd00:ec2::254")

func blockedIP(ip net.IP) bool {
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.Equal(ecsIMDSv6)
}

type job struct {
	cfg Config
}

// request is a step's request, read from its params.
type request struct {
	URL      *url.URL
	Method   string
	Headers  map[string]string
	Body     string
	Timeout  time.Duration
	Accepted []int64
	StateExp *sel.Program
}

// Check implements external.Job.
func (j *job) Check(a *stepruntime.Attempt) error {
	_, err := j.request(a)
	return err
}

func (j *job) request(a *stepruntime.Attempt) (*request, error) {
	spec, ok := a.Params[ParamHTTP].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("an Http step needs the %q param: a MAP with url (and optionally method, headers, body, timeout, accepted_status_codes)", ParamHTTP)
	}
	for k := range spec {
		switch k {
		case "url", "method", "headers", "body", "timeout", "accepted_status_codes":
		default:
			return nil, fmt.Errorf("http.%s: unknown field; an Http step's http param has url, method, headers, body, timeout and accepted_status_codes", k)
		}
	}
	r := &request{Method: DefaultMethod, Timeout: j.cfg.DefaultTimeout}
	raw, _ := spec["url"].(string)
	if raw == "" {
		return nil, errors.New("http.url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("http.url %q: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("http.url %q: the scheme must be http or https", raw)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("http.url %q has no host", raw)
	}
	if !j.allowed(u.Hostname()) {
		return nil, fmt.Errorf("http.url: host %q is not in this engine's allowed hosts (MAESTRO_HTTP_ALLOWED_HOSTS)", u.Hostname())
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && blockedIP(ip) {
		return nil, fmt.Errorf("http.url: %v", errBlockedAddress)
	}
	r.URL = u
	if m, ok := spec["method"]; ok {
		s, _ := m.(string)
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "" || strings.IndexFunc(s, func(c rune) bool { return c < 'A' || c > 'Z' }) >= 0 {
			return nil, fmt.Errorf("http.method %v is not an HTTP method", m)
		}
		r.Method = s
	}
	if h, ok := spec["headers"]; ok {
		hs, err := stringMap(h)
		if err != nil {
			return nil, fmt.Errorf("http.headers: %v", err)
		}
		for k, v := range hs {
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
				return nil, fmt.Errorf("http.headers: %q is not a valid header", k)
			}
		}
		r.Headers = hs
	}
	if b, ok := spec["body"]; ok {
		s, ok := b.(string)
		if !ok {
			return nil, fmt.Errorf("http.body must be a STRING, got %T", b)
		}
		r.Body = s
	}
	if t, ok := spec["timeout"]; ok {
		d, err := duration(t)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("http.timeout %v: want a positive duration (\"30s\") or a number of seconds", t)
		}
		r.Timeout = d
	}
	if c, ok := spec["accepted_status_codes"]; ok {
		codes, err := params.Convert(workflow.ParamTypeLongArray, c)
		if err != nil {
			return nil, fmt.Errorf("http.accepted_status_codes: %v", err)
		}
		r.Accepted = codes.([]int64)
		for _, c := range r.Accepted {
			if c < 100 || c > 599 {
				return nil, fmt.Errorf("http.accepted_status_codes: %d is not an HTTP status", c)
			}
		}
	}
	if e, ok := a.Params[ParamStateExpr]; ok {
		src, _ := e.(string)
		if strings.TrimSpace(src) != "" {
			p, err := params.Compile(src)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", ParamStateExpr, err)
			}
			r.StateExp = p
		}
	}
	return r, nil
}

func (j *job) allowed(host string) bool {
	if len(j.cfg.AllowedHosts) == 0 {
		return true
	}
	host = strings.ToLower(host)
	for _, h := range j.cfg.AllowedHosts {
		if h == host || (strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:])) {
			return true
		}
	}
	return false
}

// Launch implements external.Job: it sends the request.
func (j *job) Launch(ctx context.Context, a *stepruntime.Attempt, key string) stepruntime.Result {
	r, err := j.request(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	data := map[string]any{"url": r.URL.Redacted(), "method": r.Method}
	reqCtx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	// The last check of the lease: the connection the request is written to
	// asks it before every write (guardedConn), so a node paused anywhere
	// before the request leaves and resumed after its lease sends nothing.
	// (An HTTP/2 connection carries many requests at once: there the check
	// before the launch is the last.)
	var withheld atomic.Bool
	reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if gc := asGuarded(info.Conn); gc != nil {
			gc.guard(func() bool {
				held := a.Held()
				if !held {
					withheld.Store(true)
				}
				return held
			})
		}
	}})
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(reqCtx, r.Method, r.URL.String(), body)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: fmt.Sprintf("build the request: %v", err), Data: data}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "maestro-aws")
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get(IdempotencyHeader) == "" {
		req.Header.Set(IdempotencyHeader, key)
	}
	if a.Node != "" && req.Header.Get(NodeHeader) == "" {
		req.Header.Set(NodeHeader, a.Node)
	}
	if a.CallbackToken != "" {
		// The server may call back with output params for this attempt
		// (docs/step-runtimes.md); a step cannot set the header itself.
		req.Header.Set(completion.TokenHeader, a.CallbackToken)
	}
	resp, err := j.cfg.Client.Do(req)
	if err != nil && withheld.Load() {
		// The intent stays: whoever runs the attempt next treats its
		// outcome as unknown.
		return external.Unknown(stepruntime.Continue, external.RetryDelay, "request withheld: "+stepruntime.ErrLeaseUncertain.Error())
	}
	if err != nil {
		return sendError(ctx, reqCtx, r, err, data)
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, j.cfg.MaxResponseBytes+1))
	if err != nil {
		return sendError(ctx, reqCtx, r, fmt.Errorf("read the response: %w", err), data)
	}
	data["status_code"] = int64(resp.StatusCode)
	if int64(len(payload)) > j.cfg.MaxResponseBytes {
		return stepruntime.Result{State: stepruntime.FatalError, Data: data,
			Message: fmt.Sprintf("HTTP %d: the response body is larger than %d bytes", resp.StatusCode, j.cfg.MaxResponseBytes)}
	}
	outputs := responseOutputs(resp, payload)
	state, err := j.state(ctx, a, r, resp.StatusCode, outputs)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Data: data, Message: err.Error()}
	}
	res := stepruntime.Result{State: state, Data: data,
		Message: fmt.Sprintf("%s %s answered %s", r.Method, r.URL.Redacted(), resp.Status)}
	if state == stepruntime.Done {
		res.Outputs = outputs
	} else {
		res.Message += ": " + excerpt(payload)
	}
	return res
}

// sendError maps a failed exchange: the step stopped or timed out (its
// context ended), the request's own timeout, or a connection error, which
// is the platform's.
func sendError(ctx, reqCtx context.Context, r *request, err error, data map[string]any) stepruntime.Result {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return stepruntime.Result{State: stepruntime.TimedOut, Data: data, Message: "the step timed out during the request"}
	case ctx.Err() != nil:
		return stepruntime.Result{State: stepruntime.Stopped, Data: data, Message: "the request was cancelled: the step is stopping"}
	case errors.Is(reqCtx.Err(), context.DeadlineExceeded):
		return stepruntime.Result{State: stepruntime.PlatformError, Data: data,
			Message: fmt.Sprintf("%s %s: no response within %s", r.Method, r.URL.Redacted(), r.Timeout)}
	case errors.Is(err, errBlockedAddress):
		return stepruntime.Result{State: stepruntime.FatalError, Data: data, Message: err.Error()}
	}
	return stepruntime.Result{State: stepruntime.PlatformError, Data: data,
		Message: fmt.Sprintf("%s %s: %v", r.Method, r.URL.Redacted(), err)}
}

// responseOutputs are the output params of a response.
func responseOutputs(resp *http.Response, payload []byte) map[string]any {
	headers := make(map[string]string, len(resp.Header))
	for k, vs := range resp.Header {
		headers[k] = strings.Join(vs, ", ")
	}
	body := string(payload)
	if !utf8.Valid(payload) {
		body = strings.ToValidUTF8(body, "\uFFFD")
	}
	out := map[string]any{
		OutputStatusCode:      params.Value{Type: workflow.ParamTypeLong, Value: int64(resp.StatusCode)},
		OutputResponseBody:    params.Value{Type: workflow.ParamTypeString, Value: body},
		OutputResponseHeaders: params.Value{Type: workflow.ParamTypeStringMap, Value: headers},
	}
	if trimmed := bytes.TrimSpace(payload); len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		var obj map[string]any
		if dec.Decode(&obj) == nil && !dec.More() {
			if v, err := params.Convert(workflow.ParamTypeMap, obj); err == nil {
				out[OutputResponseJSON] = params.Value{Type: workflow.ParamTypeMap, Value: v}
			}
		}
	}
	return out
}

// state maps a response to a state: through the step's state_expr when it
// has one, else accepted codes (2xx by default) are DONE, 4xx USER_ERROR,
// 5xx PLATFORM_ERROR and anything else USER_ERROR.
func (j *job) state(ctx context.Context, a *stepruntime.Attempt, r *request, code int, outputs map[string]any) (stepruntime.State, error) {
	if r.StateExp != nil {
		env := sel.MapEnv{}
		for k, v := range a.Params {
			env[k] = v
		}
		for k, v := range outputs {
			env[k] = v.(params.Value).Value
		}
		v, err := r.StateExp.Eval(ctx, env)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", ParamStateExpr, err)
		}
		name, _ := v.(string)
		switch strings.ToUpper(name) {
		case "DONE":
			return stepruntime.Done, nil
		case "USER_ERROR":
			return stepruntime.UserError, nil
		case "PLATFORM_ERROR":
			return stepruntime.PlatformError, nil
		case "FATAL_ERROR":
			return stepruntime.FatalError, nil
		}
		return 0, fmt.Errorf("%s returned %v; want DONE, USER_ERROR, PLATFORM_ERROR or FATAL_ERROR", ParamStateExpr, v)
	}
	if len(r.Accepted) > 0 {
		for _, c := range r.Accepted {
			if int64(code) == c {
				return stepruntime.Done, nil
			}
		}
	} else if code >= 200 && code < 300 {
		return stepruntime.Done, nil
	}
	switch {
	case code >= 500:
		return stepruntime.PlatformError, nil
	default:
		return stepruntime.UserError, nil
	}
}

// Find implements external.Job: a request cannot be looked up.
func (j *job) Find(context.Context, *stepruntime.Attempt, string) (stepruntime.Result, bool, error) {
	return stepruntime.Result{}, false, external.ErrCannotFind
}

// Poll implements external.Job. A request's answer is its launch's
// result, so there is never anything to poll; an attempt found in this
// state was interrupted and is failed for a retry.
func (j *job) Poll(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.PlatformError, Message: "the request's answer was lost"}
}

// Cancel implements external.Job: a sent request cannot be recalled.
func (j *job) Cancel(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

func excerpt(b []byte) string {
	const limit = 512
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}

func stringMap(v any) (map[string]string, error) {
	conv, err := params.Convert(workflow.ParamTypeStringMap, v)
	if err != nil {
		return nil, err
	}
	return conv.(map[string]string), nil
}

func duration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case string:
		return workflow.ParseDuration(x)
	case int64:
		return time.Duration(x) * time.Second, nil
	case float64:
		return time.Duration(x * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("want a duration, got %T", v)
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// errWithheld is what a guarded connection answers a write its request's
// lease check refused.
var errWithheld = errors.New("request withheld: " + stepruntime.ErrLeaseUncertain.Error())

// guardedConn asks the check of the request it carries before each write:
// the last moment a request can be held back.
type guardedConn struct {
	net.Conn
	check atomic.Pointer[func() bool]
}

func (c *guardedConn) guard(check func() bool) { c.check.Store(&check) }

func (c *guardedConn) Write(b []byte) (int, error) {
	if check := c.check.Load(); check != nil && !(*check)() {
		return 0, errWithheld
	}
	return c.Conn.Write(b)
}

// asGuarded finds the guardedConn under a connection (a TLS connection
// wraps it), nil when there is none.
func asGuarded(c net.Conn) *guardedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	gc, _ := c.(*guardedConn)
	return gc
}
