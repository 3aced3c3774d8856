// Package client is a small Go client of Maestro's REST API, shared by the
// `maestro` command line. It talks to `maestro dev` on localhost (the caller
// named in the `user` header) or to the deployed API Gateway, signing each
// request with SigV4 from the standard AWS credential chain. Responses are
// decoded into this package's types in one place (decode.go), so a change of
// the wire shapes is a change there.
package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Client calls one Maestro API.
type Client struct {
	base   *url.URL
	http   *http.Client
	user   string
	signer *Signer
}

// Signer signs requests for API Gateway's IAM authorization.
type Signer struct {
	// Credentials come from the standard chain (config.LoadDefaultConfig).
	Credentials aws.CredentialsProvider
	// Region is the API's region.
	Region string
	// Service is the signing name; "execute-api" when empty.
	Service string
	signer  *v4.Signer
}

// Options configure a Client.
type Options struct {
	// BaseURL is the API's root, e.g. http://127.0.0.1:8080 or
	// https://abc.execute-api.us-east-1.amazonaws.com/prod. Required.
	BaseURL string
	// User is sent in the `user` header (maestro dev names the caller by
	// it); ignored by a deployed API, which takes the IAM principal.
	User string
	// Signer, when set, signs every request with SigV4.
	Signer *Signer
	// HTTPClient defaults to a client with a 60 s timeout; streams use
	// their own client without one.
	HTTPClient *http.Client
}

// New builds a Client.
func New(o Options) (*Client, error) {
	if o.BaseURL == "" {
		return nil, errors.New("client: BaseURL is required")
	}
	u, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: API URL %q is not an http(s) URL", o.BaseURL)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	if o.Signer != nil {
		if o.Signer.Service == "" {
			o.Signer.Service = "execute-api"
		}
		o.Signer.signer = v4.NewSigner()
	}
	return &Client{base: u, http: hc, user: o.User, signer: o.Signer}, nil
}

// BaseURL is the API root the client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// Error is an error answer of the API: Maestro's {status, message, errors,
// retryable} body with the HTTP status.
type Error struct {
	HTTPStatus int      `json:"-"`
	Status     string   `json:"status"`
	Message    string   `json:"message"`
	Errors     []string `json:"errors"`
	Retryable  bool     `json:"retryable"`
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.HTTPStatus)
	}
	s := fmt.Sprintf("%d %s: %s", e.HTTPStatus, e.Status, msg)
	if len(e.Errors) > 0 {
		s += "\n  " + strings.Join(e.Errors, "\n  ")
	}
	return s
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.HTTPStatus == http.StatusNotFound
}

// request builds a request to path (with query) carrying body.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body []byte, contentType string) (*http.Request, error) {
	u, err := url.Parse(c.base.String() + path)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.user != "" {
		req.Header.Set("user", c.user)
	}
	if c.signer != nil {
		if err := c.sign(ctx, req, body); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// sign adds SigV4 headers for the API Gateway execute-api service.
func (c *Client) sign(ctx context.Context, req *http.Request, body []byte) error {
	creds, err := c.signer.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("read AWS credentials: %w", err)
	}
	if err := c.signer.signer.SignHTTP(ctx, creds, req, payloadHash(body), c.signer.Service, c.signer.Region, time.Now()); err != nil {
		return fmt.Errorf("sign request: %w", err)
	}
	return nil
}

// Do sends a request and returns the answer's body; an error answer is an
// *Error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any) (json.RawMessage, error) {
	var raw []byte
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case yamlBody:
		raw, ct = b, "application/yaml"
	case json.RawMessage:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	req, err := c.request(ctx, method, path, query, raw, ct)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return nil, decodeError(resp.StatusCode, out)
	}
	return out, nil
}

// decodeError reads an error answer; a body that is not Maestro's error
// shape (a proxy's page, API Gateway's {"message"}) keeps its text.
func decodeError(code int, body []byte) error {
	e := &Error{HTTPStatus: code}
	if err := json.Unmarshal(body, e); err != nil || (e.Message == "" && e.Status == "") {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 500 {
			e.Message = e.Message[:500] + "…"
		}
	}
	if e.Status == "" {
		e.Status = strings.ToUpper(strings.ReplaceAll(http.StatusText(code), " ", "_"))
	}
	return e
}

// yamlBody is a request body sent as YAML.
type yamlBody []byte

// get is Do for a GET decoded into out.
func (c *Client) get(ctx context.Context, path string, query url.Values, out any) (json.RawMessage, error) {
	raw, err := c.Do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("decode answer of GET %s: %w", path, err)
		}
	}
	return raw, nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// payloadHash is the hex SHA-256 of a request body, as SigV4 signs it.
func payloadHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}
