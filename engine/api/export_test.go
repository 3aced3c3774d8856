package api

import "testing"

// SourceRoutes exposes the route patterns written in the package's source
// (openapi_test.go) to the external tests.
func SourceRoutes(t *testing.T) []string { return sourceRoutes(t) }

// RoleOf is the role the access table gives a route.
func RoleOf(pattern string) string { return accessFor(pattern).role.String() }
