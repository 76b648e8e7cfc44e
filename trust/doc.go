// Package trust keeps the NATS operator-mode trust chain of a broker and its spaces: an
// operator (with a signing key), the system account SYS, and one data account per space
// (space = account), each data account with a signing key that mints user credentials.
//
// Keys and JWTs live in one folder (the CLI passes <project>/.cotal/auth/): broker.json
// holds the operator and SYS, account.<spacekey>.json one space's account. Files are 0600
// in a 0700 folder and are only ever created, never rewritten: loading twice or restarting
// never re-keys anything, and a corrupt or missing file is refused, never regenerated.
//
// Profiles (agent, observer, admin, provisioner) turn into NATS user permissions built
// from the subject and name builders of package protocol, so the broker itself enforces
// who may send as whom and who may read what.
package trust
