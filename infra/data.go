package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Database facts shared by the stacks and their tests.
const (
	// DatabasePort is the PostgreSQL port the cluster listens on.
	DatabasePort = 5432
	// DatabaseName is the database created in the cluster.
	DatabaseName = "maestro"
	// DatabaseUser is the master user stored in the generated secret.
	DatabaseUser = "maestro"
)

// DataStackProps configures NewDataStack.
type DataStackProps struct {
	awscdk.StackProps
	// Vpc is the network; the cluster goes into its isolated subnets.
	Vpc awsec2.IVpc
	// ClientSecurityGroups are the only sources allowed to reach the database
	// on DatabasePort (the engine's and the functions' groups).
	ClientSecurityGroups []awsec2.ISecurityGroup
	// MinCapacity and MaxCapacity bound Serverless v2 scaling, in ACUs.
	MinCapacity, MaxCapacity float64
	// Readers is the number of reader instances besides the writer.
	Readers int
	// DeletionProtection turns on the cluster's deletion protection.
	DeletionProtection bool
	// RemovalPolicy applies to the cluster (SNAPSHOT, RETAIN or DESTROY); the
	// secret is retained unless the policy is DESTROY.
	RemovalPolicy awscdk.RemovalPolicy
}

// DataStack holds Aurora PostgreSQL Serverless v2, its generated secret and
// its security group.
type DataStack struct {
	awscdk.Stack
	// Cluster is the Aurora PostgreSQL cluster.
	Cluster awsrds.IDatabaseCluster
	// Secret is the generated master secret: a JSON object with the fields
	// host, port, dbname, username, password (and engine,
	// dbClusterIdentifier).
	Secret awssecretsmanager.ISecret
	// SecurityGroup is the cluster's security group.
	SecurityGroup awsec2.ISecurityGroup
}

// NewDataStack builds the Aurora PostgreSQL 16 Serverless v2 cluster. Schema
// migrations are not run here: the engine applies them at start-up.
func NewDataStack(scope constructs.Construct, id string, props *DataStackProps) *DataStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	sg := awsec2.NewSecurityGroup(stack, jsii.String("DatabaseSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              props.Vpc,
		Description:      jsii.String("Maestro Aurora PostgreSQL"),
		AllowAllOutbound: jsii.Bool(false),
	})
	for _, client := range props.ClientSecurityGroups {
		// AllowFrom adds the ingress rule here and, for a client whose egress
		// is restricted, the matching egress rule (also placed in this stack).
		sg.Connections().AllowFrom(client, awsec2.Port_Tcp(jsii.Number(DatabasePort)),
			jsii.String(fmt.Sprintf("PostgreSQL from %s", *client.Node().Id())))
	}

	readers := make([]awsrds.IClusterInstance, 0, props.Readers)
	for i := range props.Readers {
		readers = append(readers, awsrds.ClusterInstance_ServerlessV2(jsii.String(fmt.Sprintf("reader%d", i+1)),
			&awsrds.ServerlessV2ClusterInstanceProps{
				PubliclyAccessible: jsii.Bool(false),
				ScaleWithWriter:    jsii.Bool(true),
			}))
	}

	// The secret is made here rather than by the cluster so that it carries
	// dbname; the cluster's attachment adds host, port, engine and
	// dbClusterIdentifier.
	master := awsrds.NewDatabaseSecret(stack, jsii.String("Secret"), &awsrds.DatabaseSecretProps{
		Username: jsii.String(DatabaseUser),
		Dbname:   jsii.String(DatabaseName),
	})
	if props.RemovalPolicy == awscdk.RemovalPolicy_DESTROY {
		master.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY)
	} else {
		// A retained or snapshotted cluster is useless without its password.
		master.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
	}

	cluster := awsrds.NewDatabaseCluster(stack, jsii.String("Cluster"), &awsrds.DatabaseClusterProps{
		Engine: awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
			Version: awsrds.AuroraPostgresEngineVersion_VER_16_6(),
		}),
		Credentials:             awsrds.Credentials_FromSecret(master, nil),
		DefaultDatabaseName:     jsii.String(DatabaseName),
		Port:                    jsii.Number(DatabasePort),
		Writer:                  awsrds.ClusterInstance_ServerlessV2(jsii.String("writer"), &awsrds.ServerlessV2ClusterInstanceProps{PubliclyAccessible: jsii.Bool(false)}),
		Readers:                 &readers,
		ServerlessV2MinCapacity: jsii.Number(props.MinCapacity),
		ServerlessV2MaxCapacity: jsii.Number(props.MaxCapacity),
		Vpc:                     props.Vpc,
		VpcSubnets:              &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED},
		SecurityGroups:          &[]awsec2.ISecurityGroup{sg},
		StorageEncrypted:        jsii.Bool(true),
		Backup:                  &awsrds.BackupProps{Retention: awscdk.Duration_Days(jsii.Number(7))},
		CopyTagsToSnapshot:      jsii.Bool(true),
		DeletionProtection:      jsii.Bool(props.DeletionProtection),
		RemovalPolicy:           props.RemovalPolicy,
	})

	// The attached secret: consumers that read it wait for the attachment,
	// so host and port are in it by then.
	secret := cluster.Secret()

	awscdk.NewCfnOutput(stack, jsii.String("ClusterEndpoint"), &awscdk.CfnOutputProps{
		Value:       cluster.ClusterEndpoint().Hostname(),
		Description: jsii.String("Aurora writer endpoint"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("SecretArn"), &awscdk.CfnOutputProps{
		Value:       secret.SecretArn(),
		Description: jsii.String("Secrets Manager secret with host, port, dbname, username, password"),
	})

	return &DataStack{Stack: stack, Cluster: cluster, Secret: secret, SecurityGroup: sg}
}
