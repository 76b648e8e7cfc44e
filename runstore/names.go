package runstore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// DefaultEndpoint is the endpoint a run's records are filed under when none is named.
const DefaultEndpoint = protocol.RunHostEndpoint

var idToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckID refuses anything but an id token ([A-Za-z0-9_-]{1,64}), the reference's shape
// of run ids, endpoints, tokens and answer ids; what is checked becomes a subject or key
// token.
func CheckID(what, id string) error {
	if !idToken.MatchString(id) {
		return fmt.Errorf("%s %q: want 1 to 64 of A-Z a-z 0-9 _ -", what, id)
	}
	return nil
}

// NewRunID mints a run id: "run-" and 32 hex digits (128 random bits).
func NewRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "run-" + hex.EncodeToString(b[:])
}

// JournalStream names the space's step journal stream.
func JournalStream(space string) string { return provision.StreamWFJ(space) }

// JournalSubject is the one subject a run's journal appends to.
func JournalSubject(space, run string) string { return protocol.RunJournalSubject(space, run) }

// ReplayDurable names the consumer one replay creates, reads and deletes.
func ReplayDurable(run, takeover string) string { return "wfj_" + run + "_" + takeover }

// RunSpecKey is the key of a run's spec record.
func RunSpecKey(endpoint, run string) string { return "run." + endpoint + "." + run + ".spec" }

// RunStatusKey is the key of a run's status record.
func RunStatusKey(endpoint, run string) string { return "run." + endpoint + "." + run + ".status" }

// ProgramKey is the key of a run's recorded program.
func ProgramKey(endpoint, run string) string { return "program." + endpoint + "." + run }

// AnswerKey is the key of one answer to the pause named by token.
func AnswerKey(endpoint, token, answerID string) string {
	return "answer." + endpoint + "." + token + "." + answerID
}

// AnswerFilter matches every answer to the pause named by token.
func AnswerFilter(endpoint, token string) string { return "answer." + endpoint + "." + token + ".*" }

// marshal encodes v as JSON.stringify does: no HTML escaping, no trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
