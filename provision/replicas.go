package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxReplicas is the largest replica count JetStream keeps for a stream.
const MaxReplicas = 5

// ErrNotClustered reports a replica count above 1 asked of a server that is not part of a
// JetStream cluster: a single server keeps one copy of each stream.
var ErrNotClustered = errors.New("the server is not part of a JetStream cluster, so it keeps one copy of each stream")

// ErrNotEnoughPeers reports a replica count above the JetStream cluster's size.
var ErrNotEnoughPeers = errors.New("the JetStream cluster has fewer servers than replicas")

// ErrScale reports an existing stream or bucket the server would not scale up in place.
var ErrScale = errors.New("cannot scale in place")

// replicas checks the wanted replica count against what js's server reports, before
// anything is read or changed.
func (o Options) replicas(js jetstream.JetStream) (int, error) {
	n := o.Replicas
	if n == 0 {
		n = 1
	}
	if n < 1 || n > MaxReplicas {
		return 0, fmt.Errorf("replicas %d: want 1 to %d", o.Replicas, MaxReplicas)
	}
	if n == 1 {
		return 1, nil
	}
	if nc := js.Conn(); nc != nil && nc.ConnectedClusterName() == "" {
		return 0, fmt.Errorf("replicas %d: %w", n, ErrNotClustered)
	}
	if o.Peers > 0 && n > o.Peers {
		return 0, fmt.Errorf("replicas %d: %w (%d)", n, ErrNotEnoughPeers, o.Peers)
	}
	return n, nil
}

// DefaultReplicas is the replica count a space gets when none is named: 3 on a JetStream
// cluster of 3 or more servers, else 1. peers is JetStreamPeers' answer (0: unknown);
// clustered tells whether the connected server is part of a cluster
// (nats.Conn.ConnectedClusterName is not empty).
func DefaultReplicas(clustered bool, peers int) int {
	if clustered && peers >= 3 {
		return 3
	}
	return 1
}

// JetStreamPeers asks the server sys is connected to for the size of its JetStream
// cluster (the meta group's cluster_size in its JSZ): 1 for a server that is not
// clustered. sys must be a system account connection.
func JetStreamPeers(ctx context.Context, sys *nats.Conn) (int, error) {
	if sys.ConnectedClusterName() == "" {
		return 1, nil
	}
	id := sys.ConnectedServerId()
	m, err := sys.RequestWithContext(ctx, "$SYS.REQ.SERVER."+id+".JSZ", []byte("{}"))
	if err != nil {
		return 0, fmt.Errorf("jetstream cluster size: ask server %s: %w", id, err)
	}
	var resp struct {
		Data *struct {
			Meta *struct {
				Size int `json:"cluster_size"`
			} `json:"meta_cluster"`
		} `json:"data"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("jetstream cluster size: decode server %s's answer: %w", id, err)
	}
	switch {
	case resp.Error != nil:
		return 0, fmt.Errorf("jetstream cluster size: server %s: %s", id, resp.Error.Description)
	case resp.Data == nil || resp.Data.Meta == nil:
		return 1, nil // JetStream runs unclustered on a clustered server
	}
	return resp.Data.Meta.Size, nil
}
