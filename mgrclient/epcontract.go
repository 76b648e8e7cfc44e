package mgrclient

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cotal-ai/cotal/internal/jcs"
)

// The manager's command contracts on the endpoint rails (the reference's
// implementations/manager/src/manager-service-contract.ts, cluster document
// ai.cotal.manager revision 17). A caller pins each command's input and output schema by
// digest (op.inputDigest, op.outputDigest); the schemas below are the reference's, byte
// for byte after canonicalization, so the digests Go computes are the ones a reference
// caller sends.
const (
	// EPEndpoint is the manager's endpoint name (and wire token) on the ep rails.
	EPEndpoint = "manager"
	// EPClusterURN and EPClusterRevision name the reference's manager cluster document
	// whose command schemas Go serves.
	EPClusterURN      = "ai.cotal.manager"
	EPClusterRevision = 17
)

// The reference's schemas (manager-service-contract.ts), as JSON.
const (
	schemaVoid            = `{"type":"null"}`
	schemaOpenObj         = `{"type":"object"}`
	schemaStatus          = `{"type":"object","additionalProperties":false,"required":["instanceId","runtime","custody","agentCount","uptimeMs","connectors","classSpawn","staticReconciliation"],"properties":{"instanceId":{"type":"string"},"runtime":{"type":"string"},"custody":{"enum":["legacy","custodied"]},"agentCount":{"type":"integer","minimum":0},"uptimeMs":{"type":"integer","minimum":0},"classSpawn":{"type":"boolean"},"connectors":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["agent","state","binaries"],"properties":{"agent":{"type":"string"},"state":{"enum":["available","unavailable"]},"binaries":{"type":"object","additionalProperties":{"type":"string"}},"reason":{"type":"string"}}}},"staticReconciliation":{"type":"object","additionalProperties":false,"required":["state","failures"],"properties":{"state":{"enum":["idle","running","retry-wait","retrying","recovered","failed"]},"lastSweep":{"type":"object","additionalProperties":false,"required":["kind","startedAt","attempted","succeeded","failed"],"properties":{"kind":{"enum":["startup","post-adoption"]},"startedAt":{"type":"string"},"completedAt":{"type":"string"},"attempted":{"type":"integer","minimum":0},"succeeded":{"type":"integer","minimum":0},"failed":{"type":"integer","minimum":0}}},"failures":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["alias","actor","lifecycleUid","phase","attempts","maxAttempts","disposition"],"properties":{"alias":{"type":"string"},"actor":{"type":"string"},"lifecycleUid":{"type":"string"},"phase":{"enum":["provisioning","active","terminalizing","retired"]},"attempts":{"type":"integer","minimum":0},"maxAttempts":{"type":"integer","minimum":1},"disposition":{"enum":["retry-scheduled","retrying","recovered","refused","refused-foreign","retry-exhausted"]},"lastError":{"type":"string"},"nextRetryAt":{"type":"string"},"recoveredAt":{"type":"string"},"remedy":{"type":"string"}}}}}}}}`
	schemaRow             = `{"type":"object","additionalProperties":false,"required":["name","id","agent","space","mode","status","uptimeMs","mesh","lifecycleUid"],"properties":{"name":{"type":"string"},"id":{"type":"string"},"role":{"type":"string"},"agent":{"type":"string"},"space":{"type":"string"},"mode":{"type":"string"},"status":{"type":"string"},"uptimeMs":{"type":"integer","minimum":0},"mesh":{"type":"string"},"meshView":{"type":"string","enum":["current","stale","unpopulated"]},"lifecycleUid":{"type":"string"},"authHealth":{"type":"string"},"authReason":{"type":"string"},"model":{"type":"string"},"variant":{"type":"string"},"cwd":{"type":"string"},"pid":{"type":"integer","minimum":1},"spawner":{"type":"string"},"instanceId":{"type":"string"},"host":{"type":"string"}}}`
	schemaInspect         = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string","minLength":1}}}`
	schemaSpawnIn         = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string","minLength":1},"agent":{"type":"string"},"defaultAgent":{"type":"string"},"role":{"type":"string"},"config":{"type":"string"},"identity":{"type":"string"},"model":{"type":"string"},"variant":{"type":"string"},"launchOptions":{"type":"object"},"resume":{"type":"string"},"continueSession":{"type":"string"},"events":{"type":"boolean"},"cwd":{"type":"string"},"prompt":{"type":"string"},"subscribe":{"type":"array","items":{"type":"string"}},"allowSubscribe":{"type":"array","items":{"type":"string"}},"allowPublish":{"type":"array","items":{"type":"string"}},"shareTools":{"type":"string"},"supervise":{"type":"object","additionalProperties":false,"required":["restarts","windowMs"],"properties":{"restarts":{"type":"integer","minimum":1},"windowMs":{"type":"integer","minimum":1}}}}}`
	schemaSpawnOut        = `{"type":"object","additionalProperties":false,"required":["name","owner","actor","uid","goalId","fingerprint","executor"],"properties":{"name":{"type":"string"},"owner":{"type":"string"},"actor":{"type":"string"},"uid":{"type":"string"},"goalId":{"type":"string"},"fingerprint":{"type":"string"},"readinessDeadlineMs":{"type":"integer","minimum":1},"executor":{"type":"object","additionalProperties":false,"required":["lifecycleUid","epoch"],"properties":{"lifecycleUid":{"type":"string"},"epoch":{"type":"integer","minimum":0}}}}}`
	schemaCwdIn           = `{"type":"object","additionalProperties":false,"required":["cwd"],"properties":{"cwd":{"type":"string","minLength":1}}}`
	schemaCwdOut          = `{"type":"object","additionalProperties":false,"required":["cwd","host"],"properties":{"cwd":{"type":"string"},"host":{"type":"string"}}}`
	schemaGraceful        = `{"type":"object","additionalProperties":false,"properties":{"graceful":{"type":"boolean"}}}`
	schemaStopOut         = `{"type":"object","additionalProperties":false,"required":["name","stopped","graceful"],"properties":{"name":{"type":"string"},"stopped":{"type":"boolean"},"graceful":{"type":"boolean"}}}`
	schemaAttachOut       = `{"type":"object","additionalProperties":false,"required":["grant"],"properties":{"grant":{"type":"object"}}}`
	schemaInputIn         = `{"type":"object","additionalProperties":false,"required":["text"],"properties":{"text":{"type":"string","minLength":1,"maxLength":65536},"enter":{"type":"boolean"}}}`
	schemaInputOut        = `{"type":"object","additionalProperties":false,"required":["name","bytes"],"properties":{"name":{"type":"string"},"bytes":{"type":"integer","minimum":0}}}`
	schemaTurnIn          = `{"type":"object","additionalProperties":false,"required":["payload","deadlineMs"],"properties":{"payload":{"type":"string","minLength":1,"maxLength":65536},"deadlineMs":{"type":"integer","minimum":1},"handoffFrom":{"type":"string","minLength":1,"maxLength":200}}}`
	schemaTurnOut         = `{"type":"object","additionalProperties":false,"required":["name","owner","actor","uid","goalId","fingerprint","deadlineAt","executor"],"properties":{"name":{"type":"string"},"owner":{"type":"string"},"actor":{"type":"string"},"uid":{"type":"string"},"goalId":{"type":"string"},"fingerprint":{"type":"string"},"deadlineAt":{"type":"integer","minimum":1},"executor":{"type":"object","additionalProperties":false,"required":["lifecycleUid","epoch"],"properties":{"lifecycleUid":{"type":"string"},"epoch":{"type":"integer","minimum":0}}}}}`
	schemaTurnPendingOut  = `{"type":"object","additionalProperties":false,"required":["turns"],"properties":{"turns":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["goalId","payload","acceptedAt","deadlineAt"],"properties":{"goalId":{"type":"string"},"payload":{"type":"string"},"acceptedAt":{"type":"integer","minimum":0},"deadlineAt":{"type":"integer","minimum":1}}}}}}`
	schemaTurnYieldIn     = `{"type":"object","additionalProperties":false,"required":["goalId","status"],"properties":{"goalId":{"type":"string","minLength":1},"status":{"enum":["done","blocked","handoff"]},"to":{"type":"string","minLength":1},"note":{"type":"string","maxLength":4096}}}`
	schemaTurnYieldOut    = `{"type":"object","additionalProperties":false,"required":["goalId","state"],"properties":{"goalId":{"type":"string"},"state":{"enum":["succeeded","failed","cancelled","expired","uncertain"]}}}`
	schemaModelsIn        = `{"type":"object","additionalProperties":false,"properties":{"agent":{"type":"string"},"refresh":{"type":"boolean"}}}`
	schemaModelsOut       = `{"type":"object","additionalProperties":false,"required":["catalogs"],"properties":{"catalogs":{"type":"array","items":{"type":"object","required":["agent","supported","models"],"properties":{"agent":{"type":"string"},"supported":{"type":"boolean"},"models":{"type":"array"},"error":{"type":"string"}}}}}}`
	schemaPurgeIn         = `{"type":"object","additionalProperties":false,"properties":{"includeDms":{"type":"boolean"}}}`
	schemaPurgeOut        = `{"type":"object","additionalProperties":false,"required":["chat"],"properties":{"chat":{"type":"integer","minimum":0},"dm":{"type":"integer","minimum":0}}}`
	schemaPersonaIn       = `{"type":"object","additionalProperties":false,"required":["name","persona"],"properties":{"name":{"type":"string","minLength":1},"persona":{"type":"string","minLength":1},"model":{"type":"string"},"role":{"type":"string"},"agent":{"type":"string"},"subscribe":{"type":"array","items":{"type":"string"}},"allowSubscribe":{"type":"array","items":{"type":"string"}},"allowPublish":{"type":"array","items":{"type":"string"}}}}`
	schemaPersonaOut      = `{"type":"object","additionalProperties":false,"required":["name","path"],"properties":{"name":{"type":"string"},"path":{"type":"string"}}}`
	schemaPersonaRow      = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string"},"role":{"type":"string"},"model":{"type":"string"},"description":{"type":"string"},"owner":{"type":"string"},"error":{"type":"string"}}}`
	schemaShowPersonaIn   = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string","minLength":1}}}`
	schemaShowPersonaOut  = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string"},"role":{"type":"string"},"model":{"type":"string"},"description":{"type":"string"},"owner":{"type":"string"},"persona":{"type":"string"},"error":{"type":"string"}}}`
	schemaLaunchIn        = `{"type":"object","additionalProperties":false,"required":["runId","name"],"properties":{"runId":{"type":"string","minLength":1},"name":{"type":"string","minLength":1},"spec":{"type":"object"}}}`
	schemaAttemptIn       = `{"type":"object","additionalProperties":false,"required":["attemptId"],"properties":{"attemptId":{"type":"string","minLength":1}}}`
	schemaResumeIn        = `{"type":"object","additionalProperties":false,"required":["attemptId","inventory"],"properties":{"attemptId":{"type":"string","minLength":1},"inventory":{"type":"object"}}}`
	schemaFinalizeIn      = `{"type":"object","additionalProperties":false,"required":["attemptId","durableCommitToken"],"properties":{"attemptId":{"type":"string","minLength":1},"durableCommitToken":{"type":"string","minLength":1}}}`
	schemaCommitResumeOut = `{"type":"object","additionalProperties":false,"required":["attemptId","state","durableCommitToken"],"properties":{"attemptId":{"type":"string"},"state":{"type":"string"},"durableCommitToken":{"type":"string"}}}`
	schemaAttemptStateOut = `{"type":"object","additionalProperties":false,"required":["attemptId","state"],"properties":{"attemptId":{"type":"string"},"state":{"type":"string"}}}`
	schemaRunStartIn      = `{"type":"object","additionalProperties":false,"required":["source"],"properties":{"source":{"type":"string","minLength":1},"file":{"type":"string","minLength":1},"timeout":{"type":"string","minLength":1}}}`
	schemaRunResumeIn     = `{"type":"object","additionalProperties":false,"required":["runId"],"properties":{"runId":{"type":"string","minLength":1},"timeout":{"type":"string","minLength":1}}}`
	schemaRunIDIn         = `{"type":"object","additionalProperties":false,"required":["runId"],"properties":{"runId":{"type":"string","minLength":1},"endpoint":{"type":"string","minLength":1}}}`
	schemaRunIDOut        = `{"type":"object","additionalProperties":false,"required":["runId"],"properties":{"runId":{"type":"string"}}}`
	schemaRunPsIn         = `{"type":"object","additionalProperties":false,"properties":{"endpoint":{"type":"string","minLength":1}}}`
	schemaRunRow          = `{"type":"object","additionalProperties":false,"required":["runId","endpoint"],"properties":{"runId":{"type":"string"},"endpoint":{"type":"string"},"state":{"type":"string","enum":["running","released","completed","failed"]},"holder":{"type":"string"},"epoch":{"type":"integer","minimum":0},"journalHigh":{"type":"integer","minimum":-1},"forkedFrom":{"type":"object","additionalProperties":false,"required":["run","step"],"properties":{"run":{"type":"string"},"step":{"type":"string"}}}}}`
	schemaRunStatusOut    = `{"type":"object","additionalProperties":false,"required":["runId","endpoint","spec","journal"],"properties":{"runId":{"type":"string"},"endpoint":{"type":"string"},"spec":{"type":"object"},"status":{"type":"object"},"journal":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["n","kind"],"properties":{"n":{"type":"integer","minimum":0},"kind":{"type":"string","enum":["activation","step"]},"holder":{"type":"string"},"epoch":{"type":"integer","minimum":0},"replayedTo":{"type":"integer","minimum":0},"step":{"type":"string"},"state":{"type":"string","enum":["pending","settled"]},"outcome":{"type":"string"},"asks":{"type":"string"},"addressee":{"type":"string"},"answer":{"type":"object","additionalProperties":false,"required":["answerId"],"properties":{"answerId":{"type":"string"},"value":{},"by":{"type":"string"},"artifact":{"type":"string"},"at":{"type":"number"}}}}}}}}`
	schemaRunAnswerIn     = `{"type":"object","additionalProperties":false,"required":["runId","stepKey"],"properties":{"runId":{"type":"string","minLength":1},"endpoint":{"type":"string","minLength":1},"stepKey":{"type":"string","minLength":1},"value":{},"artifact":{"type":"string","minLength":1}}}`
	schemaRunAnswerOut    = `{"type":"object","additionalProperties":false,"required":["token","answerId","settle"],"properties":{"token":{"type":"string"},"answerId":{"type":"string"},"settle":{"type":"object"}}}`
)

