// An outside A2A caller on the official JavaScript SDK (@a2a-js/sdk): it resolves the
// agent card at argv[3] (v0.3, through the SDK's legacy compatibility), sends one
// message, streams another, and prints what it saw as one JSON line per step.
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [sdkDir, base] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(sdkDir, 'dist', 'client', 'index.js')).href);
const { TaskState } = await import(pathToFileURL(path.join(sdkDir, 'dist', 'index.js')).href);
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, DefaultAgentCardResolver } = sdk;

const legacy = { legacyCompat: { enabled: true } };
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory(legacy)],
  cardResolver: new DefaultAgentCardResolver(legacy),
}));
const client = await factory.createFromUrl(base);

const msg = (text) => ({
  messageId: crypto.randomUUID(), contextId: '', taskId: '', role: 1,
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
  metadata: undefined, extensions: [], referenceTaskIds: [],
});
const texts = (parts) => (parts || []).map((p) => p.content?.$case === 'text' ? p.content.value : '').join('|');
const state = (s) => TaskState[s] ?? String(s);

const sent = await client.sendMessage({ tenant: '', message: msg('send: hello'), configuration: undefined, metadata: undefined });
console.log(JSON.stringify({ step: 'send', id: sent.id, state: state(sent.status?.state),
  artifact: texts(sent.artifacts?.[0]?.parts) }));

const events = [];
let last = '';
for await (const ev of client.sendMessageStream({ tenant: '', message: msg('stream: hello'), configuration: undefined, metadata: undefined })) {
  const c = ev.payload?.$case;
  events.push(c);
  // A task that settled before the stream opened comes as one task event, final itself.
  if (c === 'task') {
    last = state(ev.payload.value.status?.state);
    for (const a of ev.payload.value.artifacts || []) events.push('artifact:' + texts(a.parts));
  }
  if (c === 'statusUpdate') last = state(ev.payload.value.status?.state);
  if (c === 'artifactUpdate') events.push('artifact:' + texts(ev.payload.value.artifact?.parts));
}
console.log(JSON.stringify({ step: 'stream', events, last }));

const got = await client.getTask({ tenant: '', id: sent.id, historyLength: undefined });
console.log(JSON.stringify({ step: 'get', state: state(got.status?.state) }));
