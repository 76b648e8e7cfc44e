package lang

import (
	"slices"
	"strings"
	"testing"
)

// refusalCases holds one program per refused construct: the code it must
// produce, and the line it must be blamed on.
var refusalCases = []struct {
	name, code, src string
	line            int
}{
	{"class", "L1001", "class Plan {}", 1},
	{"super", "L1001", "const f = () => super.x", 1},
	{"this", "L1002", "const me = () => this", 1},
	{"var", "L1003", "var n = 1", 1},
	{"var in for", "L1003", "for (var i = 0; i < 3; i++) {}", 1},
	{"for in", "L1004", "const r = {}\nfor (const k in r) {}", 2},
	{"in operator", "L1004", "const r = {}\nconst h = \"a\" in r", 2},
	{"generator", "L1005", "function* g() {}", 1},
	{"yield", "L1005", "function* g() { yield 1 }", 1},
	{"regex", "L1007", "const r = /ab+/g", 1},
	{"return newline", "L1008", "function f() {\n  return\n  1 + 2\n}", 3},
	{"call line opens with paren", "L1008", "const a = () => 1\nconst b = a\n(1)", 3},
	{"bracket line opens", "L1008", "const xs = [1]\nconst y = xs\n[0]", 3},
	{"unbraced if", "L1009", "let n = 0\nif (n === 0) n = 1", 2},
	{"unbraced else", "L1009", "let n = 0\nif (n === 0) { n = 1 } else n = 2", 2},
	{"unbraced while", "L1009", "let n = 0\nwhile (n < 3) n++", 2},
	{"unbraced for of", "L1009", "for (const x of [1]) log(x)", 1},
	{"last case does not end", "L1010", "const k = 1\nswitch (k) {\n  case 1:\n    log(1)\n}", 3},
	{"fallthrough", "L1010", "const k = 1\nswitch (k) {\n  case 1:\n    log(1)\n  case 2:\n    log(2)\n}", 3},
	{"computed key", "L1011", "const k = \"a\"\nconst r = { [k]: 1 }", 2},
	{"elision", "L1012", "const xs = [1, , 3]", 1},
	{"with", "L1013", "const r = {}\nwith (r) {}", 2},
	{"getter", "L1015", "const r = { get a() { return 1 } }", 1},
	{"setter", "L1015", "const r = { set a(v) {} }", 1},
	{"instanceof", "L1016", "const a = {}\nconst b = a instanceof a", 2},
	{"label", "L1017", "outer: for (const x of [1]) { break outer }", 1},
	{"labelled continue", "L1017", "for (const x of [1]) { continue x }", 1},
	{"tagged template", "L1018", "const t = (s) => s\nconst x = t`hi`", 2},
	{"new", "L1019", "const d = new Plan()", 1},
	{"import", "L1020", "import x from \"y\"\nlog(x)", 1},
	{"export", "L1020", "export const a = 1", 1},
	{"dynamic import", "L1020", "const m = await import(\"x\")", 1},
	{"import meta", "L1020", "const m = import.meta", 1},
	{"new target", "L1020", "function f() { return new.target }", 1},
	{"delete", "L1021", "const r = { a: 1 }\ndelete r.a", 2},
	{"do while", "L1022", "do { log(1) } while (false)", 1},
	{"await outside async", "L1023", "function f() { await sleep(\"1s\") }", 1},
	{"await outside async arrow", "L1023", "const f = () => { const x = await sleep(\"1s\") }", 1},
	{"top-level return", "L1024", "log(1)\nreturn", 2},
	{"loose equality", "L1025", "const same = 0 == \"\"", 1},
	{"loose inequality", "L1025", "const diff = 0 != 1", 1},
	{"comma", "L1026", "let a = 0\nlet b = 0\na = 1, b = 2", 3},
	{"void", "L1027", "const u = void 0", 1},
	{"proto key", "L1028", "const r = { __proto__: null }", 1},
	{"proto member", "L1028", "const r = {}\nconst p = r.__proto__", 2},
	{"debugger", "L1029", "debugger", 1},
	{"unparsable", "L1029", "const = 1", 1},
	{"unbalanced wrapper", "L1029", "})\n(async function(){", 1},
	{"bigint", "L1030", "const big = 10n", 1},
	{"unknown identifier", "L2001", "log(nope)", 1},
	{"shadow primitive", "L2002", "const turn = 1", 1},
	{"shadow builtin param", "L2002", "const f = (keys) => keys", 1},
	{"assign const", "L2003", "const a = 1\na = 2", 2},
	{"assign function", "L2003", "function f() {}\nf = 1", 2},
	{"assign reserved", "L2003", "log = 1", 1},
	{"dead zone", "L2004", "log(a)\nconst a = 1", 1},
	{"dead zone self", "L2004", "const a = a + 1", 1},
	{"promise", "L2011", "const p = Promise.all([])", 1},
	{"math", "L2012", "const r = Math.random()", 1},
	{"date", "L2012", "const t = Date.now()", 1},
	{"eval", "L2012", "eval(\"1\")", 1},
	{"function ctor", "L2012", "const f = Function(\"return 1\")", 1},
	{"unawaited effect", "L2013", "sleep(\"1m\")", 1},
	{"unawaited async call", "L2013", "async function work() { return await sleep(\"1m\") }\nconst p = work()", 2},
	{"unawaited const async", "L2013", "const work = async () => await sleep(\"1m\")\nwork()", 2},
	{"branch writes outer", "L2032", "let n = 0\nawait parallel({ a: async () => { n = 1 } })", 2},
	{"branch writes outer member", "L2032", "const r = { n: 0 }\nawait fanOut([\"a\"], async (k) => { r.n = 1 }, { name: \"fan\", key: (k) => k })", 2},
	{"branch update outer", "L2032", "let n = 0\nawait race({ a: async () => { n++ } })", 2},
	{"unknown option", "L3011", "const a = await spawn(\"p\")\nawait turn(a, { name: \"go\", colour: \"red\" })", 2},
	{"missing name", "L3012", "const a = await spawn(\"p\")\nawait turn(a, { deadline: \"1m\" })", 2},
	{"missing bag", "L3012", "const a = await spawn(\"p\")\nawait ask(a)", 2},
	{"missing checkpoint name", "L3012", "await checkpoint()", 1},
	{"computed name", "L3013", "const a = await spawn(\"p\")\nconst n = \"go\"\nawait turn(a, { name: n })", 3},
	{"computed checkpoint name", "L3013", "const n = \"go\"\nawait checkpoint(n, \"ok?\")", 2},
	{"bag not literal", "L3012", "const a = await spawn(\"p\")\nconst o = { name: \"go\" }\nawait turn(a, o)", 3},
	{"malformed name", "L3014", "const a = await spawn(\"p\")\nawait turn(a, { name: \"Build It\" })", 2},
	{"malformed optional name", "L3014", "await sleep(\"1m\", { name: \"-x\" })", 1},
	{"reserved character", "L3025", "await checkpoint(\"a/b\", \"ok?\")", 1},
	{"reserved branch key", "L3025", "await parallel({ \"a:b\": () => sleep(\"1s\") })", 1},
	{"notify unbounded", "L3043", "const a = await spawn(\"p\")\nawait notify([a], { decision: \"x\", outcome: \"y\", extra: 1 })", 2},
	{"notify long detail", "L3043", "const a = await spawn(\"p\")\nawait notify([a], { decision: \"x\", outcome: \"y\", detail: { note: \"" + strings.Repeat("x", 129) + "\" } })", 2},
	{"notify missing outcome", "L3043", "const a = await spawn(\"p\")\nawait notify([a], { decision: \"x\" })", 2},
	{"notify bad key", "L3043", "const a = await spawn(\"p\")\nawait notify([a], { decision: \"x\", outcome: \"y\", detail: { Bad_Key: 1 } })", 2},
	{"to without escalate", "L3044", "await checkpoint(\"ok\", \"ok?\", { to: \"ops\" })", 1},
	{"probe not function", "L3045", "await waitUntil(\"x\", { name: \"w\", every: \"1m\", deadline: \"1h\" })", 1},
	{"no cadence", "L3046", "await waitUntil(() => null, { name: \"w\", deadline: \"1h\" })", 1},
	{"zero cadence", "L3047", "await waitUntil(() => null, { name: \"w\", every: \"0s\", deadline: \"1h\" })", 1},
	{"cadence past deadline", "L3047", "await waitUntil(() => null, { name: \"w\", every: \"2h\", deadline: \"1h\" })", 1},
	{"placement computed", "L3048", "const e = \"m\"\nawait spawn(\"p\", { placement: { endpoint: e, instanceId: \"i\" } })", 2},
}

