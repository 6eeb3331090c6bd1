// An editor for tests/acp.rs: starts `pod acp` and drives it with the
// official ACP TypeScript SDK, as Zed or a JetBrains IDE would.
//
// `node editor.mjs SCENARIO`; the environment says where things are:
// POD_BIN (the built pod), POD_DATA_DIR and POD_SOCKET (inherited by every
// pod command it runs), WORKSPACE (the session's cwd), SCRIPT (the script
// provider's file). It prints one JSON line per fact the Rust test checks,
// and exits 1 with the reason on stderr when the agent misbehaves.

import { spawn, execFile } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { promisify } from "node:util";
const env = process.env;
const scenario = process.argv[2];
// Child sessions are in ACP's unstable schema only: the SDK's `unstable`
// entry is the one that reads `subagent_update`. Both entries speak v1.
const { client, methods, ndJsonStream } = await import(
  scenario === "children" ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk"
);
const run = promisify(execFile);

/** Prints one fact for the Rust side. */
function fact(name, value) {
  process.stdout.write(JSON.stringify({ [name]: value }) + "\n");
}

function expect(ok, what, got) {
  if (!ok) throw new Error(`${what}; got ${JSON.stringify(got)}`);
}

/** A `pod` command against the same pod, as a user in another terminal. */
function pod(...args) {
  return run(env.POD_BIN, args, { cwd: env.WORKSPACE, env });
}

/** Waits until `cond()` holds, on every update received. */
function waiter() {
  const waiting = [];
  return {
    check() {
      for (const w of [...waiting]) {
        if (w.cond()) {
          waiting.splice(waiting.indexOf(w), 1);
          w.resolve();
        }
      }
    },
    until(what, cond, ms = 20000) {
      if (cond()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
        waiting.push({ cond, resolve: () => { clearTimeout(timer); resolve(); } });
      });
    },
  };
}

// The `serve` flags for the pod `pod acp` starts: after `acp`, as an
// editor's `args` list has them; before it in one scenario, as for `pod send`.
const flags = ["--provider", "script", "--script", env.SCRIPT, "--approval", "ask"];
const agentProcess = spawn(
  env.POD_BIN,
  scenario === "stream" ? [...flags, "acp"] : ["acp", ...flags],
  { cwd: env.WORKSPACE, env, stdio: ["pipe", "pipe", "inherit"] },
);
const exited = new Promise((resolve) => agentProcess.on("exit", (code, signal) => resolve({ code, signal })));

const updates = [];
const permissions = [];
const wait = waiter();
// How the editor answers each permission request, in order; "never" leaves it open.
const answers = (env.ANSWERS ?? "").split(",").filter(Boolean);

const editor = client({ name: "test-editor" })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params);
    wait.check();
  })
  .onRequest(methods.client.session.requestPermission, ({ params, signal }) => {
    const asked = { params, withdrawn: false };
    permissions.push(asked);
    wait.check();
    const answer = answers.shift() ?? "never";
    if (answer === "never") {
      return new Promise((_resolve, reject) => {
        signal.addEventListener("abort", () => {
          asked.withdrawn = true;
          wait.check();
          reject(signal.reason);
        });
      });
    }
    return { outcome: { outcome: "selected", optionId: answer } };
  });

const stream = ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout));

/** The text of the updates of one kind since `from`. */
function text(kind, from = 0) {
  return updates
    .slice(from)
    .filter((u) => u.update.sessionUpdate === kind)
    .map((u) => u.update.content.text)
    .join("");
}

function toolUpdates(id) {
  return updates.filter((u) => u.update.toolCallId === id).map((u) => u.update);
}

async function start(agent) {
  await initialize(agent);
  const session = await agent.request(methods.agent.session.new, { cwd: env.WORKSPACE, mcpServers: [] });
  fact("session", session.sessionId);
  fact("modes", session.modes);
  fact("meta", session._meta);
  return session.sessionId;
}

async function initialize(agent) {
  const init = await agent.request(methods.agent.initialize, {
    protocolVersion: 1,
    // SUBAGENTS=1: the editor shows child sessions.
    clientCapabilities: env.SUBAGENTS === "1" ? { subagents: {} } : {},
    clientInfo: { name: "test-editor", version: "1" },
  });
  expect(init.protocolVersion === 1, "protocol version 1", init);
  expect(init.agentCapabilities.loadSession === true, "loadSession", init);
  expect(init.agentCapabilities.promptCapabilities?.image === true, "images", init);
  expect(init.agentCapabilities.promptCapabilities?.embeddedContext === true, "embedded context", init);
}

function prompt(agent, sessionId, textOrBlocks) {
  const blocks = typeof textOrBlocks === "string" ? [{ type: "text", text: textOrBlocks }] : textOrBlocks;
  return agent.request(methods.agent.session.prompt, { sessionId, prompt: blocks });
}

