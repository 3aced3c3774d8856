package rdsca

import (
	"strings"
	"testing"
	"time"
)

// The bundle holds the roots Aurora's and RDS Proxy's certificates chain
// to, only certificate authorities, and none expired (regenerate with
// `make rds-ca` when this fails on expiry).
func TestBundle(t *testing.T) {
	certs, err := Certificates()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"Amazon RDS us-east-1 Root CA RSA2048 G1": false, // Aurora's default CA
		"Amazon RDS eu-west-1 Root CA RSA2048 G1": false,
		"Amazon RDS us-east-1 Root CA ECC384 G1":  false,
		"Amazon Root CA 1":                        false, // RDS Proxy's ACM certificates
		"Amazon Root CA 2":                        false,
	}
	now := time.Now()
	for _, c := range certs {
		if _, ok := want[c.Subject.CommonName]; ok {
			want[c.Subject.CommonName] = true
		}
		if now.After(c.NotAfter) {
			t.Errorf("%s expired on %s: run make rds-ca", c.Subject.CommonName, c.NotAfter.Format(time.DateOnly))
		}
		if !c.IsCA {
			t.Errorf("%s is not a certificate authority", c.Subject.CommonName)
		}
		if !strings.HasPrefix(c.Subject.CommonName, "Amazon") && !strings.HasPrefix(c.Subject.CommonName, "Starfield") {
			t.Errorf("unexpected authority %q", c.Subject.CommonName)
		}
	}
	for cn, found := range want {
		if !found {
			t.Errorf("the bundle lacks %s", cn)
		}
	}
	if len(certs) < 50 {
		t.Errorf("%d certificates, want every region's RDS CAs", len(certs))
	}
}
