package main

import (
	"strings"
	"testing"
)

// With the table-change sources and the Iceberg catalog configured
// (allContext), EventBridge rules send the Glue databases' table state
// changes and the table buckets' UpdateTableMetadataLocation calls to the
// signals queue, and the signals and API functions and the engine get the
// catalog's environment and read grants, and may write manifests; with
// the defaults there is none of it.
func TestTableChangeSources(t *testing.T) {
	on := loadAllContextFixture(t)
	rules := on.signals.ofType("AWS::Events::Rule")
	var patterns []string
	for _, r := range rules {
		p := props(r)
		if !strings.Contains(asJSON(p["Targets"]), "SignalsQueue") {
			t.Errorf("rule %s does not target the signals queue", asJSON(p))
		}
		patterns = append(patterns, asJSON(p["EventPattern"]))
	}
	joined := strings.Join(patterns, "\n")
	for _, want := range []string{`"source":["aws.glue"]`, `"detail-type":["Glue Data Catalog Table State Change"]`, `"databaseName":["sales"]`,
		`"source":["aws.s3tables"]`, `"detail-type":["AWS API Call via CloudTrail"]`, `"eventName":["UpdateTableMetadataLocation"]`,
		`"tableBucketARN":["arn:aws:s3tables:us-east-1:123456789012:bucket/lake"]`} {
		if !strings.Contains(joined, want) {
			t.Errorf("no rule pattern has %s: %s", want, joined)
		}
	}
	if len(rules) != 2 {
		t.Errorf("%d rules, want 2", len(rules))
	}
	envOf := func(tmpl *stackTemplate) map[string]any {
		for _, r := range tmpl.ofType("AWS::Lambda::Function") {
			if env, ok := props(r)["Environment"].(map[string]any); ok {
				if vars, ok := env["Variables"].(map[string]any); ok && vars["MAESTRO_ICEBERG_CATALOG_URI"] != nil {
					return vars
				}
			}
		}
		return nil
	}
	for name, tmpl := range map[string]*stackTemplate{"signals": on.signals, "api": on.api} {
		vars := envOf(tmpl)
		if vars["MAESTRO_ICEBERG_CATALOG_URI"] != "https://s3tables.us-east-1.amazonaws.com/iceberg" ||
			vars["MAESTRO_ICEBERG_WAREHOUSE"] != "arn:aws:s3tables:us-east-1:123456789012:bucket/lake" ||
			vars["MAESTRO_ICEBERG_MANIFEST_LOCATION"] != "s3://lake-manifests/incremental/" {
			t.Errorf("%s function environment %s", name, asJSON(vars))
		}
		policies := asJSON(tmpl.ofType("AWS::IAM::Policy"))
		for _, want := range []string{"s3tables:GetTableData", "arn:aws:s3tables:us-east-1:123456789012:bucket/lake/table/*",
			"glue:GetTable", "s3:PutObject", "lake-manifests/incremental/*"} {
			if !strings.Contains(policies, want) {
				t.Errorf("%s function's policies lack %s", name, want)
			}
		}
	}
	if env := on.stacks.Engine.Environment; env["MAESTRO_ICEBERG_CATALOG_URI"] == nil {
		t.Errorf("engine environment %s lacks the catalog", asJSON(env))
	}
	if policies := asJSON(on.engine.ofType("AWS::IAM::Policy")); !strings.Contains(policies, "s3tables:GetTableMetadataLocation") {
		t.Error("the engine task role may not read the catalog")
	}

	off := loadFixture(t)
	if n := len(off.signals.ofType("AWS::Events::Rule")); n != 0 {
		t.Errorf("%d table-change rules by default, want none", n)
	}
	if envOf(off.signals) != nil || envOf(off.api) != nil || off.stacks.Engine.Environment["MAESTRO_ICEBERG_CATALOG_URI"] != nil {
		t.Error("a catalog in the environment by default")
	}
	for _, tmpl := range []*stackTemplate{off.signals, off.api, off.engine} {
		if strings.Contains(asJSON(tmpl.ofType("AWS::IAM::Policy")), "s3tables:") {
			t.Errorf("%s: S3 Tables grants by default", *tmpl.stack.StackName())
		}
	}
}

func TestTableChangeConfigChecks(t *testing.T) {
	ok := DefaultConfig()
	ok.IcebergCatalogURI, ok.IcebergWarehouse = "https://glue.us-east-1.amazonaws.com/iceberg", "123456789012"
	ok.TableChangeGlueDatabases = []string{"sales"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for name, edit := range map[string]func(*Config){
		"sources without a catalog": func(c *Config) { c.IcebergCatalogURI, c.IcebergWarehouse = "", "" },
		"warehouse without a uri":   func(c *Config) { c.IcebergCatalogURI = "" },
		"uri not http":              func(c *Config) { c.IcebergCatalogURI = "glue" },
		"bad table bucket":          func(c *Config) { c.TableChangeTableBuckets = []string{"lake"} },
		"bad database":              func(c *Config) { c.TableChangeGlueDatabases = []string{"a/b"} },
		"bad manifest location":     func(c *Config) { c.IcebergManifestLocation = "lake/incremental" },
	} {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
