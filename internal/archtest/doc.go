// Package archtest holds the test that keeps the import graph true to the floors table in
// docs/architecture.md: a package imports only packages on its own floor or below.
package archtest
