package cmdutil

import (
	"context"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust"
)

// The Factory's dependencies as a command's Options hold them (copied from the Factory in
// NewCmdX), so its run function uses only its Options and a test can pass its own.

// ResolveFunc picks the mesh a command's flags name (Factory.Resolve).
type ResolveFunc func(MeshFlags) (Target, error)

// ConnectFunc connects to a target as a config (Factory.Connect).
type ConnectFunc func(context.Context, Target, client.Config, As) (*client.Endpoint, error)

// ConnectAsFunc connects to a target as a one-shot identity of a profile
// (Factory.ConnectOperator, Factory.ConnectPerson).
type ConnectAsFunc func(context.Context, Target, trust.Profile) (*client.Endpoint, error)

// AgentCredsFunc mints an agent's credential after creating its durables (Factory.AgentCreds).
type AgentCredsFunc func(context.Context, Target, trust.UserSpec) ([]byte, error)
