package iceberg

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvCatalogURI, "")
	t.Setenv(EnvWarehouse, "")
	t.Setenv(EnvManifestLocation, "")
	if r, m, err := FromEnv(aws.Config{}, nil); r != nil || m != nil || err != nil {
		t.Fatalf("nothing configured: %v %v %v", r, m, err)
	}
	t.Setenv(EnvManifestLocation, "s3://b/p")
	if _, _, err := FromEnv(aws.Config{}, nil); err == nil {
		t.Error("a manifest location without a catalog accepted")
	}
	t.Setenv(EnvCatalogURI, "https://s3tables.us-east-1.amazonaws.com/iceberg")
	t.Setenv(EnvWarehouse, "arn:aws:s3tables:us-east-1:111122223333:bucket/wh")
	r, m, err := FromEnv(aws.Config{Region: "us-east-1"}, nil)
	if err != nil || r == nil || m == nil || m.Bucket != "b" || m.Prefix != "p/" || m.S3 == nil {
		t.Fatalf("configured: %v %+v %v", r, m, err)
	}
	if r.cfg.Warehouse != "arn:aws:s3tables:us-east-1:111122223333:bucket/wh" || signingName(r.cfg.Warehouse) != "s3tables" || signingName("111122223333") != "glue" {
		t.Errorf("reader config %+v", r.cfg)
	}
	t.Setenv(EnvManifestLocation, "")
	if _, m, err := FromEnv(aws.Config{}, nil); m != nil || err != nil {
		t.Errorf("no manifest location: %+v %v", m, err)
	}
	for _, bad := range []struct{ uri, wh, loc string }{
		{"ftp://x", "", ""},
		{"", "arn:aws:s3tables:us-east-1:111122223333:bucket/wh", ""},
		{"https://x/iceberg", "", "b/p"},
		{"https://x/iceberg", "", "s3:///p"},
	} {
		t.Setenv(EnvCatalogURI, bad.uri)
		t.Setenv(EnvWarehouse, bad.wh)
		t.Setenv(EnvManifestLocation, bad.loc)
		if _, _, err := FromEnv(aws.Config{}, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if m, err := ParseManifestLocation("s3://bucket"); err != nil || m.Bucket != "bucket" || m.Prefix != "" {
		t.Errorf("bucket only: %+v %v", m, err)
	}
}
