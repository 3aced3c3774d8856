package main

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/migrations"
)

// The database users of a deployment besides the master user
// (docs/deploy.md, "Database: migrations, roles, TLS"): the migrate
// function logs in as the owner, the engine and every function as the
// application role. Each has its own secret, as RDS Proxy needs one per user
// it connects as.
const (
	DatabaseOwnerUser = migrations.RoleOwner
	DatabaseAppUser   = migrations.RoleApp
)

// newRoleSecrets makes a secret in the RDS shape for each of the owner and
// the application role, attached to the cluster (host, port and the rest),
// each rotated every rotationDays by the single-user rotation (the user
// changes its own password; the readers re-read the secret, engine/dbconn).
// It returns the rotation schedules, which must wait for the migrate step:
// Secrets Manager rotates a new schedule's secret at once, logging in as its
// user, which the step creates.
func newRoleSecrets(stack awscdk.Stack, cluster awsrds.DatabaseCluster, master awssecretsmanager.ISecret,
	vpc awsec2.IVpc, rotationDays int, removal awscdk.RemovalPolicy) (owner, app awssecretsmanager.ISecret, rotations []constructs.IConstruct) {
	newSecret := func(id, user string) awssecretsmanager.ISecret {
		s := awsrds.NewDatabaseSecret(stack, jsii.String(id), &awsrds.DatabaseSecretProps{
			Username:     jsii.String(user),
			Dbname:       jsii.String(DatabaseName),
			MasterSecret: master,
		})
		if removal == awscdk.RemovalPolicy_DESTROY {
			s.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY)
		} else {
			s.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
		}
		attached := s.Attach(cluster)
		if rotationDays > 0 {
			awssecretsmanager.NewSecretRotation(stack, jsii.String(id+"Rotation"), &awssecretsmanager.SecretRotationProps{
				Application:        awssecretsmanager.SecretRotationApplication_POSTGRES_ROTATION_SINGLE_USER(),
				Secret:             attached,
				Target:             cluster,
				Vpc:                vpc,
				VpcSubnets:         &awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetPrivate)},
				AutomaticallyAfter: awscdk.Duration_Days(jsii.Number(rotationDays)),
			})
			// The schedule (it rotates at once when created) is the
			// attachment's child, not the rotation's.
			if schedule := attached.Node().TryFindChild(jsii.String("RotationSchedule")); schedule != nil {
				rotations = append(rotations, schedule)
			}
		}
		return attached
	}
	return newSecret("OwnerSecret", DatabaseOwnerUser), newSecret("AppSecret", DatabaseAppUser), rotations
}

// newEmulatorRoleSecrets are the role secrets of the emulator target: the
// local PostgreSQL at dsn, a generated password (the local cluster trusts
// its logins, so only the user name matters there).
func newEmulatorRoleSecrets(stack awscdk.Stack, dsn string) (owner, app awssecretsmanager.ISecret) {
	u, _ := url.Parse(dsn) // Config.Validate checked it
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(DatabasePort)
	}
	newSecret := func(id, user string) awssecretsmanager.ISecret {
		template := stack.ToJsonString(map[string]any{
			"engine": "postgres", "host": u.Hostname(), "port": port,
			"dbname": strings.TrimPrefix(u.Path, "/"), "username": user,
		}, nil)
		return awssecretsmanager.NewSecret(stack, jsii.String(id), &awssecretsmanager.SecretProps{
			Description: jsii.String("Maestro database user " + user + " (emulator target: a local PostgreSQL)"),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				SecretStringTemplate: template,
				GenerateStringKey:    jsii.String("password"),
				ExcludePunctuation:   jsii.Bool(true),
			},
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
	}
	return newSecret("OwnerSecret", DatabaseOwnerUser), newSecret("AppSecret", DatabaseAppUser)
}
