package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestDataStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.data

	t.Run("resource counts", func(t *testing.T) {
		for typ, n := range map[string]float64{
			"AWS::RDS::DBCluster":                         1,
			"AWS::RDS::DBInstance":                        1, // the writer; no readers by default
			"AWS::SecretsManager::Secret":                 1,
			"AWS::SecretsManager::SecretTargetAttachment": 1,
			"AWS::EC2::SecurityGroup":                     1,
		} {
			check(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
		}
	})

	t.Run("aurora postgresql serverless v2", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResource(jsii.String("AWS::RDS::DBCluster"), map[string]any{
				"Properties": map[string]any{
					"Engine":        "aurora-postgresql",
					"EngineVersion": assertions.Match_StringLikeRegexp(jsii.String(`^1[56]\.`)),
					"DatabaseName":  DatabaseName,
					"Port":          DatabasePort,
					"ServerlessV2ScalingConfiguration": map[string]any{
						"MinCapacity": f.cfg.DBMinCapacity,
						"MaxCapacity": f.cfg.DBMaxCapacity,
					},
					"StorageEncrypted":   true,
					"DeletionProtection": f.cfg.DBDeletionProtection,
				},
				"DeletionPolicy":      "Snapshot",
				"UpdateReplacePolicy": "Snapshot",
			})
		})
		check(t, func() {
			tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBInstance"), map[string]any{
				"DBInstanceClass":    "db.serverless",
				"PubliclyAccessible": false,
			})
		})
	})

	t.Run("cluster in isolated subnets", func(t *testing.T) {
		_, p := tmpl.one(t, "AWS::RDS::DBSubnetGroup")
		ids, _ := p["SubnetIds"].([]any)
		if len(ids) != 2 {
			t.Fatalf("subnet group: want 2 subnets, got %s", asJSON(ids))
		}
		for _, id := range ids {
			if !strings.Contains(asJSON(id), subnetIsolated+"Subnet") {
				t.Errorf("subnet group uses %s, want an isolated subnet", asJSON(id))
			}
		}
	})

	t.Run("generated secret", func(t *testing.T) {
		secretID, p := tmpl.one(t, "AWS::SecretsManager::Secret")
		gen, _ := p["GenerateSecretString"].(map[string]any)
		var tmplFields map[string]string
		if err := json.Unmarshal([]byte(gen["SecretStringTemplate"].(string)), &tmplFields); err != nil {
			t.Fatalf("secret template: %v", err)
		}
		if tmplFields["username"] != DatabaseUser || tmplFields["dbname"] != DatabaseName {
			t.Errorf("secret template = %v, want username %q and dbname %q", tmplFields, DatabaseUser, DatabaseName)
		}
		if gen["GenerateStringKey"] != "password" {
			t.Errorf("generated key = %v, want password", gen["GenerateStringKey"])
		}
		if got := tmpl.Resources[secretID]["DeletionPolicy"]; got != "Retain" {
			t.Errorf("secret DeletionPolicy = %v, want Retain next to a snapshotted cluster", got)
		}
		// The attachment adds host, port and engine to the same secret.
		_, att := tmpl.one(t, "AWS::SecretsManager::SecretTargetAttachment")
		if asJSON(att["SecretId"]) != asJSON(map[string]any{"Ref": secretID}) || att["TargetType"] != "AWS::RDS::DBCluster" {
			t.Errorf("attachment = %s", asJSON(att))
		}
	})

	t.Run("postgres only from engine and functions", func(t *testing.T) {
		dbSG := logicalID(t, f.stacks.Data.Stack, "DatabaseSecurityGroup")
		if in := props(tmpl.Resources[dbSG])["SecurityGroupIngress"]; in != nil {
			t.Errorf("database group has inline ingress: %s", asJSON(in))
		}
		engineSG := logicalID(t, f.stacks.Network.Stack, "EngineSecurityGroup")
		functionSG := logicalID(t, f.stacks.Network.Stack, "FunctionSecurityGroup")
		want := map[string]bool{engineSG: false, functionSG: false}
		for id, r := range tmpl.ofType("AWS::EC2::SecurityGroupIngress") {
			p := props(r)
			if asJSON(p["GroupId"]) != asJSON(map[string]any{"Fn::GetAtt": []any{dbSG, "GroupId"}}) {
				t.Errorf("ingress %s is not on the database group: %s", id, asJSON(p["GroupId"]))
				continue
			}
			if p["IpProtocol"] != "tcp" || p["FromPort"] != float64(DatabasePort) || p["ToPort"] != float64(DatabasePort) {
				t.Errorf("ingress %s opens %v %v-%v, want tcp %d", id, p["IpProtocol"], p["FromPort"], p["ToPort"], DatabasePort)
			}
			if p["CidrIp"] != nil || p["CidrIpv6"] != nil {
				t.Errorf("ingress %s is from a CIDR", id)
			}
			matched := false
			for sg := range want {
				if importsFrom(p["SourceSecurityGroupId"], *f.stacks.Network.StackName(), sg) {
					want[sg], matched = true, true
				}
			}
			if !matched {
				t.Errorf("ingress %s from unexpected source %s", id, asJSON(p["SourceSecurityGroupId"]))
			}
		}
		for sg, seen := range want {
			if !seen {
				t.Errorf("no ingress from %s", sg)
			}
		}
		// The database itself never opens connections.
		egress := asJSON(props(tmpl.Resources[dbSG])["SecurityGroupEgress"])
		if !strings.Contains(egress, "255.255.255.255/32") {
			t.Errorf("database group egress = %s, want none", egress)
		}
	})

	t.Run("functions may reach the database", func(t *testing.T) {
		functionSG := logicalID(t, f.stacks.Network.Stack, "FunctionSecurityGroup")
		_, p := tmpl.one(t, "AWS::EC2::SecurityGroupEgress")
		if !importsFrom(p["GroupId"], *f.stacks.Network.StackName(), functionSG) ||
			p["FromPort"] != float64(DatabasePort) || p["ToPort"] != float64(DatabasePort) {
			t.Errorf("egress = %s, want function group to the database on %d", asJSON(p), DatabasePort)
		}
	})
}

// TestDataStackOptions builds the data stack alone with the non-default
// options the context can set.
func TestDataStackOptions(t *testing.T) {
	loadFixture(t) // the shared App first: jsii is single-threaded anyway
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	network := NewNetworkStack(app, "Net", nil)
	data := NewDataStack(app, "Data", &DataStackProps{
		Vpc:                  network.Vpc,
		ClientSecurityGroups: nil,
		MinCapacity:          0,
		MaxCapacity:          16,
		Readers:              1,
		DeletionProtection:   false,
		RemovalPolicy:        awscdk.RemovalPolicy_DESTROY,
	})
	tmpl, err := newStackTemplate(data.Stack)
	if err != nil {
		t.Fatal(err)
	}
	check(t, func() {
		tmpl.HasResource(jsii.String("AWS::RDS::DBCluster"), map[string]any{
			"Properties": map[string]any{
				"ServerlessV2ScalingConfiguration": map[string]any{"MinCapacity": 0, "MaxCapacity": 16},
				"DeletionProtection":               false,
			},
			"DeletionPolicy": "Delete",
		})
	})
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBInstance"), jsii.Number(2)) })
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::EC2::SecurityGroupIngress"), jsii.Number(0)) })
	check(t, func() {
		tmpl.HasResource(jsii.String("AWS::SecretsManager::Secret"), map[string]any{"DeletionPolicy": "Delete"})
	})
}
