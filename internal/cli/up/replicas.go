package up

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// spaceReplicas is the replica part of a space's provision options: the count asked
// (--replicas) or, when none was, 3 on a JetStream cluster of 3 or more servers and 1
// otherwise. The cluster's size is asked of the server over a system connection on an
// authenticated mesh (chain set); an open mesh has none, so there it is unknown.
func spaceReplicas(ctx context.Context, chain *trust.Chain, nc *nats.Conn, ca string, asked int) (provision.Options, error) {
	clustered := nc.ConnectedClusterName() != ""
	peers := 0
	if !clustered {
		peers = 1
	} else if chain != nil {
		creds, err := chain.SystemCreds(time.Hour)
		if err != nil {
			return provision.Options{}, err
		}
		sys, err := cmdutil.DialCreds(nc.ConnectedUrl(), creds, ca, "")
		if err != nil {
			return provision.Options{}, err
		}
		defer sys.Close()
		if peers, err = provision.JetStreamPeers(ctx, sys); err != nil {
			return provision.Options{}, err
		}
	}
	n := asked
	if n == 0 {
		n = provision.DefaultReplicas(clustered, peers)
	}
	return provision.Options{Replicas: n, Peers: peers}, nil
}

// replicasRefusal turns provision's replica errors into a refusal that names the fix;
// other errors pass as they are.
func replicasRefusal(err error, server, space string, replicas int) error {
	what := "--replicas " + strconv.Itoa(replicas) + " for space " + space
	switch {
	case errors.Is(err, provision.ErrNotClustered):
		return cmdutil.Refuse(what, fmt.Sprintf("the server at %s is not part of a JetStream cluster, so it keeps one copy of each stream; nothing was changed", server),
			"cotal up --space "+space+" --replicas 1")
	case errors.Is(err, provision.ErrNotEnoughPeers):
		return &causedRefusal{refusal: cmdutil.Refuse(what, fmt.Sprintf("%v; nothing was changed", err),
			"cotal up --space "+space+" --replicas 1"), cause: err}
	case errors.Is(err, provision.ErrScale):
		return cmdutil.Refuse(what, err.Error(), "cotal up --space "+space+" --replicas 1")
	}
	return err
}

// causedRefusal is a refusal that keeps its cause, so a cluster node that is still
// settling can tell too few peers (which it may outgrow) from other refusals.
type causedRefusal struct{ refusal, cause error }

func (e *causedRefusal) Error() string   { return e.refusal.Error() }
func (e *causedRefusal) Unwrap() []error { return []error{e.refusal, e.cause} }
