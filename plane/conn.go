package plane

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/protocol"
)

// ConnTuple names nc's connection as the broker knows it: the id of the server it is
// connected to, its client id there and userNkey, the public key of the user seed nc
// connected with (a creds file's seed; nkeys.FromSeed(seed).PublicKey()). nc must be
// connected; a reconnect changes the tuple.
func ConnTuple(nc *nats.Conn, userNkey string) (protocol.ConnTuple, error) {
	if nc == nil || !nc.IsConnected() {
		return protocol.ConnTuple{}, errors.New("connection tuple: not connected")
	}
	cid, err := nc.GetClientID()
	if err != nil {
		return protocol.ConnTuple{}, fmt.Errorf("connection tuple: client id: %w", err)
	}
	t := protocol.ConnTuple{ServerID: nc.ConnectedServerId(), CID: cid, UserNkey: userNkey}
	if err := checkTuple(t); err != nil {
		return protocol.ConnTuple{}, fmt.Errorf("connection tuple: %w", err)
	}
	return t, nil
}
