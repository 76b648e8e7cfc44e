// Drives cotal mcp's team tools with the official TypeScript MCP SDK client: two agents
// (alice, bob) thread five replies, wait, search, peek and ack, and a long cotal_wait
// outlives the client's own request timeout on progress notifications. argv: the SDK
// folder. Prints one JSON line: {failures: [...], progress: n}.
const path = require("node:path");
const sdk = process.argv[2];
const { Client } = require(path.join(sdk, "dist/cjs/client/index.js"));
const { StdioClientTransport } = require(path.join(sdk, "dist/cjs/client/stdio.js"));

async function agent(name) {
  const transport = new StdioClientTransport({
    command: "cotal",
    args: ["mcp", "--name", name, "--channel", "general"],
    env: process.env,
    stderr: "inherit",
  });
  const client = new Client({ name: "team-" + name, version: "1" });
  await client.connect(transport);
  return client;
}

const failures = [];
function check(ok, what) {
  if (!ok) failures.push(what);
}

async function call(client, name, args, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  if (res.isError) throw new Error(name + ": " + text);
  return { text, out: res.structuredContent || {} };
}

async function main() {
  const alice = await agent("alice");
  const bob = await agent("bob");
  await call(bob, "cotal_orientation", {});

  const root = await call(alice, "cotal_send", { text: "plan: ship on friday?" });
  const rootId = root.out.id;
  const got = await call(bob, "cotal_wait", { timeout: 60, kinds: ["channel"], from: ["alice"] });
  check(got.text.includes('id="' + rootId + '"'), "bob's wait shows the root with its id: " + got.text);

  const replies = [];
  for (let i = 1; i <= 5; i++) {
    const r = await call(bob, "cotal_send", { text: "reply " + i + (i === 3 ? " zebra" : ""), replyTo: rootId });
    replies.push(r.out.id);
  }
  let seen = "";
  for (let i = 0; i < 10 && (seen.match(/reply \d/g) || []).length < 5; i++) {
    seen += (await call(alice, "cotal_wait", { timeout: 30, kinds: ["channel"] })).text;
  }
  check(seen.includes('replyTo="' + rootId + '"'), "alice's inbox text shows replyTo: " + seen);

  const thread = await call(alice, "cotal_thread", { id: replies[2] });
  const ids = (thread.out.messages || []).map((m) => m.id);
  check(JSON.stringify(ids) === JSON.stringify([rootId, ...replies]), "thread order " + JSON.stringify(ids));

  const found = await call(alice, "cotal_search", { query: "zebra" });
  check(found.out.total === 1 && found.out.matches[0].id === replies[2], "search zebra: " + found.text);

  // A wait longer than the client's request timeout returns on time: each progress
  // notification resets the client's timer.
  let progress = 0;
  const idle = await call(alice, "cotal_wait", { timeout: 8 }, {
    timeout: 6000,
    resetTimeoutOnProgress: true,
    onprogress: () => { progress++; },
  });
  check(idle.out.timedOut === true, "the idle wait timed out: " + idle.text);

  await call(bob, "cotal_dm", { to: "alice", text: "ack me please" });
  let peek;
  for (let i = 0; i < 50; i++) {
    peek = await call(alice, "cotal_inbox", { peek: true });
    if (peek.text.includes("ack me please")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const dmId = (peek.out.messages || []).find((m) => m.text === "ack me please");
  check(!!dmId, "peek shows the DM: " + peek.text);
  if (dmId) {
    const acked = await call(alice, "cotal_ack", { ids: [dmId.id] });
    check(acked.out.settled.length === 1, "ack settles the DM: " + acked.text);
    const after = await call(alice, "cotal_inbox", {});
    check(!after.text.includes("ack me please"), "an acked DM is not shown again: " + after.text);
  }
  console.log(JSON.stringify({ failures, progress }));
  await alice.close();
  await bob.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
