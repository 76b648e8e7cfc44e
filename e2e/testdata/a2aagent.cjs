// An external A2A agent served by the official JavaScript SDK (@a2a-js/sdk), with its
// v0.3 compatibility on (the card and JSON-RPC as a v0.3 client reads them), on a free
// loopback port. argv: the node_modules folder holding @a2a-js/sdk and express. Prints
// one JSON line {"url": ...} once it listens.
//
// Its executor: a message holding "book" asks back which day (input-required); the answer
// to that completes the task with "booked for <answer>"; anything else works a moment and
// completes with the artifact "echo: <text>".
const path = require("node:path");
const nm = process.argv[2];
const sdk = require(path.join(nm, "@a2a-js/sdk/dist/index.cjs"));
const server = require(path.join(nm, "@a2a-js/sdk/dist/server/index.cjs"));
const exp = require(path.join(nm, "@a2a-js/sdk/dist/server/express/index.cjs"));
const express = require(path.join(nm, "express"));
const { randomUUID } = require("node:crypto");

const { TaskState, Role, AGENT_CARD_PATH, A2A_PROTOCOL_VERSION } = sdk;
const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } = server;

function textOf(message) {
  const p = (message.parts || []).find((x) => x.content && x.content.$case === "text");
  return p ? p.content.value : "";
}

function agentMessage(taskId, contextId, text) {
  return {
    role: Role.ROLE_AGENT, messageId: randomUUID(), taskId, contextId, extensions: [], metadata: {}, referenceTaskIds: [],
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
  };
}

function status(taskId, contextId, state, message) {
  return AgentEvent.statusUpdate({ taskId, contextId, metadata: {}, status: { state, message, timestamp: new Date().toISOString() } });
}

class Executor {
  cancelTask = async () => {};

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage, task } = ctx;
    const text = textOf(userMessage);
    if (!task) {
      bus.publish(AgentEvent.task({ id: taskId, contextId, artifacts: [], history: [userMessage], metadata: {},
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined } }));
    }
    if (task && task.status && task.status.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, agentMessage(taskId, contextId, "booked for " + text)));
      bus.finished();
      return;
    }
    if (text.includes("book")) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(taskId, contextId, "which day?")));
      bus.finished();
      return;
    }
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, undefined));
    await new Promise((r) => setTimeout(r, 300));
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, lastChunk: true, append: false, metadata: undefined,
      artifact: { artifactId: randomUUID(), name: "echo", description: "", metadata: undefined, extensions: [],
        parts: [{ content: { $case: "text", value: "echo: " + text }, metadata: undefined, filename: "", mediaType: "text/plain" }] } }));
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, undefined));
    bus.finished();
  }
}

const app = express();
const listener = app.listen(0, "127.0.0.1", () => {
  const base = "http://127.0.0.1:" + listener.address().port;
  const card = {
    name: "JS SDK agent", description: "An agent of the official JavaScript SDK", version: "0.0.1",
    supportedInterfaces: [
      { url: base + "/a2a/jsonrpc", protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION },
      { url: base + "/a2a/jsonrpc", protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" },
    ],
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text"], defaultOutputModes: ["text"],
    skills: [
      { id: "echo", name: "Echo", description: "says it back", tags: ["text"], examples: [], inputModes: ["text"], outputModes: ["text"], securityRequirements: [] },
      { id: "book", name: "Book a room", description: "asks which day", tags: ["rooms"], examples: [], inputModes: ["text"], outputModes: ["text"], securityRequirements: [] },
    ],
    documentationUrl: "", signatures: [],
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
  app.use("/" + AGENT_CARD_PATH, exp.agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: true } }));
  app.use("/a2a/jsonrpc", exp.jsonRpcHandler({ requestHandler: handler, userBuilder: exp.UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  console.log(JSON.stringify({ url: base }));
});
process.on("SIGTERM", () => listener.close(() => process.exit(0)));