func TestValidateRefusesEachConstruct(t *testing.T) {
	for _, c := range refusalCases {
		t.Run(c.name, func(t *testing.T) {
			v := Validate(c.src)
			if !slices.Contains(v.Codes(), c.code) {
				t.Fatalf("want %s, got %v", c.code, v.Problems)
			}
			for _, p := range v.Problems {
				if p.Code == c.code {
					if p.Line != c.line {
						t.Errorf("%s blamed on line %d, want %d", c.code, p.Line, c.line)
					}
					if p.Title == "" || p.Message == "" {
						t.Errorf("%s carries no title or message: %+v", c.code, p)
					}
					return
				}
			}
		})
	}
}

// acceptedCases use every admitted construct; the validator must answer no code.
var acceptedCases = map[string]string{
	"statements": `let n = 0
const xs = [1, 2, 3]
function add(a, b = 1, ...rest) { return a + b + len(rest) }
for (let i = 0; i < 3; i++) { n += i }
for (const x of xs) { if (x === 2) { continue } else if (x === 3) { break } else { n++ } }
while (n < 10) { n = n + 1 }
switch (n) {
  case 1:
  case 2:
    n = 0
    break
  default:
    n = add(n)
    break
}
try { throw { code: "x" } } catch (e) { log(e.code) } finally { log("done") }
;
{ const inner = 1; log(inner) }
`,
	"expressions": `const r = { a: 1, "b": [1, 2], ...{ c: 3 } }
const { a, b: [first, ...others], ...restOf } = r
const [p = 1, q] = [null, 2]
const t = ` + "`n=${a}`" + `
const o = r?.a ?? r?.["b"]?.[0]
let m = !a || -a + +a * ~a / 2 % 3 ** 2
m &&= 1
m ||= 2
m ??= 3
m <<= 1
const cmp = a === 1 && a !== 2 && a < 3 && a <= 3 && a > 0 && a >= 0
const bits = (a & 1) | (a ^ 2) | (a << 1) | (a >> 1) | (a >>> 1)
const ty = typeof a === "number" ? "n" : "x"
const f = function named(x) { return x <= 0 ? 0 : named(x - 1) }
const g = async (x) => await sleep("1s")
const call = add(...[1, 2])
function add(x, y) { return x + y }
log(first, others, restOf, p, q, t, o, m, cmp, bits, ty, f(2), call)
`,
	"effects": `const lead = await spawn({ persona: "lead", model: "m" }, { name: "lead", worktree: "wt", join: [channel("dev")], permits: { turns: 3 } })
const r = await turn(lead, { name: "plan", deadline: "30m" })
const rec = await ask(lead, { name: "verdict", schema: { ok: "boolean" }, deadline: "10m", attempts: 2 })
const cp = await checkpoint("approve", "Ship it?", { timeout: "1d", onExpiry: "escalate", to: "ops" })
await sleep("5m", { name: "pause" })
const got = await wait(message(channel("dev"), { from: "x" }), { timeout: "1h" }) ?? "none"
const obs = await waitUntil(async () => await wait(idle(channel("dev"), "1m")), { name: "quiet", every: "1m", deadline: "1h", terminal: (o) => o !== null })
await notify([lead], { decision: "plan", outcome: "approved", detail: { round: 1, ok: true, note: "fine" } })
await monitor(lead)
const both = await parallel({ a: () => turn(lead, { name: "a" }), b: async () => { return await turn(lead, { name: "b" }) } }, { name: "both" })
const first = await race({ reply: () => wait(replied(lead), { timeout: "20m" }), down: () => wait(down(lead)) })
const fan = await fanOut(["x", "y"], (k) => spawn("rev-" + k, { name: "rev-" + k }), { name: "reviewers", key: (k) => k })
const club = await conclave([lead], async (ch) => { return await turn(lead, { name: "talk" }) }, { name: "club" })
const meta = run()
log(r.status, rec, cp.status, got, obs, both, first.index, fan, club, meta.id, now(), random(), randomInt(3), pick([1]), duration("1m"))
`,
	"async helper returned": `async function work(n) { return await sleep("1m") }
async function outer() { return work(1) }
await outer()
await parallel({ one: () => work(1), two: () => work(2) })
`,
	"branch writes own bindings": `const res = await parallel({
  a: async () => { let local = 0; local = 1; const inner = () => { local = 2 }; inner(); return local },
})
log(res)
`,
	"nested function reference before declaration": `function early() { return later }
const later = 1
log(early())
`,
}

