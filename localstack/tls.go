package localstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsFiles are the PEM files of a private emulator's certificate.
type tlsFiles struct {
	caFile    string // the throwaway CA, to trust
	chainFile string // the server certificate followed by the CA
	keyFile   string // the server key
}

// writeTLS makes a throwaway CA and a server certificate it signs for
// 127.0.0.1 and localhost, valid for a day, under dir. A CA rather than one
// self-signed certificate, because Node (the CDK CLI) refuses a self-signed
// leaf as its own trust anchor.
func writeTLS(dir string) (tlsFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tlsFiles{}, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tlsFiles{}, err
	}
	caTpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "maestro e2e emulator CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tlsFiles{}, fmt.Errorf("make emulator CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tlsFiles{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tlsFiles{}, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tlsFiles{}, fmt.Errorf("make emulator certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tlsFiles{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	f := tlsFiles{caFile: filepath.Join(dir, "ca.pem"), chainFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem")}
	for path, data := range map[string][]byte{
		f.caFile:    caPEM,
		f.chainFile: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...),
		f.keyFile:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return tlsFiles{}, err
		}
	}
	return f, nil
}
