package mgrclient

import "encoding/json"

// The input and output shapes of the manager's ep commands (the reference's
// manager-service-contract.ts schemas).

// EPSpawnArgs is the spawn command's input (SPAWN_INPUT_SCHEMA). Go's manager serves
// name, agent, defaultAgent, role, model, prompt and cwd; it refuses a request naming any
// other field.
type EPSpawnArgs struct {
	Name            *string         `json:"name"`
	Agent           *string         `json:"agent,omitempty"`
	DefaultAgent    *string         `json:"defaultAgent,omitempty"`
	Role            *string         `json:"role,omitempty"`
	Config          *string         `json:"config,omitempty"`
	Identity        *string         `json:"identity,omitempty"`
	Model           *string         `json:"model,omitempty"`
	Variant         *string         `json:"variant,omitempty"`
	LaunchOptions   json.RawMessage `json:"launchOptions,omitempty"`
	Resume          *string         `json:"resume,omitempty"`
	ContinueSession *string         `json:"continueSession,omitempty"`
	Events          *bool           `json:"events,omitempty"`
	Cwd             *string         `json:"cwd,omitempty"`
	Prompt          *string         `json:"prompt,omitempty"`
	Subscribe       []string        `json:"subscribe,omitempty"`
	AllowSubscribe  []string        `json:"allowSubscribe,omitempty"`
	AllowPublish    []string        `json:"allowPublish,omitempty"`
	ShareTools      *string         `json:"shareTools,omitempty"`
	Supervise       json.RawMessage `json:"supervise,omitempty"`
}

// EPSpawnResult is the spawn command's output (SPAWN_OUTPUT_SCHEMA).
type EPSpawnResult struct {
	Name        string `json:"name"`
	Owner       string `json:"owner"`
	Actor       string `json:"actor"`
	UID         string `json:"uid"`
	GoalID      string `json:"goalId"`
	Fingerprint string `json:"fingerprint"`
	// ReadinessDeadlineMs is how long the manager waits for the agent to come up.
	ReadinessDeadlineMs int64      `json:"readinessDeadlineMs,omitempty"`
	Executor            EPExecutor `json:"executor"`
}

// EPExecutor is the manager incarnation that runs a spawn.
type EPExecutor struct {
	LifecycleUID string `json:"lifecycleUid"`
	Epoch        uint64 `json:"epoch"`
}

// EPAgentRow is one agent of ps and inspect (AGENT_ROW_SCHEMA).
type EPAgentRow struct {
	Name         string `json:"name"`
	ID           string `json:"id"`
	Role         string `json:"role,omitempty"`
	Agent        string `json:"agent"`
	Space        string `json:"space"`
	Mode         string `json:"mode"`
	Status       string `json:"status"`
	UptimeMs     int64  `json:"uptimeMs"`
	Mesh         string `json:"mesh"`
	LifecycleUID string `json:"lifecycleUid"`
	Model        string `json:"model,omitempty"`
	Cwd          string `json:"cwd,omitempty"`
	PID          int    `json:"pid,omitempty"`
	Spawner      string `json:"spawner,omitempty"`
	InstanceID   string `json:"instanceId,omitempty"`
	Host         string `json:"host,omitempty"`
}

// EPStopResult is the output of despawn and stop (STOP_OUTPUT_SCHEMA).
type EPStopResult struct {
	Name     string `json:"name"`
	Stopped  bool   `json:"stopped"`
	Graceful bool   `json:"graceful"`
}

// EPStatus is the status command's output (STATUS_OUTPUT_SCHEMA).
type EPStatus struct {
	InstanceID           string                 `json:"instanceId"`
	Runtime              string                 `json:"runtime"`
	Custody              string                 `json:"custody"` // legacy or custodied
	AgentCount           int                    `json:"agentCount"`
	UptimeMs             int64                  `json:"uptimeMs"`
	Connectors           []EPConnectorStatus    `json:"connectors"`
	ClassSpawn           bool                   `json:"classSpawn"`
	StaticReconciliation EPStaticReconciliation `json:"staticReconciliation"`
}

// EPConnectorStatus is one harness's availability on the manager's host.
type EPConnectorStatus struct {
	Agent    string            `json:"agent"`
	State    string            `json:"state"` // available or unavailable
	Binaries map[string]string `json:"binaries"`
	Reason   string            `json:"reason,omitempty"`
}

// EPStaticReconciliation is the state of the reference's static-lifecycle convergence,
// which Go's manager does not run: always idle with no failures.
type EPStaticReconciliation struct {
	State    string            `json:"state"`
	Failures []json.RawMessage `json:"failures"`
}

// EPPersonaRow is one persona of list-personas, and show-persona's answer (with Persona,
// its prompt): content only, never a capability.
type EPPersonaRow struct {
	Name        string `json:"name"`
	Role        string `json:"role,omitempty"`
	Model       string `json:"model,omitempty"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Persona     string `json:"persona,omitempty"`
	Error       string `json:"error,omitempty"`
}
