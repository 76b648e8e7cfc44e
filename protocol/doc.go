// Package protocol is the Cotal messaging-plane wire contract as pure Go: subject
// builders and strict parsers, identity tokens, JetStream names, the message envelope,
// the AgentCard and presence record, and the receive checks. It does no I/O and imports
// nothing from NATS, so it can be fuzzed and reused by any client.
package protocol
