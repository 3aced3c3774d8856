package tracing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// SigV4Transport signs each request with SigV4 before sending it: X-Ray's
// OTLP endpoint (https://xray.REGION.amazonaws.com/v1/traces) accepts only
// signed requests, authorized as xray:PutTraceSegments.
type SigV4Transport struct {
	Base        http.RoundTripper
	Credentials aws.CredentialsProvider
	Region      string
	Service     string
	signer      *v4.Signer
}

// RoundTrip signs a copy of req (its body read to hash it) and sends it.
func (t *SigV4Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, fmt.Errorf("sigv4: read body: %w", err)
		}
		_ = req.Body.Close()
	}
	signed := req.Clone(req.Context())
	signed.Body = io.NopCloser(bytes.NewReader(body))
	signed.ContentLength = int64(len(body))
	creds, err := t.Credentials.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("sigv4: credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	if t.signer == nil {
		t.signer = v4.NewSigner()
	}
	if err := t.signer.SignHTTP(req.Context(), creds, signed, hex.EncodeToString(sum[:]), t.Service, t.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("sigv4: sign: %w", err)
	}
	return t.Base.RoundTrip(signed)
}
