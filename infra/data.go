package main

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
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
	// ClientSecurityGroups may reach the database directly on DatabasePort
	// (the engine's group).
	ClientSecurityGroups []awsec2.ISecurityGroup
	// ProxyClientSecurityGroups reach the database through RDS Proxy when
	// Proxy is set, directly otherwise (the functions' group).
	ProxyClientSecurityGroups []awsec2.ISecurityGroup
	// Proxy puts RDS Proxy in front of the cluster for ProxyClientSecurityGroups.
	Proxy bool
	// ProxyMaxConnectionsPercent caps the proxy's share of the database's
	// max_connections.
	ProxyMaxConnectionsPercent int
	// RotationDays rotates the master password every so many days; 0 never.
	RotationDays int
	// EmulatorURL, when set, replaces Aurora with the PostgreSQL at this URL
	// (the emulator target): the stack then holds only a secret in the RDS
	// shape pointing at it.
	EmulatorURL string
	// MinCapacity and MaxCapacity bound Serverless v2 scaling, in ACUs.
	MinCapacity, MaxCapacity float64
	// Readers is the number of reader instances besides the writer.
	Readers int
	// DeletionProtection turns on the cluster's deletion protection.
	DeletionProtection bool
	// RemovalPolicy applies to the cluster (SNAPSHOT, RETAIN or DESTROY); the
	// secret is retained unless the policy is DESTROY.
	RemovalPolicy awscdk.RemovalPolicy
	// MigrateCode is functions/migrate's package: with it the stack runs the
	// migrations on deploy (NewMigration); nil leaves them out.
	MigrateCode awslambda.Code
	// MigrateArchitecture is that package's architecture; arm64 when nil.
	MigrateArchitecture awslambda.Architecture
	// LogRetention applies to the migrate function's log group.
	LogRetention awslogs.RetentionDays
}

// DataStack holds Aurora PostgreSQL Serverless v2, its generated secret and
// its security group.
type DataStack struct {
	awscdk.Stack
	// Cluster is the Aurora PostgreSQL cluster.
	Cluster awsrds.IDatabaseCluster
	// Secret is the application role's secret (DatabaseAppUser), the one the
	// engine and the functions connect with: a JSON object with the fields
	// host, port, dbname, username, password (and engine,
	// dbClusterIdentifier).
	Secret awssecretsmanager.ISecret
	// MasterSecret is the generated master user's secret; only the migrate
	// function and the master rotation read it.
	MasterSecret awssecretsmanager.ISecret
	// OwnerSecret is the schema owner's secret (DatabaseOwnerUser).
	OwnerSecret awssecretsmanager.ISecret
	// Migration runs the migrations on deploy; nil without MigrateCode.
	Migration *Migration
	// SecurityGroup is the cluster's security group.
	SecurityGroup awsec2.ISecurityGroup
	// Proxy is the RDS Proxy the functions connect through; nil without one.
	Proxy awsrds.IDatabaseProxy
}

// ProxyEndpoint is the host functions connect to instead of the secret's
// (DB_PROXY_ENDPOINT), or "" when they connect directly.
func (d *DataStack) ProxyEndpoint() string {
	if d.Proxy == nil {
		return ""
	}
	return *d.Proxy.Endpoint()
}