const scenarios = {
  // initialize, a new session, a prompt answered as it streams.
  async stream(agent) {
    const sessionId = await start(agent);
    const answer = await prompt(agent, sessionId, "say hello");
    fact("stopReason", answer.stopReason);
    fact("chunks", updates.filter((u) => u.update.sessionUpdate === "agent_message_chunk").length);
    fact("text", text("agent_message_chunk"));
    fact("echoed", text("user_message_chunk"));
  },

  // Two tool calls: the first allowed, the second denied, from the editor.
  async permissions(agent) {
    const sessionId = await start(agent);
    for (const call of ["c1", "c2"]) {
      const answer = await prompt(agent, sessionId, `run ${call}`);
      fact(`${call}.stopReason`, answer.stopReason);
      fact(`${call}.updates`, toolUpdates(call));
    }
    fact("asked", permissions.map((p) => ({ id: p.params.toolCall.toolCallId, options: p.params.options.map((o) => o.optionId) })));
  },

  // A cancel while the answer streams.
  async cancel(agent) {
    const sessionId = await start(agent);
    const answer = prompt(agent, sessionId, "talk slowly");
    await wait.until("the first chunk", () => text("agent_message_chunk").length > 0);
    await agent.notify(methods.agent.session.cancel, { sessionId });
    fact("stopReason", (await answer).stopReason);
  },

  // A session, then a new one, then the first loaded again: its history
  // is replayed before session/load answers.
  async load(agent) {
    const first = await start(agent);
    await prompt(agent, first, "remember the word apricot");
    const second = await agent.request(methods.agent.session.new, { cwd: env.WORKSPACE, mcpServers: [] });
    fact("second", second.sessionId);
    const before = updates.length;
    const loaded = await agent.request(methods.agent.session.load, {
      sessionId: first, cwd: env.WORKSPACE, mcpServers: [],
    });
    const replayed = updates.slice(before);
    fact("loadedModes", loaded.modes?.currentModeId);
    fact("replayedSessions", [...new Set(replayed.map((u) => u.sessionId))]);
    fact("replayedUser", text("user_message_chunk", before));
    fact("replayedAgent", text("agent_message_chunk", before));
  },

  // A session written beforehand (LOAD: its id) loaded: every update of
  // its history before the answer. FIRST=1: a new session first, so the
  // pod switches to LOAD and `pod acp` asks for its entries; else the load
  // is the first call, answered from the snapshot `pod acp` connects with.
  async replay(agent) {
    if (env.FIRST === "1") await start(agent);
    else await initialize(agent);
    const before = updates.length;
    const loaded = await agent.request(methods.agent.session.load, {
      sessionId: env.LOAD, cwd: env.WORKSPACE, mcpServers: [],
    });
    fact("loadedModes", loaded.modes?.currentModeId);
    fact("replayed", updates.slice(before).map((u) => ({ on: u.sessionId, ...u.update })));
  },

  // A turn that spawns a child pod. An editor that declared subagents
  // sees the child announced and its session's updates; one that did not
  // sees the parent's session only.
  async children(agent) {
    const sessionId = await start(agent);
    const answer = await prompt(agent, sessionId, "delegate");
    fact("stopReason", answer.stopReason);
    const announced = () => updates.filter((u) => u.update.sessionUpdate === "subagent_update");
    const child = () => announced()[0]?.update.sessionId;
    const of = (session, kind) => updates
      .filter((u) => u.sessionId === session && u.update.sessionUpdate === kind)
      .map((u) => u.update.content.text)
      .join("");
    if (env.SUBAGENTS === "1") {
      await wait.until("the child's answer", () => of(child(), "agent_message_chunk").length > 0);
    }
    fact("announced", announced().map((u) => ({ on: u.sessionId, ...u.update })));
    fact("childUser", of(child(), "user_message_chunk"));
    fact("childText", of(child(), "agent_message_chunk"));
    fact("parentText", of(sessionId, "agent_message_chunk"));
    fact("sessions", [...new Set(updates.map((u) => u.sessionId))]);
  },

  // The editor leaves the request open; `pod approve` answers it: the
  // editor's request is withdrawn and the turn goes on.
  async elsewhere(agent) {
    const sessionId = await start(agent);
    const answer = prompt(agent, sessionId, "run c1");
    await wait.until("the permission request", () => permissions.length > 0);
    await pod("approve");
    fact("stopReason", (await answer).stopReason);
    await wait.until("the withdrawal", () => permissions[0].withdrawn, 5000).catch(() => {});
    fact("withdrawn", permissions[0].withdrawn);
    fact("c1.updates", toolUpdates("c1"));
  },

  // Input another client sent (`pod send`) reaches the editor.
  async others(agent) {
    await start(agent);
    await pod("send", "typed in the terminal");
    await wait.until("the other client's turn", () => text("agent_message_chunk").includes("seen"));
    fact("echoed", text("user_message_chunk"));
    fact("text", text("agent_message_chunk"));
  },

  // The pod dies mid-turn: the prompt fails naming it, and `pod acp` ends.
  async dies(agent) {
    const sessionId = await start(agent);
    const answer = prompt(agent, sessionId, "talk slowly");
    await wait.until("the first chunk", () => text("agent_message_chunk").length > 0);
    const { stdout } = await pod("status", "--json");
    closing = true;
    process.kill(JSON.parse(stdout).greeting.pid, "SIGKILL");
    const error = await answer.then(() => null, (e) => e);
    fact("error", { code: error?.code, message: error?.message, data: error?.data });
    fact("exit", await exited);
  },

  // The editor closes stdin mid-turn: `pod acp` ends, the turn goes on.
  async closes(agent) {
    const sessionId = await start(agent);
    prompt(agent, sessionId, "talk slowly").catch(() => {});
    await wait.until("the first chunk", () => text("agent_message_chunk").length > 0);
    closing = true;
    agentProcess.stdin.end();
    fact("exit", await exited);
  },
};

// Set once the scenario has run to its end, or has made the agent exit on
// purpose: the connection closing then is no failure.
let finished = false;
let closing = false;
try {
  await editor.connectWith(stream, async (agent) => {
    await scenarios[scenario](agent);
    finished = true;
  });
} catch (error) {
  if (finished || closing) {
    fact("exit", await exited);
    process.exit(0);
  }
  console.error(`editor: ${scenario}: ${error?.stack ?? error}`);
  agentProcess.kill();
  process.exit(1);
}
agentProcess.stdin.end();
fact("exit", await exited);
