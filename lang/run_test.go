package lang

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestRunKeysEffectsByPlace(t *testing.T) {
	f := newFake()
	err := run(t, `const b = await spawn("builder")
const again = await spawn("builder")
for (const n of [1, 2]) {
  await turn(b, { name: "build", deadline: "30m" })
}
await sleep("1m")
log("done", b.agent)
`, f)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/spawn:builder#0", "/spawn:builder#1", "/turn:build#0", "/turn:build#1", "/sleep#0"}
	if got := f.keys(); !slices.Equal(got, want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	turn := f.calls[2]
	if turn.InputHash != mustDigest(t, map[string]any{"agent": "agent-builder", "deadline": "30m"}) {
		t.Errorf("turn input hash %s is not the digest of {agent, deadline}", turn.InputHash)
	}
	if turn.RequestID != RequestID("run-1", "/turn:build#0", turn.InputHash, 0) || len(turn.RequestID) != 43 {
		t.Errorf("turn request id %s", turn.RequestID)
	}
	if got := joinLogs(f); got != "|done agent-builder" {
		t.Errorf("log = %q", got)
	}
}

func mustDigest(t *testing.T, v any) string {
	t.Helper()
	d, err := Digest(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRunProjections(t *testing.T) {
	f := newFake()
	err := run(t, `const a = await spawn({ persona: "rev", model: "m1" }, { name: "r", worktree: "wt", join: [channel("dev")], permits: { turns: 2 } })
await ask(a, { name: "verdict", schema: { ok: "boolean" } })
await checkpoint("approve", "Ship?", { timeout: "1h", onExpiry: "escalate", to: "ops" })
await checkpoint("plain", "Ok?", { onExpiry: "proceed" })
await wait(replied(a), { timeout: "5m" })
await notify([a], { decision: "ship", outcome: "go", detail: { n: 1 } })
await monitor(a)
`, f)
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"persona": "rev", "model": "m1", "variant": nil, "worktree": "wt", "role": nil, "join": []any{"dev"}},
		{"agent": "agent-rev", "schema": map[string]any{"ok": "boolean"}, "deadline": nil, "attempts": nil},
		{"prompt": "Ship?", "schema": nil, "timeout": "1h", "onExpiry": "escalate", "to": "ops"},
		{"prompt": "Ok?", "schema": nil, "timeout": nil},
		{"event": map[string]any{"event": "replied", "agent": "agent-rev"}, "timeout": "5m"},
		{"agents": []any{"agent-rev"}, "fact": map[string]any{"decision": "ship", "outcome": "go", "detail": map[string]any{"n": 1.0}}},
		{"agent": "agent-rev"},
	}
	for i, w := range want {
		if got := f.calls[i].InputHash; got != mustDigest(t, w) {
			c, _ := Canonical(f.calls[i].Input)
			t.Errorf("%s: projection %s does not hash as %v", f.calls[i].Key, c, w)
		}
	}
}

func TestRunScopesKeyEachBranch(t *testing.T) {
	f := newFake()
	err := run(t, `const a = await spawn("a")
const both = await parallel({
  lint: () => turn(a, { name: "lint" }),
  tests: async () => { await turn(a, { name: "tests" }); return 7 },
}, { name: "checks" })
const fan = await fanOut([{ id: "x" }, { id: "y" }], async (item, i) => {
  await sleep("1s")
  return item.id + i
}, { name: "fan" })
const club = await conclave([a], async (ch) => ch.channel, { name: "room" })
assert(both.tests === 7, "parallel value")
assert(fan[0] === "x0" && fan[1] === "y1", "fanOut order")
assert(club === "conclave-room", "conclave channel")
`, f)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/spawn:a#0", "/parallel:checks#0/b:lint/turn:lint#0", "/parallel:checks#0/b:tests/turn:tests#0",
		"/fanOut:fan#0/b:x/sleep#0", "/fanOut:fan#0/b:y/sleep#0"}
	if got := f.sortedKeys(); !slices.Equal(got, sortStrings(want)) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	var scopes []string
	for _, s := range f.scopes {
		scopes = append(scopes, s.Key)
	}
	if !slices.Equal(scopes, []string{"/parallel:checks#0", "/fanOut:fan#0", "/conclave:room#0"}) {
		t.Errorf("scope keys = %v", scopes)
	}
}

func sortStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func TestRaceWinnerIsTheLeastLogicalClock(t *testing.T) {
	f := newFake()
	f.answers["/race#0/b:slow/sleep#0"] = Result{EndedAt: 9000}
	f.answers["/race#0/b:fast/sleep#0"] = Result{EndedAt: 5000}
	err := run(t, `const r = await race({
  slow: () => sleep("1h"),
  fast: () => sleep("1m"),
})
assert(r.index === "fast", "winner " + r.index)
assert(now() === 9000, "the scope's clock joins its branches")
`, f)
	if err != nil {
		t.Fatal(err)
	}
	scope := f.recorded["/race#0@scope"]
	if !slices.Equal(scope.Branches, []string{"slow", "fast"}) || !slices.Equal(scope.Losers, []string{"slow"}) || scope.EndedAt != 9000 {
		t.Errorf("race scope result: branches %v losers %v endedAt %d", scope.Branches, scope.Losers, scope.EndedAt)
	}
}

func TestReplayPerformsNothing(t *testing.T) {
	src := `const b = await spawn("builder")
const r = await parallel({ one: () => turn(b, { name: "one" }), two: () => turn(b, { name: "two" }) }, { name: "p" })
const cp = await checkpoint("approve", "Go?")
await waitUntil(async () => { return await ask(b, { name: "probe", schema: {} }) }, { name: "ready", every: "1m", deadline: "1h" })
log(cp.value, cp.status, cp.by, cp.answerId, random(), now())
`
	live := newFake()
	if err := run(t, src, live); err != nil {
		t.Fatal(err)
	}
	if live.performed == 0 {
		t.Fatal("the live run performed nothing")
	}
	replay := newFake()
	replay.recorded = live.recorded
	if err := run(t, src, replay); err != nil {
		t.Fatal(err)
	}
	if replay.performed != 0 {
		t.Errorf("a replay over a full record performed %d effects", replay.performed)
	}
	for _, k := range replay.keys() {
		if !slices.Contains(live.keys(), k) {
			t.Errorf("replay reached %s, which the live run never did", k)
		}
	}
	if joinLogs(live) != joinLogs(replay) {
		t.Errorf("replay logged %q, live %q", joinLogs(replay), joinLogs(live))
	}
}

