package protocol

// DefaultChannel is the channel a person's `cotal join` joins when it names none (and the
// console's first channel). It is never an agent's default: an agent that names no
// channel reads none (ReadSet).
const DefaultChannel = "general"

// ReadSet resolves an agent's boot read set (subscribe) and read ACL (allowSubscribe) the
// way the reference's agent-file.ts and provision.ts do (`subscribe ?? []`,
// `allowSubscribe ?? subscribe`), in the one place every definition goes through (mint,
// personas, cotal.yaml, the actor ledger, the ACL row written at mint):
//
//   - both omitted (nil): both are empty, so the agent is DM-only: it reads no channel
//     and still sends and receives direct messages;
//   - allowSubscribe omitted or empty: the read ACL is subscribe;
//   - subscribe omitted with allowSubscribe given: it joins nothing at boot.
//
// Neither result is ever nil, so resolving a resolved pair changes nothing; they may share
// memory with the arguments.
func ReadSet(subscribe, allowSubscribe []string) (sub, allow []string) {
	if subscribe == nil {
		subscribe = []string{}
	}
	if len(allowSubscribe) == 0 {
		return subscribe, subscribe
	}
	return subscribe, allowSubscribe
}
