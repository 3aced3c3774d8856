package main

import (
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

func TestNetworkStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.network

	t.Run("resource counts", func(t *testing.T) {
		for typ, n := range map[string]float64{
			"AWS::EC2::VPC":           1,
			"AWS::EC2::Subnet":        6, // public, private, isolated in 2 AZs
			"AWS::EC2::NatGateway":    2, // one per AZ
			"AWS::EC2::VPCEndpoint":   1,
			"AWS::EC2::SecurityGroup": 2,
			// Rules between groups live with the database, never here.
			"AWS::EC2::SecurityGroupIngress": 0,
		} {
			check(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
		}
	})

	t.Run("s3 gateway endpoint", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::EC2::VPCEndpoint"), map[string]any{
				"VpcEndpointType": "Gateway",
			})
		})
	})

	t.Run("isolated subnets have no route out", func(t *testing.T) {
		for id, r := range tmpl.ofType("AWS::EC2::Route") {
			if path := asJSON(r["Metadata"]); strings.Contains(path, "/"+subnetIsolated+"Subnet") {
				t.Errorf("route %s in an isolated subnet: %s", id, path)
			}
		}
	})

	t.Run("engine security group", func(t *testing.T) {
		id := logicalID(t, f.stacks.Network.Stack, "EngineSecurityGroup")
		p := props(tmpl.Resources[id])
		if p["SecurityGroupIngress"] != nil {
			t.Errorf("engine group has ingress rules: %s", asJSON(p["SecurityGroupIngress"]))
		}
		egress, _ := p["SecurityGroupEgress"].([]any)
		if len(egress) != 1 || asJSON(egress[0]) != asJSON(map[string]any{
			"CidrIp": "0.0.0.0/0", "Description": "Allow all outbound traffic by default", "IpProtocol": "-1",
		}) {
			t.Errorf("engine group egress: got %s, want all outbound", asJSON(egress))
		}
	})

	t.Run("function security group", func(t *testing.T) {
		id := logicalID(t, f.stacks.Network.Stack, "FunctionSecurityGroup")
		p := props(tmpl.Resources[id])
		if p["SecurityGroupIngress"] != nil {
			t.Errorf("function group has ingress rules: %s", asJSON(p["SecurityGroupIngress"]))
		}
		want := []any{map[string]any{
			"CidrIp": "0.0.0.0/0", "Description": "HTTPS to AWS APIs", "FromPort": 443, "IpProtocol": "tcp", "ToPort": 443,
		}}
		if got := asJSON(p["SecurityGroupEgress"]); got != asJSON(want) {
			t.Errorf("function group egress: got %s, want only HTTPS", got)
		}
	})

	t.Run("default security group restricted", func(t *testing.T) {
		check(t, func() {
			tmpl.ResourceCountIs(jsii.String("Custom::VpcRestrictDefaultSG"), jsii.Number(1))
		})
	})
}