// epCommand is one row of the manager's command table: its schemas, its capability
// label, and the authorization modes of its targeted form (none: untargeted).
type epCommand struct {
	name       string
	capability string
	input      string
	output     string
	modes      []string
}

var (
	ownerAny = []string{"owner", "any"}
	self     = []string{"self"}
)

// epCommands is the reference's table in its order (ROWS in manager-service-contract.ts).
var epCommands = []epCommand{
	{name: "status", capability: "manager.read", input: schemaVoid, output: schemaStatus},
	{name: "ps", capability: "manager.read", input: schemaVoid, output: `{"type":"array","items":` + schemaRow + `}`},
	{name: "inspect", capability: "manager.read", input: schemaInspect, output: schemaRow},
	{name: "models", capability: "manager.read", input: schemaModelsIn, output: schemaModelsOut},
	{name: "resolve-cwd", capability: "manager.spawn", input: schemaCwdIn, output: schemaCwdOut},
	{name: "spawn", capability: "manager.spawn", input: schemaSpawnIn, output: schemaSpawnOut},
	{name: "despawn", capability: "manager.lifecycle", input: schemaGraceful, output: schemaStopOut, modes: ownerAny},
	{name: "attach", capability: "manager.lifecycle", input: schemaVoid, output: schemaAttachOut, modes: ownerAny},
	{name: "input", capability: "manager.lifecycle", input: schemaInputIn, output: schemaInputOut, modes: ownerAny},
	{name: "turn", capability: "manager.lifecycle", input: schemaTurnIn, output: schemaTurnOut, modes: ownerAny},
	{name: "turn-pending", capability: "manager.self", input: schemaVoid, output: schemaTurnPendingOut, modes: self},
	{name: "turn-yield", capability: "manager.self", input: schemaTurnYieldIn, output: schemaTurnYieldOut, modes: self},
	{name: "stop", capability: "manager.self", input: schemaGraceful, output: schemaStopOut, modes: self},
	{name: "run-start", capability: "manager.run", input: schemaRunStartIn, output: schemaRunIDOut},
	{name: "run-resume", capability: "manager.run", input: schemaRunResumeIn, output: schemaRunIDOut},
	{name: "run-answer", capability: "manager.run", input: schemaRunAnswerIn, output: schemaRunAnswerOut, modes: self},
	{name: "run-status", capability: "manager.read", input: schemaRunIDIn, output: schemaRunStatusOut},
	{name: "run-ps", capability: "manager.read", input: schemaRunPsIn, output: `{"type":"array","items":` + schemaRunRow + `}`},
	{name: "define-persona", capability: "manager.persona", input: schemaPersonaIn, output: schemaPersonaOut},
	{name: "list-personas", capability: "manager.read", input: schemaVoid, output: `{"type":"object","additionalProperties":false,"required":["personas"],"properties":{"personas":{"type":"array","items":` + schemaPersonaRow + `}}}`},
	{name: "show-persona", capability: "manager.read", input: schemaShowPersonaIn, output: schemaShowPersonaOut},
	{name: "purge", capability: "manager.admin", input: schemaPurgeIn, output: schemaPurgeOut},
	{name: "launch", capability: "manager.admin", input: schemaLaunchIn, output: schemaSpawnOut},
	{name: "resume-preserved", capability: "manager.admin", input: schemaResumeIn, output: schemaOpenObj},
	{name: "commit-resume", capability: "manager.admin", input: schemaAttemptIn, output: schemaCommitResumeOut},
	{name: "finalize-resume", capability: "manager.admin", input: schemaFinalizeIn, output: schemaAttemptStateOut},
	{name: "prepare-preservation", capability: "manager.admin", input: schemaAttemptIn, output: schemaOpenObj},
	{name: "commit-preservation", capability: "manager.admin", input: schemaAttemptIn, output: schemaOpenObj},
	{name: "abort-preservation", capability: "manager.admin", input: schemaAttemptIn, output: schemaAttemptStateOut},
}

