// Drives agents served by `plait serve` with the npm SDK of the Agent Protocol, as a chat
// front end does: the calls useStream makes (threads, a streamed run in the values and
// messages-tuple modes, a thread's state and history), a run waited for, an interrupt
// resumed with a command, and the store. Prints one JSON object per step on stdout; the
// test (tests/protocols/agent_protocol/test_js_client.py) checks them.
//
//   PLAIT_URL=http://127.0.0.1:8000 PLAIT_KEY=key-ann node drive.mjs
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.PLAIT_URL, apiKey: process.env.PLAIT_KEY });
const say = (step, data) => console.log(JSON.stringify({ step, ...data }));
const ask = (text) => ({ messages: [{ type: "human", content: text }] });

const assistants = await client.assistants.search({ limit: 10 });
say("assistants", { graphs: assistants.map((a) => a.graph_id).sort() });

const thread = await client.threads.create({ metadata: { from: "node" } });
say("thread", { status: thread.status, metadata: thread.metadata });

const events = [];
let values = null;
const nodes = new Set();
for await (const part of client.runs.stream(thread.thread_id, "Router", {
  input: ask("What is the weather like in Tokyo?"),
  streamMode: ["values", "messages-tuple"],
})) {
  events.push(part.event);
  if (part.event === "values") values = part.data;
  if (part.event === "messages") nodes.add(part.data[1].langgraph_node);
}
say("stream", {
  first: events[0],
  last: events.at(-1),
  modes: [...new Set(events)].sort(),
  question: values.messages[0].content,
  answer: values.messages.at(-1).content,
  nodes: [...nodes].sort(),
});

const state = await client.threads.getState(thread.thread_id);
const history = await client.threads.getHistory(thread.thread_id, { limit: 5 });
say("state", {
  messages: state.values.messages.length,
  next: state.next,
  history: history.length,
  same: history[0].checkpoint.checkpoint_id === state.checkpoint.checkpoint_id,
});

const waited = await client.runs.wait(thread.thread_id, "Router", {
  input: ask("Calculate 156 * 789 + 234"),
});
say("wait", {
  answer: waited.messages.at(-1).content,
  questions: waited.messages.filter((m) => m.type === "human").length,
});

const asking = await client.threads.create();
const paused = await client.runs.wait(asking.thread_id, "asker", { input: ask("pay it") });
const pending = paused.__interrupt__;
say("paused", {
  question: pending[0].value.question,
  status: (await client.threads.get(asking.thread_id)).status,
});
const resumed = await client.runs.wait(asking.thread_id, "asker", {
  command: { resume: "yes" },
});
say("resumed", {
  tool: resumed.messages.find((m) => m.type === "tool").content,
  last: resumed.messages.at(-1).content,
  status: (await client.threads.get(asking.thread_id)).status,
});
let again = null;
try {
  await client.runs.wait(asking.thread_id, "asker", {
    command: { resume: { [pending[0].id]: "again" } },
  });
} catch (error) {
  again = error.status ?? String(error);
}
say("resumed again", { refused: again });

await client.store.putItem(["notes", "node"], "first", { text: "from node" });
const item = await client.store.getItem(["notes", "node"], "first");
say("store", { value: item.value, namespace: item.namespace, key: item.key });
