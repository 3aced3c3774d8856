// Package localstack runs the AWS side of Maestro locally for tests: a
// LocalStack-compatible endpoint that the real aws-sdk-go-v2 clients talk
// to.
//
// The endpoint is MAESTRO_AWS_ENDPOINT when set (LocalStack itself, e.g.
// from docker-compose.yml here). Otherwise the first test that needs it
// starts ministack, a LocalStack drop-in installed from PyPI by
// `make emulator`, which runs provided.al2023 Lambda bootstraps as local
// processes, so no Docker engine is needed. Later test binaries of the same
// `go test` run reuse it; `make test` stops it at the end.
package localstack

import (
	"bytes"
	"context"
	cryptotls "crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/maestro-aws/maestro/engine/awsconf"
)

// Region is the region tests use.
const Region = "us-east-1"

// StateDir holds the shared emulator's pid, port and log.
func StateDir() string {
	if d := os.Getenv("MAESTRO_EMULATOR_DIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("maestro-ministack-%d", os.Getuid()))
}

var (
	once     sync.Once
	endpoint string
	startErr error
)

// Endpoint returns the emulator's URL, starting ministack if needed.
func Endpoint(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if e := os.Getenv("MAESTRO_AWS_ENDPOINT"); e != "" {
			endpoint = e
			return
		}
		endpoint, startErr = startShared()
	})
	if startErr != nil {
		t.Fatalf("localstack: %v", startErr)
	}
	return endpoint
}

// Config is an AWS config whose clients call the shared emulator.
func Config(t testing.TB) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(Endpoint(t)))
	if err != nil {
		t.Fatalf("localstack: aws config: %v", err)
	}
	return cfg
}

// ministackBinary finds the ministack command: $MAESTRO_MINISTACK, then the
// virtualenv `make emulator` creates under .maestro/ at the module root,
// then $PATH.
func ministackBinary() (string, error) {
	if p := os.Getenv("MAESTRO_MINISTACK"); p != "" {
		return p, nil
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".maestro", "venv", "bin", "ministack")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("ministack"); err == nil {
		return p, nil
	}
	return "", errors.New("ministack is not installed: run `make emulator` (or set MAESTRO_AWS_ENDPOINT to a LocalStack endpoint)")
}

// duckDBHome is the HOME ministack runs with when `make emulator` made
// one beside its virtualenv: its .duckdb/extensions holds the DuckDB
// extensions installed from PyPI (iceberg, httpfs, avro), which DuckDB
// loads from there without downloading them, so that the emulator's Athena
// reads S3 Tables' Iceberg tables. None when there is no such directory.
func duckDBHome(bin string) []string {
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	home := filepath.Join(filepath.Dir(filepath.Dir(bin)), "duckdb-home")
	if _, err := os.Stat(filepath.Join(home, ".duckdb", "extensions")); err != nil {
		return nil
	}
	return []string{"HOME=" + home}
}

// ModuleRoot is the repository root (the directory holding go.mod).
func ModuleRoot() (string, error) { return moduleRoot() }

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

func startShared() (string, error) {
	dir := StateDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck

	if b, err := os.ReadFile(filepath.Join(dir, "port")); err == nil {
		url := "http://127.0.0.1:" + strings.TrimSpace(string(b))
		if healthy(url) {
			return url, nil
		}
	}
	bin, err := ministackBinary()
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "ministack.log"))
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GATEWAY_PORT="+strconv.Itoa(port), "MINISTACK_HOST=127.0.0.1",
		"MINISTACK_REGION="+Region, "LOG_LEVEL=WARNING")
	cmd.Env = append(cmd.Env, duckDBHome(bin)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: it outlives this test binary for the next ones.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start ministack: %w", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	_ = cmd.Process.Release()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !healthy(url) {
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(filepath.Join(dir, "ministack.log"))
			return "", fmt.Errorf("ministack did not become healthy on %s: %s", url, log)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "port"), []byte(strconv.Itoa(port)), 0o644); err != nil {
		return "", err
	}
	return url, nil
}

