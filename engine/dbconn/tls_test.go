package dbconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbconn/rdsca"
)

// A connection string built from a secret verifies the server's name and
// chain against the embedded RDS CAs; require and an explicit sslrootcert
// are left as they say.
func TestTrustRDS(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig(BuildURL("maestro.cluster-abc.us-east-1.rds.amazonaws.com", "5432", "maestro", "maestro_app", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	tc := cfg.TLSConfig
	if tc == nil || tc.InsecureSkipVerify || tc.ServerName != "maestro.cluster-abc.us-east-1.rds.amazonaws.com" || tc.RootCAs == nil {
		t.Fatalf("TLS config %+v: want verification of the host's name against set roots", tc)
	}
	certs, err := rdsca.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range certs {
		if c.Subject.CommonName == "Amazon RDS us-east-1 Root CA RSA2048 G1" || c.Subject.CommonName == "Amazon Root CA 1" {
			if _, err := c.Verify(x509.VerifyOptions{Roots: tc.RootCAs}); err != nil {
				t.Errorf("%s does not verify against the roots: %v", c.Subject.CommonName, err)
			}
		}
	}
	req, err := ParseConfig("postgres://u@db.example/x?sslmode=require")
	if err != nil {
		t.Fatal(err)
	}
	if !req.TLSConfig.InsecureSkipVerify || req.TLSConfig.RootCAs != nil {
		t.Errorf("sslmode=require changed: %+v", req.TLSConfig)
	}
}

// fakeTLSPostgres accepts PostgreSQL's SSLRequest and completes a TLS
// handshake with cert, then hangs up: enough to see whether a client
// accepts the certificate.
func fakeTLSPostgres(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 8)
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				_, _ = c.Write([]byte("S"))
				s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
				_ = s.Handshake()
				_ = s.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// verify-full refuses a server whose certificate no trusted CA signed: the
// embedded roots replace neither verification nor the name check.
func TestVerifyFullRefusesAnUnknownServer(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "db.example"},
		DNSNames: []string{"db.example"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	addr := fakeTLSPostgres(t, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	host, port, _ := net.SplitHostPort(addr)
	cfg, err := ParseConfig("postgres://u:p@db.example:" + port + "/x?sslmode=verify-full&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
	_, err = pgx.ConnectConfig(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("connect: %v; want the certificate refused", err)
	}
	// The same server with require: the handshake passes (the server then
	// hangs up), so the refusal above was the verification.
	cfg, _ = ParseConfig("postgres://u:p@db.example:" + port + "/x?sslmode=require&connect_timeout=5")
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
	if _, err = pgx.ConnectConfig(context.Background(), cfg); err == nil || strings.Contains(err.Error(), "certificate") {
		t.Fatalf("connect with require: %v; want a failure after the handshake", err)
	}
}
