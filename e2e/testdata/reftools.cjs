// Calls cotal mcp's tools with the official TypeScript MCP SDK client, as an agent
// written for the reference calls them. argv: the SDK folder, then a JSON list of
// [tool, args] pairs. Prints one JSON line per call: {tool, isError, text}.
const path = require("node:path");
const sdk = process.argv[2];
const { Client } = require(path.join(sdk, "dist/cjs/client/index.js"));
const { StdioClientTransport } = require(path.join(sdk, "dist/cjs/client/stdio.js"));

async function main() {
  const calls = JSON.parse(process.argv[3]);
  const transport = new StdioClientTransport({
    command: "cotal",
    args: ["mcp", "--name", "alice", "--channel", "general"],
    env: process.env,
    stderr: "inherit",
  });
  const client = new Client({ name: "reference-caller", version: "1" });
  await client.connect(transport);
  const listed = await client.listTools();
  console.log(JSON.stringify({ tool: "tools/list", isError: false, text: listed.tools.map((t) => t.name).join(",") }));
  for (const [tool, args] of calls) {
    try {
      const res = await client.callTool({ name: tool, arguments: args });
      const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
      console.log(JSON.stringify({ tool, isError: !!res.isError, text }));
    } catch (e) {
      console.log(JSON.stringify({ tool, isError: true, text: String(e && e.message) }));
    }
  }
  await client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
