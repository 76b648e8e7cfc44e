// Mode cluster: the embedded broker as a node of a cluster (--cluster-name, --cluster-listen, --routes).

package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// checkCluster checks the cluster flags: all three or none.
func (o *Options) checkCluster() error {
	if o.ClusterName == "" && o.ClusterListen == "" && o.Routes == "" {
		return nil
	}
	const example = "e.g. --cluster-name team --cluster-listen 0.0.0.0:6222 --routes nats://a:6222,nats://b:6222,nats://c:6222"
	if o.ClusterName == "" {
		return cmdutil.FlagErrorf("--cluster-listen and --routes go with --cluster-name, the cluster's name (%s)", example)
	}
	if o.ClusterListen == "" || o.Routes == "" {
		return cmdutil.FlagErrorf("--cluster-name needs --cluster-listen HOST:PORT and --routes, the route URLs of every node (%s)", example)
	}
	if _, _, err := clusterAddr(o.ClusterListen); err != nil {
		return cmdutil.FlagErrorf("--cluster-listen: %v", err)
	}
	if _, err := broker.ParseRoutes(o.Routes); err != nil {
		return cmdutil.FlagErrorf("--routes: %v", err)
	}
	return nil
}

// clusterAddr reads --cluster-listen HOST:PORT into a host and a broker.Cluster port (0:
// any free port, which only a node that no other node lists may use).
func clusterAddr(listen string) (string, int, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not HOST:PORT, e.g. 0.0.0.0:6222", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not 0 to 65535", listen, portText)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// checkClusterChain refuses to start a node of an authenticated cluster whose project
// does not hold the shared trust chain with the space's account: a chain or an account
// made here would be this node's alone, and the other nodes would refuse its peers.
func checkClusterChain(opts *Options, proj *workspace.Project, space string) error {
	if opts.ClusterName == "" || opts.Open || cmdutil.MeshRunning(proj) {
		return nil
	}
	what := "to start a node of cluster " + opts.ClusterName + " for space " + space
	if _, err := os.Stat(filepath.Join(proj.AuthDir(), "broker.json")); errors.Is(err, os.ErrNotExist) {
		return cmdutil.Refuse(what,
			"this project has no trust chain; every node must share one: export it on the first node with cotal broker export --space "+space+
				" FILE, bring FILE here and import it with cotal broker import FILE", "")
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	known, err := chain.Spaces()
	if err != nil {
		return err
	}
	if !slices.Contains(known, space) {
		return cmdutil.Refuse(what,
			"the trust chain of this project holds no account for space "+space+"; an account made here would be this node's alone: export the chain with the space (cotal broker export --space "+space+" trust.tar) on the node that made it, and import it here", "")
	}
	return nil
}

// clusterArgs are the cluster flags, for the background child.
func (o *Options) clusterArgs() []string {
	if o.ClusterName == "" {
		return nil
	}
	return []string{"--cluster-name", o.ClusterName, "--cluster-listen", o.ClusterListen, "--routes", o.Routes}
}

// clusterProvisionWait bounds how long a cluster node retries provisioning a space while
// the cluster settles (stream leaders elected, peers joining).
const clusterProvisionWait = 60 * time.Second

// provisionClustered provisions space on a node of a cluster that just formed: every node
// provisions at once, and a JetStream request may go unanswered while a new stream elects
// its leader, so a failure that is not a refusal is retried until clusterProvisionWait.
func provisionClustered(ctx context.Context, w io.Writer, chain *trust.Chain, proj *workspace.Project, server, ca, space string, replicas int, room func(int) error) error {
	deadline := time.Now().Add(clusterProvisionWait)
	wait := 200 * time.Millisecond
	for {
		err := provisionSpace(ctx, w, chain, proj, server, ca, space, replicas, room)
		// Too few peers is a refusal a node outgrows as the other nodes join; any other
		// refusal stands.
		var refusal *cmdutil.Refusal
		settling := errors.Is(err, provision.ErrNotEnoughPeers)
		if err == nil || (errors.As(err, &refusal) && !settling) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(w, "provision space %s: the cluster is settling, trying again: %v\n", space, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