func TestCheckpointDisposition(t *testing.T) {
	expired := Result{Value: map[string]any{"outcome": "expired", "at": 5.0}, EndedAt: 5}
	for _, c := range []struct {
		policy, want string
		calls        int
	}{
		{``, "L4007", 1},
		{`, { onExpiry: "fail" }`, "L4007", 1},
		{`, { onExpiry: "proceed" }`, "expired", 1},
		{`, { onExpiry: "escalate", to: "ops" }`, "expired", 2},
	} {
		f := newFake()
		f.answers["/checkpoint:go#0"] = expired
		err := run(t, `let out = "none"
try {
  const r = await checkpoint("go", "Go?"`+c.policy+`)
  out = r.status
} catch (e) {
  out = e.code
}
log(out)
`, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := joinLogs(f); got != "|"+c.want {
			t.Errorf("policy %q: got %q, want %q", c.policy, got, c.want)
		}
		if len(f.calls) != c.calls {
			t.Errorf("policy %q: %d checkpoint mints, want %d", c.policy, len(f.calls), c.calls)
		}
		if c.calls == 2 && (f.calls[1].Attempt != 1 || f.calls[1].RequestID == f.calls[0].RequestID) {
			t.Errorf("escalation is not a second attempt with its own request id: %+v", f.calls[1])
		}
	}
}

func TestEffectFailureIsCatchable(t *testing.T) {
	f := newFake()
	f.failures["/turn:build#0"] = &EffectError{Code: "L4003", Kind: "deadline", Message: "late"}
	err := run(t, `const b = await spawn("builder")
try {
  await turn(b, { name: "build", deadline: "10m" })
} catch (e) {
  if (e.code === "L4003") {
    await notify([b], { decision: "build", outcome: "timed-out" })
  } else {
    throw e
  }
}
`, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.keys(); !slices.Contains(got, "/notify#0") {
		t.Errorf("the catch did not run: %v", got)
	}
}

func TestUncatchableStopsTheRun(t *testing.T) {
	f := newFake()
	stop := errors.New("journal append rejected")
	f.failures["/sleep#0"] = stop
	err := run(t, `try { await sleep("1m") } catch (e) { log("caught") } finally { log("finally") }
await sleep("2m")
`, f)
	if !errors.Is(err, stop) {
		t.Fatalf("want the host's stop, got %v", err)
	}
	if len(f.logs) != 0 || len(f.calls) != 1 {
		t.Errorf("a catch or finally ran past an uncatchable stop: logs %v calls %v", f.logs, f.keys())
	}
}

// runtimeFaults are refusals the language raises while running; each is
// caught by the program and its code logged.
var runtimeFaults = []struct{ name, code, src string }{
	{"host constructor unreachable", "L4014", `const c = "".constructor`},
	{"array constructor unreachable", "L4014", `const c = [].constructor`},
	{"function has no members", "L4014", `const f = () => 1
const c = f.constructor`},
	{"builtin has no members", "L4014", `const c = log.call`},
	{"number prototype unreachable", "L4014", `const c = (1).constructor`},
	{"record has no prototype", "", `const r = {}
assert(r.constructor === undefined && r.toString === undefined && json.constructor === undefined, "prototype reached")`},
	{"null member", "L4010", `const r = null
const x = r.a`},
	{"not a function", "L4011", `const r = { a: 1 }
r.a()`},
	{"method is not a value", "L4020", `const f = [1].includes`},
	{"frozen result", "L2031", `const a = await spawn("a")
a.agent = "other"`},
	{"frozen argument", "L2031", `const opts = { worktree: "w" }
await spawn("a", opts)
opts.worktree = "x"`},
	{"write past end", "L4019", `const xs = [1]
xs[3] = 1`},
	{"length grows", "L4017", `const xs = [1]
xs.length = 4`},
	{"no implicit conversion", "L4018", "const s = `${[1]}`"},
	{"update non number", "L4018", `let s = "1"
s++`},
	{"assertion", "L4012", `assert(false, "nope")`},
	{"len of record", "L4016", `len({})`},
	{"keys of number", "L4016", `keys(5)`},
	{"not iterable", "L4015", `for (const x of 5) { log(x) }`},
	{"undefined crosses", "L3041", `await sleep("1m", { name: undefined })
const a = await spawn("a")
await notify([a], { decision: "x", outcome: "y", detail: { n: undefined } })`},
	{"function crosses", "L3042", `const a = await spawn("a")
await ask(a, { name: "q", schema: { f: () => 1 } })`},
	{"computed fact", "L3043", `const a = await spawn("a")
const d = "Not A Token"
await notify([a], { decision: d, outcome: "y" })`},
	{"computed name", "L3014", `const n = "Bad Name"
await sleep("1s", { name: n })`},
	{"fanOut no key", "L3021", `await fanOut([1, 2], (x) => sleep("1s"), { name: "f" })`},
	{"fanOut duplicate", "L3024", `await fanOut(["a", "a"], (x) => sleep("1s"), { name: "f", key: (x) => x })`},
	{"fanOut reserved key", "L3025", `await fanOut(["a/b"], (x) => sleep("1s"), { name: "f", key: (x) => x })`},
	{"branch writes alias", "L2032", `const box = { n: 0 }
const setN = (o) => { o.n = 1 }
await parallel({ a: async () => { setN(box) } })`},
	{"callable then", "L4021", `const r = { then: () => 1 }`},
	{"malformed sleep", "L4016", `await sleep("soon")`},
	{"empty race", "L4016", `await race({})`},
	{"dead zone at run time", "L2004", `function early() { return later }
early()
const later = 1`},
	{"log refuses code", "L4016", `log({ f: () => 1 })`},
}

func TestRuntimeFaults(t *testing.T) {
	for _, c := range runtimeFaults {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			src := "let code = \"\"\ntry {\n" + c.src + "\n} catch (e) { code = e.code }\nlog(code)\n"
			if err := run(t, src, f); err != nil {
				t.Fatal(err)
			}
			if got := joinLogs(f); got != "|"+c.code {
				t.Errorf("got %q, want %q", got, c.code)
			}
		})
	}
}

