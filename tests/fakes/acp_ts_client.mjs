// An ACP client on the reference TypeScript SDK (@agentclientprotocol/sdk), driving a spawned `codling acp`.
//
// Usage: node acp_ts_client.mjs RESULT.json TRAFFIC.jsonl COMMAND PROJECT PROMPT...
// (COMMAND: the JSON array that starts `codling acp`, e.g. ["python", "-m", "codling", "acp"])
// It offers files (an unsaved buffer for notes.txt) and terminals (real processes), answers permission
// requests from ACP_ANSWERS (comma-separated option ids, in order), sends each prompt in turn (switching the
// session's "thinking" option off, as a boolean, before the second one if it has one), and writes what
// it saw to RESULT.json; every JSON-RPC message in either direction goes to TRAFFIC.jsonl as
// {"from": "client"|"agent", "message": ...}. Then it sends the prompts of ACP_QUEUED (comma-separated) all at
// once, without waiting for answers, as a user typing while the agent works would.
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [resultPath, trafficPath, agentCommand, project, ...prompts] = process.argv.slice(2);
const [program, ...programArgs] = JSON.parse(agentCommand); // the command that starts `codling acp`
const answers = (process.env.ACP_ANSWERS || "").split(",").filter(Boolean);
const buffers = new Map([[`${project}/notes.txt`, "unsaved text in the editor\n"]]);
const queued = (process.env.ACP_QUEUED || "").split(",").filter(Boolean);
const seen = { updates: [], permissions: [], fs: [], terminals: [], stops: [], errors: [], queued: [] };
const terminals = new Map();

function log(from, bytes) {
  for (const line of bytes.toString("utf8").split("\n")) {
    if (line.trim()) appendFileSync(trafficPath, JSON.stringify({ from, message: JSON.parse(line) }) + "\n");
  }
}

