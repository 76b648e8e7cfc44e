package protocol

// DefaultChannel is the channel an agent reads when its read set is omitted, and the one
// cotal join joins by default.
const DefaultChannel = "general"

// DefaultReadSet is the boot read set (and so the read ACL) of an agent whose definition
// names neither subscribe nor allowSubscribe: [general], as the reference's §11 says. It
// returns a new slice each call.
func DefaultReadSet() []string { return []string{DefaultChannel} }

// ReadSet resolves an agent's boot read set (subscribe) and read ACL (allowSubscribe) the
// way the reference's §11 does, in the one place every definition goes through (mint,
// personas, cotal.yaml, the actor ledger, the ACL row written at mint):
//
//   - both omitted (nil): both are DefaultReadSet, so the agent reads general;
//   - allowSubscribe omitted or empty: the read ACL is subscribe;
//   - an explicit empty list (non-nil, no entries, such as subscribe: [] in YAML or
//     an empty --allow-subscribe value on the command line) is kept: the agent reads nothing.
//
// subscribe alone omitted, with allowSubscribe given, joins nothing at boot. Neither result
// is ever nil, so resolving a resolved pair changes nothing; they may share memory with the
// arguments.
func ReadSet(subscribe, allowSubscribe []string) (sub, allow []string) {
	if subscribe == nil && allowSubscribe == nil {
		return DefaultReadSet(), DefaultReadSet()
	}
	if subscribe == nil {
		subscribe = []string{}
	}
	if len(allowSubscribe) == 0 {
		return subscribe, subscribe
	}
	return subscribe, allowSubscribe
}