func healthy(url string) bool {
	return healthyWith(&http.Client{Timeout: time.Second}, url)
}

func healthyWith(c *http.Client, url string) bool {
	resp, err := c.Get(url + "/_localstack/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Private is a ministack of a test's own (StartPrivate).
type Private struct {
	// URL is its https endpoint on 127.0.0.1.
	URL string
	// CAFile is the PEM of the certificate authority that signed its
	// certificate: trust it (AWS_CA_BUNDLE, SSL_CERT_FILE,
	// NODE_EXTRA_CA_CERTS) to call it.
	CAFile string
	// CallLog is the file every Lambda it runs records its AWS calls to
	// (engine/awsconf); give the engine the same MAESTRO_AWS_CALL_LOG.
	CallLog string
}

// StartPrivate starts a ministack of the test's own on a free port of
// 127.0.0.1, with its state under dir, and stops it when the test ends. The
// end-to-end test deploys into a fresh one rather than the shared emulator
// other tests use, so that its CloudFormation stacks never meet theirs.
//
// It runs as AWS does where the shared emulator is lenient: over TLS, with a
// certificate from a throwaway CA made here, so that the TLS-only resource
// policies CDK writes (aws:SecureTransport) hold, and with AUTH=true, so
// that every call a Lambda makes is evaluated against its execution role's
// policies and every signature is verified. The Lambdas it runs inherit its
// environment: the CA to trust, and the call log to record to.
func StartPrivate(t testing.TB, dir string) Private {
	t.Helper()
	bin, err := ministackBinary()
	if err != nil {
		t.Fatalf("localstack: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tls, err := writeTLS(filepath.Join(dir, "tls"))
	if err != nil {
		t.Fatalf("localstack: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "ministack.log"))
	if err != nil {
		t.Fatal(err)
	}
	p := Private{URL: "https://127.0.0.1:" + strconv.Itoa(port), CAFile: tls.caFile,
		CallLog: filepath.Join(dir, "aws-calls.jsonl")}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	// ministack hands its own AWS_ENDPOINT_URL to the Lambda processes it
	// runs, so that their SDK clients (Secrets Manager, SQS, SNS) call it.
	cmd.Env = append(os.Environ(), "GATEWAY_PORT="+strconv.Itoa(port), "MINISTACK_HOST=127.0.0.1",
		"MINISTACK_REGION="+Region, "LOG_LEVEL=WARNING", "AWS_ENDPOINT_URL="+p.URL,
		"AUTH=true", "USE_SSL=1", "MINISTACK_SSL_CERT="+tls.chainFile, "MINISTACK_SSL_KEY="+tls.keyFile,
		"SSL_CERT_FILE="+tls.caFile, "AWS_CA_BUNDLE="+tls.caFile, "NODE_EXTRA_CA_CERTS="+tls.caFile,
		awsconf.CallLogEnv+"="+p.CallLog)
	cmd.Env = append(cmd.Env, duckDBHome(bin)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that the Lambda processes it starts stop
	// with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start ministack: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
	client := p.HTTPClient(t)
	deadline := time.Now().Add(60 * time.Second)
	for !healthyWith(client, p.URL) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "ministack.log"))
			t.Fatalf("ministack did not become healthy on %s: %s", p.URL, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return p
}

// HTTPClient is an HTTP client that trusts the emulator's certificate.
func (p Private) HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", p.CAFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &cryptotls.Config{RootCAs: pool, MinVersion: cryptotls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// Config is an AWS config whose clients call the emulator with the
// account's root credentials (allowed everything under AUTH).
func (p Private) Config(t testing.TB) aws.Config {
	t.Helper()
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(p.URL), config.WithCustomCABundle(bytes.NewReader(ca)))
	if err != nil {
		t.Fatalf("localstack: aws config: %v", err)
	}
	return cfg
}
