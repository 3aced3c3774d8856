package client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
)

// maxProxiedBody bounds a request body the proxy buffers to sign: API
// Gateway refuses payloads over 10 MB anyway.
const maxProxiedBody = 10 << 20

// Proxy is an http.Handler that forwards every request to the client's API,
// under its base path (an API Gateway stage), signed with SigV4 when the
// client signs: a browser on this machine can then use the web UI and the
// API reference that the deployed API serves, though the browser cannot
// sign (`maestro ui`, docs/ui.md). Responses stream through as they come
// (the live event stream included).
func (c *Client) Proxy() http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = c.base.Scheme
			pr.Out.URL.Host = c.base.Host
			pr.Out.URL.Path = strings.TrimRight(c.base.Path, "/") + pr.In.URL.Path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = c.base.Host
			// The deployed API names the caller by the signature; a local
			// server by the user header.
			if c.user != "" && pr.Out.Header.Get("user") == "" {
				pr.Out.Header.Set("user", c.user)
			}
			// Hop-by-hop and browser headers the signature must not cover
			// (the gateway would see them changed or gone).
			for _, h := range []string{"Cookie", "Origin", "Referer", "Accept-Encoding"} {
				pr.Out.Header.Del(h)
			}
		},
		Transport:     signingTransport{c: c},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, `{"status":"BAD_GATEWAY","message":%q,"errors":[],"retryable":true}`,
				"maestro ui could not reach "+c.base.String()+": "+err.Error())
		},
	}
	return rp
}

// signingTransport signs each outgoing request (buffering its body to hash
// it) and sends it with the client's HTTP settings, without a timeout:
// event streams stay open.
type signingTransport struct{ c *Client }

func (t signingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(req.Body, maxProxiedBody+1))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the request body: %w", err)
		}
		if len(body) > maxProxiedBody {
			return nil, fmt.Errorf("request body over %d bytes", maxProxiedBody)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	if t.c.signer != nil {
		if err := t.c.sign(req.Context(), req, body); err != nil {
			return nil, err
		}
	}
	return t.c.transport().RoundTrip(req)
}

// transport is the client's round tripper (the default one when its HTTP
// client names none).
func (c *Client) transport() http.RoundTripper {
	if c.http.Transport != nil {
		return c.http.Transport
	}
	return http.DefaultTransport
}