// epCommandOf returns the row of a command name.
func epCommandOf(name string) (epCommand, bool) {
	for _, c := range epCommands {
		if c.name == name {
			return c, true
		}
	}
	return epCommand{}, false
}

// EPContractDigests returns the input and output digests a caller pins for command (the
// reference's compileContract closure digests); ok is false for a command the manager's
// contract has no row for.
func EPContractDigests(command string) (input, output string, ok bool) {
	c, ok := epCommandOf(command)
	if !ok {
		return "", "", false
	}
	return ClosureDigest(json.RawMessage(c.input)), ClosureDigest(json.RawMessage(c.output)), true
}

// ContractDigest is the content address of a JSON value: sha256:<hex> over its RFC 8785
// canonical form (the reference's canonical.ts contractDigest). It panics on a value
// that is not JSON, which only a programming error passes.
func ContractDigest(v any) string {
	b, err := CanonicalJSON(v)
	if err != nil {
		panic(fmt.Sprintf("contract digest: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ClosureDigest is the digest a caller pins for a schema with no references: the digest
// of its one-root closure manifest {v:1, root:<schema digest>, members:[]}.
func ClosureDigest(schema json.RawMessage) string {
	return ContractDigest(map[string]any{"v": 1, "root": ContractDigest(schema), "members": []any{}})
}

// CanonicalJSON encodes v (any value encoding/json accepts) in RFC 8785 canonical form:
// object keys sorted by UTF-16 code units, no whitespace, ECMAScript number and string
// forms.
func CanonicalJSON(v any) ([]byte, error) { return jcs.Marshal(v) }
