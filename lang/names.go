package lang

// effectSig describes one effect primitive's call shape: where its option bag
// sits, which keys the bag may hold, and how the step name is given.
type effectSig struct {
	bagIndex  int             // argument position of the option bag
	keys      map[string]bool // the closed option bag
	nameRule  nameRule        // required, positional or optional
	signature string          // the signature quoted in a refusal
	scope     bool            // a concurrency scope rather than a plain effect
}

type nameRule int

const (
	nameOptional nameRule = iota
	nameRequired
	namePositional
)

func keySet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// effects is the table of effect primitives (LANG §6.1, §6.3).
var effects = map[string]effectSig{
	"spawn":      {1, keySet("name", "worktree", "join", "role", "permits", "supervise", "onFork", "events", "placement", "cwd"), nameOptional, "spawn(persona, { name?, worktree?, join?, role?, permits?, supervise?, onFork?, events?, placement?, cwd? })", false},
	"turn":       {1, keySet("name", "deadline"), nameRequired, "turn(agent, { name, deadline? })", false},
	"ask":        {1, keySet("name", "schema", "deadline", "attempts"), nameRequired, "ask(agent, { name, schema, deadline?, attempts? })", false},
	"checkpoint": {2, keySet("schema", "timeout", "onExpiry", "to"), namePositional, "checkpoint(name, prompt, { schema?, timeout?, onExpiry?, to? })", false},
	"sleep":      {1, keySet("name"), nameOptional, "sleep(duration, { name? })", false},
	"wait":       {1, keySet("name", "timeout"), nameOptional, "wait(event, { name?, timeout? })", false},
	"waitUntil":  {1, keySet("name", "every", "deadline", "terminal"), nameRequired, "waitUntil(probe, { name, every, deadline, terminal? })", false},
	"notify":     {2, keySet("name"), nameOptional, "notify(agents, fact, { name? })", false},
	"monitor":    {1, keySet("name"), nameOptional, "monitor(agent, { name? })", false},
	"parallel":   {1, keySet("name"), nameOptional, "parallel(branches, { name? })", true},
	"race":       {1, keySet("name"), nameOptional, "race(branches, { name? })", true},
	"fanOut":     {2, keySet("name", "key"), nameRequired, "fanOut(items, fn, { name, key? })", true},
	"conclave":   {2, keySet("name", "channel"), nameRequired, "conclave(members, fn, { name, channel? })", true},
}

// pureNames are the reserved names that are not effects: event constructors,
// pure primitives, the builtins (LANG §3, §5.1) and the value undefined.
var pureNames = keySet(
	"replied", "message", "idle", "down", "channel", "run",
	"keys", "values", "entries", "has", "merge",
	"len", "map", "filter", "find", "some", "every", "sort", "slice", "concat", "join", "reverse", "unique", "range", "sum",
	"split", "trim", "lower", "upper", "startsWith", "endsWith", "contains", "replace",
	"min", "max", "abs", "floor", "ceil", "round", "parseNumber",
	"json", "assert", "log",
	"random", "randomInt", "pick", "now", "duration",
	"undefined",
)

// isReserved reports whether a program may reference name without declaring it.
func isReserved(name string) bool {
	_, eff := effects[name]
	return eff || pureNames[name]
}

// hostGlobals are refused by name (L2012), each with the language's
// replacement where there is one (LANG §3).
var hostGlobals = map[string]string{
	"Math": "abs, floor, ceil, round, min, max, random, randomInt", "JSON": "json.parse, json.stringify",
	"Object": "keys, values, entries, has, merge", "Array": "array literals and the array builtins",
	"Number": "parseNumber", "String": "a template literal", "Boolean": "!!value",
	"parseInt": "parseNumber", "parseFloat": "parseNumber", "isNaN": "x !== x", "isFinite": "a comparison",
	"Infinity": "a large literal", "NaN": "null", "Date": "now(), duration()", "Map": "a record",
	"Set": "unique(xs)", "Error": "throw a record", "console": "log(...)",
	"setTimeout": "sleep(duration)", "setInterval": "a loop around sleep(duration)",
}

// hostGlobalsBare are refused by name with no replacement (LANG §3).
var hostGlobalsBare = keySet(
	"globalThis", "global", "window", "self", "process", "fetch", "RegExp", "Reflect", "Proxy", "Symbol",
	"WeakMap", "WeakSet", "WeakRef", "Function", "setImmediate", "queueMicrotask", "require", "module",
	"exports", "__dirname", "__filename", "Buffer", "crypto", "performance", "structuredClone", "eval",
	"arguments", "BigInt", "Intl", "Atomics", "SharedArrayBuffer", "ArrayBuffer", "DataView", "TextEncoder",
	"TextDecoder", "URL", "URLSearchParams", "AbortController", "encodeURIComponent", "decodeURIComponent",
	"encodeURI", "decodeURI", "escape", "unescape",
	"Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array",
	"Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
)
