package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// IcebergAccess is the Iceberg catalog the processes that run the signal
// broker (the signals and API functions, the engine) read: the snapshot a
// Glue or S3 Tables event announces, and the files an incremental run's
// range added; and where they write the manifest of a large range
// (docs/incremental.md).
type IcebergAccess struct {
	// CatalogURI is MAESTRO_ICEBERG_CATALOG_URI; empty: no catalog.
	CatalogURI string
	// Warehouse is MAESTRO_ICEBERG_WAREHOUSE.
	Warehouse string
	// TableBuckets and GlueDatabases are the table-change sources: their
	// tables are read.
	TableBuckets  []string
	GlueDatabases []string
	// ManifestLocation is MAESTRO_ICEBERG_MANIFEST_LOCATION (s3://bucket/prefix/).
	ManifestLocation string
}

// IcebergAccessOf is the access a configuration asks for.
func IcebergAccessOf(cfg Config) IcebergAccess {
	return IcebergAccess{CatalogURI: cfg.IcebergCatalogURI, Warehouse: cfg.IcebergWarehouse,
		TableBuckets: cfg.TableChangeTableBuckets, GlueDatabases: cfg.TableChangeGlueDatabases,
		ManifestLocation: cfg.IcebergManifestLocation}
}

// Environment is the processes' environment for the catalog; none when no
// catalog is configured.
func (a IcebergAccess) Environment() map[string]string {
	if a.CatalogURI == "" {
		return nil
	}
	env := map[string]string{"MAESTRO_ICEBERG_CATALOG_URI": a.CatalogURI, "MAESTRO_ICEBERG_WAREHOUSE": a.Warehouse}
	if a.ManifestLocation != "" {
		env["MAESTRO_ICEBERG_MANIFEST_LOCATION"] = a.ManifestLocation
	}
	return env
}

// Grant lets role read the catalog's tables (S3 Tables' table buckets
// named by the warehouse and the sources; the Glue Data Catalog and the
// source databases otherwise) and write manifests under ManifestLocation.
// A Glue table's files are read from its own S3 location, which is not
// granted here (docs/incremental.md).
func (a IcebergAccess) Grant(stack awscdk.Stack, role awsiam.IRole) {
	if a.CatalogURI == "" {
		return
	}
	var buckets []string
	if tableBucketARN.MatchString(a.Warehouse) {
		buckets = append(buckets, a.Warehouse)
	}
	for _, b := range a.TableBuckets {
		if b != a.Warehouse {
			buckets = append(buckets, b)
		}
	}
	if len(buckets) > 0 {
		var resources []*string
		for _, b := range buckets {
			resources = append(resources, jsii.String(b), jsii.String(b+"/table/*"))
		}
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("ReadIcebergTablesS3Tables"),
			Actions: jsii.Strings("s3tables:GetTableBucket", "s3tables:GetNamespace", "s3tables:GetTable",
				"s3tables:GetTableMetadataLocation", "s3tables:GetTableData"),
			Resources: &resources,
		}))
		nagSuppress(role, "AwsSolutions-IAM5", "the Iceberg catalog's tables are read (metadata and data files) in the configured table buckets, "+
			"whose tables come and go (maestro:icebergWarehouse, maestro:tableChangeTableBuckets)", `/^Resource::arn:aws[a-z-]*:s3tables:.*\/table\/\*$/`)
	}
	if !tableBucketARN.MatchString(a.Warehouse) || len(a.GlueDatabases) > 0 {
		resources := []*string{stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("glue"), Resource: jsii.String("catalog")})}
		for _, db := range a.GlueDatabases {
			resources = append(resources,
				stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("glue"), Resource: jsii.String("database"), ResourceName: jsii.String(db)}),
				stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("glue"), Resource: jsii.String("table"), ResourceName: jsii.String(db + "/*")}))
		}
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadIcebergTablesGlue"),
			Actions:   jsii.Strings("glue:GetCatalog", "glue:GetDatabase", "glue:GetTable"),
			Resources: &resources,
		}))
		nagSuppress(role, "AwsSolutions-IAM5", "the tables of the configured Glue databases are read (maestro:tableChangeGlueDatabases)",
			`/^Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table\/.*\/\*$/`)
	}
	if bucket, prefix, ok := strings.Cut(strings.TrimPrefix(a.ManifestLocation, "s3://"), "/"); ok && bucket != "" {
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("WriteIcebergManifests"),
			Actions:   jsii.Strings("s3:PutObject"),
			Resources: jsii.Strings("arn:" + *awscdk.Aws_PARTITION() + ":s3:::" + bucket + "/" + prefix + "*"),
		}))
		nagSuppress(role, "AwsSolutions-IAM5", "one manifest per incremental run's range under maestro:icebergManifestLocation",
			`/^Resource::arn:<AWS::Partition>:s3:::.*\*$/`)
	}
}