func TestValidateAcceptsTheAdmittedSyntax(t *testing.T) {
	for name, src := range acceptedCases {
		t.Run(name, func(t *testing.T) {
			if v := Validate(src); !v.OK() {
				t.Fatalf("refused: %v", v.Problems)
			}
		})
	}
}

func TestValidateWarnings(t *testing.T) {
	v := Validate(`await parallel([() => sleep("1s")])
await fanOut(["a", "b"], (k) => sleep("1s"), { name: "fan" })
`)
	if !v.OK() {
		t.Fatalf("warnings must not block: %v", v.Problems)
	}
	got := codesOf(v.Warnings)
	if !slices.Contains(got, "L3023") || !slices.Contains(got, "L3021") {
		t.Fatalf("want warnings L3023 and L3021, got %v", v.Warnings)
	}
}

func TestValidateCollectsEveryError(t *testing.T) {
	v := Validate("var a = 1\nconst b = a == 2\nclass C {}")
	want := []string{"L1003", "L1025", "L1001"}
	for _, c := range want {
		if !slices.Contains(v.Codes(), c) {
			t.Errorf("want %s among %v", c, v.Codes())
		}
	}
	for i := 1; i < len(v.Problems); i++ {
		if v.Problems[i].Line < v.Problems[i-1].Line {
			t.Errorf("problems are not in source order: %v", v.Problems)
		}
	}
}

func TestValidatePositionsAreTheAuthors(t *testing.T) {
	cases := []struct {
		src, code string
		line, col int
	}{
		{"const same = 0 == \"\"", "L1025", 1, 14},
		{"log(1)\n  var x = 2", "L1003", 2, 3},
		{"const é = 1\nconst r = /x/", "L1007", 2, 11},
		{"log(1)\nfunction f() { await sleep(\"1s\") }", "L1023", 2, 16},
	}
	for _, c := range cases {
		v := Validate(c.src)
		found := false
		for _, p := range v.Problems {
			if p.Code == c.code {
				found = true
				if p.Line != c.line || p.Column != c.col {
					t.Errorf("%q: %s at %d:%d, want %d:%d", c.src, c.code, p.Line, p.Column, c.line, c.col)
				}
			}
		}
		if !found {
			t.Errorf("%q: no %s in %v", c.src, c.code, v.Problems)
		}
	}
}