const agent = spawn(program, programArgs, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
let pending = "";
agent.stdout.on("data", (chunk) => {
  pending += chunk.toString("utf8");
  const lines = pending.split("\n");
  pending = lines.pop();
  for (const line of lines) log("agent", Buffer.from(line));
});
const toAgent = Writable.toWeb(agent.stdin);
const logged = new WritableStream({
  async write(chunk) {
    log("client", Buffer.from(chunk));
    const writer = toAgent.getWriter();
    await writer.write(chunk);
    writer.releaseLock();
  },
  async close() {
    await toAgent.close();
  },
});
const stream = ndJsonStream(logged, Readable.toWeb(agent.stdout));

const app = client({ name: "ts-sdk-test-client" })
  .onNotification(methods.client.session.update, async ({ params }) => {
    const u = params.update;
    seen.updates.push({
      kind: u.sessionUpdate,
      id: u.toolCallId ?? null,
      status: u.status ?? null,
      title: u.title ?? null,
      content: (u.content && Array.isArray(u.content) ? u.content : []).map((c) => c.type),
      text: u.sessionUpdate === "agent_message_chunk" ? u.content.text : null,
    });
  })
  .onRequest(methods.client.session.requestPermission, async ({ params }) => {
    const answer = answers.shift() || "reject";
    seen.permissions.push({ id: params.toolCall.toolCallId, title: params.toolCall.title, answer });
    return { outcome: { outcome: "selected", optionId: answer } };
  })
  .onRequest(methods.client.fs.readTextFile, async ({ params }) => {
    seen.fs.push(["read", params.path]);
    return { content: buffers.get(params.path) ?? readFileSync(params.path, "utf8") };
  })
  .onRequest(methods.client.fs.writeTextFile, async ({ params }) => {
    seen.fs.push(["write", params.path]);
    writeFileSync(params.path, params.content);
    buffers.delete(params.path);
    return {};
  })
  .onRequest(methods.client.terminal.create, async ({ params }) => {
    const id = `term-${terminals.size + 1}`;
    const child = spawn(params.command, params.args ?? [], { cwd: params.cwd ?? project });
    const t = { output: "", exit: null };
    t.done = new Promise((resolve) => child.on("exit", (code, signal) => resolve((t.exit = { exitCode: code, signal }))));
    child.stdout.on("data", (d) => (t.output += d));
    child.stderr.on("data", (d) => (t.output += d));
    t.child = child;
    terminals.set(id, t);
    seen.terminals.push(["create", [params.command, ...(params.args ?? [])].join(" ")]);
    return { terminalId: id };
  })
  .onRequest(methods.client.terminal.output, async ({ params }) => {
    const t = terminals.get(params.terminalId);
    return { output: t.output, truncated: false, ...(t.exit ? { exitStatus: t.exit } : {}) };
  })
  .onRequest(methods.client.terminal.waitForExit, async ({ params }) => {
    return await terminals.get(params.terminalId).done;
  })
  .onRequest(methods.client.terminal.kill, async ({ params }) => {
    terminals.get(params.terminalId).child.kill("SIGKILL");
    return {};
  })
  .onRequest(methods.client.terminal.release, async ({ params }) => {
    seen.terminals.push(["release", params.terminalId]);
    return {};
  });

// -- session/delete and logout ---------------------------------------------------------------------------------
// After the scripted session: delete it (twice: the SDK takes -32002, not found, as already deleted), list what is
// left, log out (removing the keys `codling login` stored), then open a session on the environment's key.
async function deleteAndLogOut(ctx, init, sessionId) {
  const capabilities = {
    delete: init.agentCapabilities?.sessionCapabilities?.delete ?? null,
    logout: init.agentCapabilities?.auth?.logout ?? null,
  };
  const deleted = await ctx.request(methods.agent.session.delete, { sessionId });
  const deletedAgain = await ctx.request(methods.agent.session.delete, { sessionId });
  const listed = (await ctx.request(methods.agent.session.list, {})).sessions.map((s) => s.sessionId);
  const loggedOut = await ctx.request(methods.agent.logout, {});
  const after = await ctx.request(methods.agent.session.new, { cwd: project, mcpServers: [] });
  await ctx.request(methods.agent.session.close, { sessionId: after.sessionId });
  return { capabilities, deleted, deletedAgain, listed, loggedOut, sessionAfterLogout: after.sessionId };
}

await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: {
      fs: { readTextFile: true, writeTextFile: true },
      terminal: true,
      session: { configOptions: { boolean: {} } },
    },
    clientInfo: { name: "ts-sdk-test-client", version: "1.0.0" },
  });
  seen.agent = init.agentInfo?.name;
  const session = await ctx.request(methods.agent.session.new, { cwd: project, mcpServers: [] });
  seen.options = session.configOptions;
  await ctx.request(methods.agent.session.setMode, { sessionId: session.sessionId, modeId: "ask" });
  for (const [index, text] of prompts.entries()) {
    if (index === 1 && session.configOptions?.some((o) => o.id === "thinking")) {
      // Between the first and second prompts: thinking off, in the boolean form this client advertised.
      const answer = await ctx.request(methods.agent.session.setConfigOption, {
        sessionId: session.sessionId,
        configId: "thinking",
        type: "boolean",
        value: false,
      });
      seen.thinkingOff = answer.configOptions;
    }
    try {
      const response = await ctx.request(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text }],
      });
      seen.stops.push(response.stopReason);
    } catch (error) {
      seen.errors.push({ code: error.code, message: error.message });
    }
  }
  // Queued prompts: all sent before any is answered; each answers once its own turn has run.
  const answered = await Promise.allSettled(
    queued.map((text) =>
      ctx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text }] }),
    ),
  );
  seen.queued = answered.map((a) => (a.status === "fulfilled" ? a.value.stopReason : `error ${a.reason?.code}`));
  await ctx.request(methods.agent.session.close, { sessionId: session.sessionId });
  seen.deleteAndLogout = await deleteAndLogOut(ctx, init, session.sessionId);
});
agent.stdin.end();
await new Promise((resolve) => agent.on("exit", resolve));
writeFileSync(resultPath, JSON.stringify(seen, null, 1));
