package leasetest

import (
	"os"
	"testing"
)

// RequireAllEnv is the environment variable that turns a missing server
// address into a test failure instead of a skip. ./scripts/test sets it, so
// that no store suite can silently skip in CI.
const RequireAllEnv = "LEASE_TEST_REQUIRE_ALL"

// Env returns the value of the environment variable name (for example
// LEASE_TEST_REDIS_ADDR). When it is unset the test is skipped, or fails if
// LEASE_TEST_REQUIRE_ALL=1.
func Env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv(RequireAllEnv) == "1" {
			t.Fatalf("%s is not set and %s=1: this store's tests must run", name, RequireAllEnv)
		}
		t.Skipf("%s is not set", name)
	}
	return v
}