func TestBudgets(t *testing.T) {
	p := mustCompile(t, `let n = 0
while (true) { n++ }`)
	err := p.Run(context.Background(), Options{RunID: "r", StepBudget: 500, Effects: newFake()})
	var fl *Fault
	if !errors.As(err, &fl) || fl.Code != "L4013" {
		t.Errorf("a pure loop: want L4013, got %v", err)
	}
	p = mustCompile(t, `for (const i of range(5)) { await sleep("1s") }`)
	f := newFake()
	err = p.Run(context.Background(), Options{RunID: "r", EffectCeiling: 3, Effects: f})
	if !errors.As(err, &fl) || fl.Code != "L4009" || len(f.calls) != 3 {
		t.Errorf("effect ceiling: want L4009 after 3 effects, got %v after %d", err, len(f.calls))
	}
}

func TestDeepRecursionIsAHostFault(t *testing.T) {
	f := newFake()
	err := run(t, `function deeper(n) { return deeper(n + 1) }
try { deeper(0) } catch (e) { log("caught") } finally { log("finally") }
`, f)
	if !errors.Is(err, ErrStackExhausted) || len(f.logs) != 0 {
		t.Fatalf("want an uncatchable stack exhaustion, got %v with logs %v", err, f.logs)
	}
}

func TestCancelledContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := mustCompile(t, `while (true) { }`).Run(ctx, Options{RunID: "r", Effects: newFake()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestCompoundAssignment(t *testing.T) {
	f := newFake()
	err := run(t, `let a = 10
a += 5
a -= 3
a *= 2
a /= 4
a %= 5
a **= 2
a <<= 2
a >>= 1
a >>>= 0
a |= 1
a &= 7
a ^= 2
let s = "x"
s += 1
let n = null
n ??= "set"
let t = 0
t ||= "or"
let u = 1
u &&= "and"
const r = { k: 1 }
r.k += 1
const xs = [1]
xs[0] -= 1
log(a, s, n, t, u, r.k, xs[0])
`, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinLogs(f); got != "|1 x1 set or and 2 0" {
		t.Errorf("got %q", got)
	}
}

func TestClosuresAndScopes(t *testing.T) {
	f := newFake()
	err := run(t, `const fs = []
for (let i = 0; i < 3; i++) { fs.push(() => i) }
let total = 0
for (const g of fs) { total += g() }
function counter() { let n = 0; return () => { n += 1; return n } }
const c = counter()
c()
const fact = function self(k) { return k <= 1 ? 1 : k * self(k - 1) }
const { a = 5, ...rest } = { b: 2, c: 3 }
const [x, , z = 9] = [1, 2]
let hit = "none"
switch (total) {
  case 3:
    hit = "three"
    break
  default:
    hit = "other"
    break
}
log(fs.map((g) => g()), total, c(), fact(5), a, rest, x, z, hit)
`, f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := joinLogs(f), `|[0,1,2] 3 2 120 5 {"b":2,"c":3} 1 9 three`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPureLibrary(t *testing.T) {
	f := newFake()
	err := run(t, `const r = { b: 2, a: 1 }
const xs = [3, 1, 2]
const out = [
  keys(r), values(r), has(r, "a"), merge(r, { c: 3 }), len(xs), map(xs, (x) => x * 2), filter(xs, (x) => x > 1),
  find(xs, (x) => x > 5), sort(xs), sort(["b", "a", null, 2]), slice(xs, 1), concat(xs, [4]), join(xs, "-"),
  reverse(xs), unique([1, 1, "1"]), range(3), sum(xs), split("a,b", ","), trim(" x "), lower("AB"), upper("ab"),
  contains("abc", "b"), replace("a.a", ".", "-"), min(3, 1), max(3, 1), abs(-2), floor(1.5), ceil(1.2), round(2.5),
  parseNumber("0x10"), json.parse("{\"k\":[1]}"), json.stringify({ b: 1, a: [true, null] }), duration("2m"),
  xs.map((x, i) => x + i), xs.reduce((a, b) => a + b, 0), xs.indexOf(2), "abc".slice(-2), "a-b-c".replace("-", "+"),
  "x".padStart(3, "0"), (1.005).toFixed(2), (0.000001234).toPrecision(2), (2.5).toFixed(0), (-1.5).toFixed(0), (0.125).toFixed(2), "abc".substring(-1, 2), (123.456).toPrecision(4), (1234.5).toPrecision(2), 0.1 + 0.2, 1 / 3, typeof null, 7 % -3, 2 ** 10, -7 >> 1, -1 >>> 28,
  keys({ b: 1, 2: 1, a: 1, 1: 1 }), run().id, channel("dev"), replied({ agent: "x" }), r?.z?.y ?? "none", [...xs, ..."ab"],
]
log(json.stringify(out))
`, f)
	if err != nil {
		t.Fatal(err)
	}
	want := `[["b","a"],[2,1],true,{"a":1,"b":2,"c":3},3,[6,2,4],[3,2],null,[1,2,3],[null,2,"a","b"],[1,2],[3,1,2,4],"3-1-2",[2,1,3],[1,"1"],[0,1,2],6,["a","b"],"x","ab","AB",true,"a-a",1,3,2,1,2,3,16,{"k":[1]},"{\"a\":[true,null],\"b\":1}",120000,[3,2,4],6,2,"bc","a+b-c","00x","1.00","0.0000012","3","-2","0.13","ab","123.5","1.2e+3",0.30000000000000004,0.3333333333333333,"object",1,1024,-4,15,["1","2","b","a"],"run-1",{"channel":"dev"},{"agent":"x","event":"replied"},"none",[3,1,2,"a","b"]]`
	if got := strings.TrimPrefix(joinLogs(f), "|"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestOrchestratorProgram runs a whole program end to end against scripted
// answers, then replays it over what it recorded: the replay reaches the
// same outcome and performs nothing.
func TestOrchestratorProgram(t *testing.T) {
	src, err := os.ReadFile("testdata/orchestrator.cotal.js")
	if err != nil {
		t.Fatal(err)
	}
	live := newFake()
	live.answers["/checkpoint:pick-issue#0"] = Result{Value: map[string]any{"outcome": "resolved", "value": map[string]any{"issue": 42.0}, "by": "ops", "at": 10.0}, EndedAt: 10}
	live.answers["/ask:fixed#0"] = Result{Value: map[string]any{"sha": "c0ffee"}, EndedAt: 20}
	for _, side := range []string{"left", "right"} {
		live.answers["/fanOut:reviews#0/b:"+side+"/ask:verdict#0"] = Result{Value: map[string]any{"approve": true}, EndedAt: 30}
	}
	live.answers["/race:merge-or-give-up#0/b:landed/turn:merge#0"] = Result{Value: map[string]any{"status": "done", "at": 40.0}, EndedAt: 40}
	live.answers["/race:merge-or-give-up#0/b:stalled/sleep:merge-timeout#0"] = Result{EndedAt: 7200}
	if err := run(t, string(src), live); err != nil {
		t.Fatal(err)
	}
	if got, want := joinLogs(live), "|issue 42 merged c0ffee 2/2"; got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
	for _, k := range []string{"/spawn:worker#0", "/notify#0", "/fanOut:reviews#0/b:left/spawn:reviewer#0", "/fanOut:reviews#0/b:right/turn:review#0", "/spawn:merger#0"} {
		if !slices.Contains(live.keys(), k) {
			t.Errorf("no step %s among %v", k, live.keys())
		}
	}
	replay := newFake()
	replay.recorded = live.recorded
	if err := run(t, string(src), replay); err != nil {
		t.Fatal(err)
	}
	if replay.performed != 0 || joinLogs(replay) != joinLogs(live) {
		t.Errorf("replay performed %d effects and logged %q", replay.performed, joinLogs(replay))
	}
}