// NewDataStack builds the Aurora PostgreSQL 16 Serverless v2 cluster, the
// secrets of its three users (master, owner, application role) and, with
// MigrateCode, the migrate step that runs on deploy before any stack with
// code (NewMigration).
func NewDataStack(scope constructs.Construct, id string, props *DataStackProps) *DataStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)
	if props.EmulatorURL != "" {
		d := newEmulatorData(stack, props.EmulatorURL)
		d.OwnerSecret, d.Secret = newEmulatorRoleSecrets(stack, props.EmulatorURL)
		d.MasterSecret = byCompleteARN(d.MasterSecret, "MasterSecretARN")
		d.OwnerSecret = byCompleteARN(d.OwnerSecret, "OwnerSecretARN")
		d.Secret = byCompleteARN(d.Secret, "AppSecretARN")
		if props.MigrateCode != nil {
			d.Migration = newDataMigration(stack, props, nil, d)
		}
		return d
	}

	sg := awsec2.NewSecurityGroup(stack, jsii.String("DatabaseSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              props.Vpc,
		Description:      jsii.String("Maestro Aurora PostgreSQL"),
		AllowAllOutbound: jsii.Bool(false),
	})
	direct := props.ClientSecurityGroups
	if !props.Proxy {
		direct = append(slices.Clone(direct), props.ProxyClientSecurityGroups...)
	}
	allowPostgres(sg, direct)

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
			Version: awsrds.AuroraPostgresEngineVersion_VER_16_13(),
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

	if props.RotationDays > 0 {
		// The hosted rotation function runs in the private subnets (it calls
		// Secrets Manager through the NAT gateway) and may reach the cluster.
		// Readers of the secret re-read it for every new connection
		// (engine/dbconn), so a rotation needs no restart.
		cluster.AddRotationSingleUser(&awsrds.RotationSingleUserOptions{
			AutomaticallyAfter: awscdk.Duration_Days(jsii.Number(props.RotationDays)),
			VpcSubnets:         &awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetPrivate)},
		})
	}

	ownerSecret, appSecret, rotations := newRoleSecrets(stack, cluster, secret, props.Vpc, props.RotationDays, props.RemovalPolicy)
	d := &DataStack{Stack: stack, Cluster: cluster, Secret: appSecret, MasterSecret: secret, OwnerSecret: ownerSecret, SecurityGroup: sg}
	if props.MigrateCode != nil {
		d.Migration = newDataMigration(stack, props, sg, d)
		d.Migration.Resource.Node().AddDependency(cluster)
		for _, r := range rotations {
			// Rotation logs in as the user, which the migrate step creates.
			r.Node().AddDependency(d.Migration.Resource)
		}
	}

	var proxy awsrds.IDatabaseProxy
	if props.Proxy {
		proxySG := awsec2.NewSecurityGroup(stack, jsii.String("ProxySecurityGroup"), &awsec2.SecurityGroupProps{
			Vpc:              props.Vpc,
			Description:      jsii.String("Maestro RDS Proxy"),
			AllowAllOutbound: jsii.Bool(false),
		})
		allowPostgres(sg, []awsec2.ISecurityGroup{proxySG})
		allowPostgres(proxySG, props.ProxyClientSecurityGroups)
		proxy = awsrds.NewDatabaseProxy(stack, jsii.String("Proxy"), &awsrds.DatabaseProxyProps{
			ProxyTarget: awsrds.ProxyTarget_FromCluster(cluster),
			// The users that connect through it: the application role only.
			Secrets:        &[]awssecretsmanager.ISecret{appSecret},
			Vpc:            props.Vpc,
			VpcSubnets:     &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED},
			SecurityGroups: &[]awsec2.ISecurityGroup{proxySG},
			RequireTLS:     jsii.Bool(true),
			// The engine holds its own long-lived connections (LISTEN does not
			// go through a proxy); the rest of max_connections is the proxy's.
			MaxConnectionsPercent:     jsii.Number(props.ProxyMaxConnectionsPercent),
			MaxIdleConnectionsPercent: jsii.Number(props.ProxyMaxConnectionsPercent / 2),
			BorrowTimeout:             awscdk.Duration_Seconds(jsii.Number(10)),
		})
		awscdk.NewCfnOutput(stack, jsii.String("ProxyEndpoint"), &awscdk.CfnOutputProps{
			Value:       proxy.Endpoint(),
			Description: jsii.String("RDS Proxy endpoint the Lambdas connect through"),
		})
	}

	awscdk.NewCfnOutput(stack, jsii.String("ClusterEndpoint"), &awscdk.CfnOutputProps{
		Value:       cluster.ClusterEndpoint().Hostname(),
		Description: jsii.String("Aurora writer endpoint"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("SecretArn"), &awscdk.CfnOutputProps{
		Value:       appSecret.SecretArn(),
		Description: jsii.String("Secrets Manager secret of the application role (maestro_app): host, port, dbname, username, password"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("MasterSecretArn"), &awscdk.CfnOutputProps{
		Value:       secret.SecretArn(),
		Description: jsii.String("Secrets Manager secret of the master user (the migrate step and break-glass only)"),
	})

	nagSuppress(cluster, "AwsSolutions-RDS6", "the engine and the functions log in as maestro_app, the migrate step as maestro_owner, each with its own rotated secret (RDS Proxy needs a secret per user anyway); IAM database auth tokens would add a signing step to every new connection for no gain in this design")
	nagSuppress(cluster, "AwsSolutions-RDS11", "the default PostgreSQL port: only the engine's, the proxy's and the rotation function's security groups may reach it")
	d.Proxy = proxy
	return d
}

// newDataMigration adds the migrate step (NewMigration) to the data stack,
// with a security group of its own that may reach the cluster's (clusterSG;
// nil on the emulator target) on the PostgreSQL port and Secrets Manager on
// HTTPS.
func newDataMigration(stack awscdk.Stack, props *DataStackProps, clusterSG awsec2.ISecurityGroup, d *DataStack) *Migration {
	sg := awsec2.NewSecurityGroup(stack, jsii.String("MigrateSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              props.Vpc,
		Description:      jsii.String("Maestro migrate function: PostgreSQL to the cluster, HTTPS to Secrets Manager"),
		AllowAllOutbound: jsii.Bool(false),
	})
	sg.AddEgressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(443)), jsii.String("HTTPS to Secrets Manager"), nil)
	if clusterSG != nil {
		allowPostgres(clusterSG, []awsec2.ISecurityGroup{sg})
	}
	return NewMigration(stack, "Migration", &MigrationProps{
		Vpc: props.Vpc, SecurityGroup: sg, Code: props.MigrateCode,
		MasterSecret: d.MasterSecret, OwnerSecret: d.OwnerSecret, AppSecret: d.Secret,
		Architecture: props.MigrateArchitecture, LogRetention: props.LogRetention,
	})
}

// allowPostgres lets clients reach sg on DatabasePort. AllowFrom adds the
// ingress rule to sg and, for a client whose egress is restricted, the
// matching egress rule (both in sg's stack).
func allowPostgres(sg awsec2.ISecurityGroup, clients []awsec2.ISecurityGroup) {
	for _, client := range clients {
		sg.Connections().AllowFrom(client, awsec2.Port_Tcp(jsii.Number(DatabasePort)),
			jsii.String(fmt.Sprintf("PostgreSQL from %s", *client.Node().Id())))
	}
}

// newEmulatorData is the data stack of the emulator target: a secret in the
// RDS shape ({host, port, dbname, username, password}) that points at a
// PostgreSQL the test runs, in place of Aurora. The password is in the
// template; that is acceptable only for a throwaway local database.
// byCompleteARN is the secret as its complete ARN read from CloudFormation's
// Id attribute, for the emulator target. AWS answers a secret's Ref with the
// same ARN; the emulator answers it with the secret's name, which no IAM
// policy resource matches, so with IAM evaluated (make e2e) every grant on
// the Ref would deny. Grants and DB_SECRET_ARN through this name the secret
// exactly as they do on AWS.
func byCompleteARN(secret awssecretsmanager.ISecret, id string) awssecretsmanager.ISecret {
	s, ok := secret.(awssecretsmanager.Secret)
	if !ok {
		return secret
	}
	cfn := s.Node().DefaultChild().(awssecretsmanager.CfnSecret)
	return awssecretsmanager.Secret_FromSecretCompleteArn(s.Stack(), jsii.String(id), cfn.AttrId())
}

func newEmulatorData(stack awscdk.Stack, dsn string) *DataStack {
	u, _ := url.Parse(dsn) // Config.Validate checked it
	password, _ := u.User.Password()
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(DatabasePort)
	}
	secret := awssecretsmanager.NewSecret(stack, jsii.String("Secret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("Maestro database (emulator target: a local PostgreSQL)"),
		SecretObjectValue: &map[string]awscdk.SecretValue{
			"engine":   awscdk.SecretValue_UnsafePlainText(jsii.String("postgres")),
			"host":     awscdk.SecretValue_UnsafePlainText(jsii.String(u.Hostname())),
			"port":     awscdk.SecretValue_UnsafePlainText(jsii.String(port)),
			"dbname":   awscdk.SecretValue_UnsafePlainText(jsii.String(strings.TrimPrefix(u.Path, "/"))),
			"username": awscdk.SecretValue_UnsafePlainText(jsii.String(u.User.Username())),
			"password": awscdk.SecretValue_UnsafePlainText(jsii.String(password)),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	awscdk.NewCfnOutput(stack, jsii.String("SecretArn"), &awscdk.CfnOutputProps{
		Value:       secret.SecretArn(),
		Description: jsii.String("Secrets Manager secret with host, port, dbname, username, password"),
	})
	return &DataStack{Stack: stack, MasterSecret: secret}
}
