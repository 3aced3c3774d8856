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
			"AWS::SecretsManager::Secret":                 3, // master, owner, app
			"AWS::SecretsManager::SecretTargetAttachment": 3,
			"AWS::SecretsManager::RotationSchedule":       3,
			"AWS::EC2::SecurityGroup":                     6, // database, proxy, migrate and three rotation functions
			MigrationResourceType:                         1,
			"AWS::RDS::DBProxy":                           1,
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
		secretID := logicalID(t, f.stacks.Data.Stack, "Secret")
		p := props(tmpl.Resources[secretID])
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
		att := props(tmpl.Resources[logicalID(t, f.stacks.Data.Stack, "Secret", "Attachment")])
		if asJSON(att["SecretId"]) != asJSON(map[string]any{"Ref": secretID}) || att["TargetType"] != "AWS::RDS::DBCluster" {
			t.Errorf("attachment = %s", asJSON(att))
		}
	})

	t.Run("postgres only from the engine, the proxy, the migrate function and the rotation functions", func(t *testing.T) {
		dbSG := logicalID(t, f.stacks.Data.Stack, "DatabaseSecurityGroup")
		proxySG := logicalID(t, f.stacks.Data.Stack, "ProxySecurityGroup")
		rotationSG := logicalID(t, f.stacks.Data.Stack, "Cluster", "RotationSingleUser", "SecurityGroup")
		ownerRotationSG := logicalID(t, f.stacks.Data.Stack, "OwnerSecretRotation", "SecurityGroup")
		appRotationSG := logicalID(t, f.stacks.Data.Stack, "AppSecretRotation", "SecurityGroup")
		migrateSG := logicalID(t, f.stacks.Data.Stack, "MigrateSecurityGroup")
		engineSG := logicalID(t, f.stacks.Network.Stack, "EngineSecurityGroup")
		functionSG := logicalID(t, f.stacks.Network.Stack, "FunctionSecurityGroup")
		for _, sg := range []string{dbSG, proxySG} {
			if in := props(tmpl.Resources[sg])["SecurityGroupIngress"]; in != nil {
				t.Errorf("%s has inline ingress: %s", sg, asJSON(in))
			}
		}
		getAtt := func(id string) string { return asJSON(map[string]any{"Fn::GetAtt": []any{id, "GroupId"}}) }
		// target group -> sources seen
		seen := map[string]map[string]bool{dbSG: {}, proxySG: {}}
		for id, r := range tmpl.ofType("AWS::EC2::SecurityGroupIngress") {
			p := props(r)
			if p["IpProtocol"] != "tcp" || asJSON(p["FromPort"]) != asJSON(p["ToPort"]) {
				t.Errorf("ingress %s opens %v %v-%v, want one tcp port", id, p["IpProtocol"], p["FromPort"], p["ToPort"])
			}
			if port := asJSON(p["FromPort"]); port != "5432" && !strings.Contains(port, "Endpoint.Port") {
				t.Errorf("ingress %s opens port %s, want %d", id, port, DatabasePort)
			}
			if p["CidrIp"] != nil || p["CidrIpv6"] != nil {
				t.Errorf("ingress %s is from a CIDR", id)
			}
			src := asJSON(p["SourceSecurityGroupId"])
			switch {
			case importsFrom(p["SourceSecurityGroupId"], *f.stacks.Network.StackName(), engineSG):
				src = "engine"
			case importsFrom(p["SourceSecurityGroupId"], *f.stacks.Network.StackName(), functionSG):
				src = "functions"
			case src == getAtt(proxySG):
				src = "proxy"
			case src == getAtt(rotationSG):
				src = "rotation"
			case src == getAtt(ownerRotationSG):
				src = "owner rotation"
			case src == getAtt(appRotationSG):
				src = "app rotation"
			case src == getAtt(migrateSG):
				src = "migrate"
			}
			for _, target := range []string{dbSG, proxySG} {
				if asJSON(p["GroupId"]) == getAtt(target) {
					seen[target][src] = true
				}
			}
		}
		if got := asJSON(seen[dbSG]); got != `{"app rotation":true,"engine":true,"migrate":true,"owner rotation":true,"proxy":true,"rotation":true}` {
			t.Errorf("database reachable from %s, want the engine, the proxy, the migrate function and the rotation functions only", got)
		}
		if got := asJSON(seen[proxySG]); got != `{"functions":true}` {
			t.Errorf("proxy reachable from %s, want the functions only", got)
		}
		// The database itself never opens connections.
		egress := asJSON(props(tmpl.Resources[dbSG])["SecurityGroupEgress"])
		if !strings.Contains(egress, "255.255.255.255/32") {
			t.Errorf("database group egress = %s, want none", egress)
		}
	})

	t.Run("functions reach only the proxy", func(t *testing.T) {
		functionSG := logicalID(t, f.stacks.Network.Stack, "FunctionSecurityGroup")
		proxySG := logicalID(t, f.stacks.Data.Stack, "ProxySecurityGroup")
		n := 0
		for id, r := range tmpl.ofType("AWS::EC2::SecurityGroupEgress") {
			p := props(r)
			if !importsFrom(p["GroupId"], *f.stacks.Network.StackName(), functionSG) {
				continue
			}
			n++
			if asJSON(p["DestinationSecurityGroupId"]) != asJSON(map[string]any{"Fn::GetAtt": []any{proxySG, "GroupId"}}) ||
				p["FromPort"] != float64(DatabasePort) {
				t.Errorf("function egress %s = %s, want the proxy on %d", id, asJSON(p), DatabasePort)
			}
		}
		if n != 1 {
			t.Errorf("%d egress rules of the function group here, want 1", n)
		}
	})

	t.Run("rds proxy caps connections and requires tls", func(t *testing.T) {
		secretAttachment := logicalID(t, f.stacks.Data.Stack, "AppSecret", "Attachment")
		_, p := tmpl.one(t, "AWS::RDS::DBProxy")
		if p["EngineFamily"] != "POSTGRESQL" || p["RequireTLS"] != true {
			t.Errorf("proxy = %s", asJSON(p))
		}
		if !strings.Contains(asJSON(p["Auth"]), secretAttachment) {
			t.Errorf("proxy auth %s, want the application role's secret", asJSON(p["Auth"]))
		}
		_, tg := tmpl.one(t, "AWS::RDS::DBProxyTargetGroup")
		pool := tg["ConnectionPoolConfigurationInfo"].(map[string]any)
		if pool["MaxConnectionsPercent"] != float64(f.cfg.DBProxyMaxConnectionsPercent) || f.cfg.DBProxyMaxConnectionsPercent != 50 {
			t.Errorf("connection pool %s, want MaxConnectionsPercent 50", asJSON(pool))
		}
	})

	t.Run("secret rotation", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SecretsManager::RotationSchedule"), map[string]any{
				"RotationRules": map[string]any{"ScheduleExpression": "rate(30 days)"},
			})
		})
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
