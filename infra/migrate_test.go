package main

import (
	"strings"
	"testing"
)

// The migrate step: a custom resource in the data stack whose handler is the
// migrate function, keyed on its package, run after the cluster; every
// stack with code deploys after the data stack; the engine, the functions
// and RDS Proxy use the application role's secret, the migrate function
// alone the master's; the role secrets rotate only after the step made the
// users.
func TestMigrationStep(t *testing.T) {
	for _, target := range []string{"aws", "emulator"} {
		t.Run(target, func(t *testing.T) {
			f := loadFixture(t)
			if target == "emulator" {
				f = loadEmulatorFixture(t)
			}
			data := f.stacks.Data
			if data.Migration == nil {
				t.Fatal("no migrate step")
			}
			crID, cr := f.data.one(t, MigrationResourceType)
			fnID := logicalID(t, data.Stack, "Migration", "Migrate", "Function")
			if got := asJSON(cr["ServiceToken"]); !strings.Contains(got, fnID) {
				t.Errorf("ServiceToken %s, want the migrate function %s", got, fnID)
			}
			if pkg, _ := cr["Package"].(string); !strings.HasSuffix(pkg, ".zip") {
				t.Errorf("Package %v: want the package's asset key, so that a new package runs the step again", cr["Package"])
			}
			env := asJSON(props(f.data.Resources[fnID])["Environment"])
			for _, v := range []string{"MAESTRO_MASTER_SECRET_ARN", "MAESTRO_OWNER_SECRET_ARN", "MAESTRO_APP_SECRET_ARN"} {
				if !strings.Contains(env, v) {
					t.Errorf("migrate function environment lacks %s: %s", v, env)
				}
			}
			for _, s := range []*stackTemplate{f.events, f.signals, f.triggers, f.api} {
				if !dependsOn(s, data.Stack.StackName()) {
					t.Errorf("%s does not depend on the data stack", *s.stack.StackName())
				}
			}
			if f.stacks.Engine != nil && !dependsOnStack(f.stacks.Engine.Stack.Dependencies(), *data.Stack.StackName()) {
				t.Errorf("the engine stack does not depend on the data stack")
			}
			appID := logicalID(t, data.Stack, "AppSecret")
			if target == "aws" {
				appID = logicalID(t, data.Stack, "AppSecret", "Attachment")
				dependsOnCR := 0
				for id, r := range f.data.ofType("AWS::SecretsManager::RotationSchedule") {
					deps := asJSON(r["DependsOn"])
					if strings.Contains(id, "OwnerSecret") || strings.Contains(id, "AppSecret") {
						if strings.Contains(deps, crID) {
							dependsOnCR++
						}
					}
				}
				if dependsOnCR != 2 {
					t.Errorf("%d role secret rotations wait for the migrate step, want 2", dependsOnCR)
				}
				_, proxy := f.data.one(t, "AWS::RDS::DBProxy")
				if auth := asJSON(proxy["Auth"]); !strings.Contains(auth, appID) || strings.Count(auth, "SecretArn") != 1 {
					t.Errorf("proxy auth %s: want the app secret only", auth)
				}
				_, task := f.engine.one(t, "AWS::ECS::TaskDefinition")
				if env := asJSON(task["ContainerDefinitions"]); !strings.Contains(env, "DB_SECRET_ARN") || !strings.Contains(env, appID) {
					t.Errorf("the engine's DB_SECRET_ARN is not the app secret: %s", env)
				}
			}
			for _, s := range []*stackTemplate{f.triggers, f.api} {
				for id, r := range s.ofType("AWS::Lambda::Function") {
					env := asJSON(props(r)["Environment"])
					if strings.Contains(env, "DB_SECRET_ARN") && !strings.Contains(env, appID) {
						t.Errorf("%s %s: DB_SECRET_ARN is not the app secret: %s", *s.stack.StackName(), id, env)
					}
				}
			}
		})
	}
}

func dependsOn(s *stackTemplate, name *string) bool {
	return dependsOnStack(s.stack.Dependencies(), *name)
}

func dependsOnStack[T interface{ StackName() *string }](deps *[]T, name string) bool {
	if deps == nil {
		return false
	}
	for _, d := range *deps {
		if *d.StackName() == name {
			return true
		}
	}
	return false
}
