import assert from "node:assert/strict";
import { test } from "node:test";
import { flatten, resolveServerCommand, serverSettings } from "../src/configuration";

const nothing = { which: () => undefined, exists: () => false };
const onPath = (names: Record<string, string>) => ({ which: (name: string) => names[name], exists: () => true });

test("margin.server.command wins and is split into program and arguments", () => {
  const launch = resolveServerCommand({ command: ["/venv/bin/margin", "serve"], pythonPath: "/usr/bin/python3" }, onPath({ margin: "/x/margin" }));
  assert.deepEqual(launch, { command: "/venv/bin/margin", args: ["serve"], source: "margin.server.command" });
});

test("a server command whose program path does not exist is a clear error, not a spawn failure", () => {
  const launch = resolveServerCommand({ command: ["/gone/bin/margin", "serve"], pythonPath: "" }, nothing);
  assert.ok("error" in launch);
  assert.match(launch.error, /\/gone\/bin\/margin, which does not exist/);
  assert.match(launch.error, /pip install margin/);
});

test("a bare program name in margin.server.command is left to PATH", () => {
  const launch = resolveServerCommand({ command: ["margin", "serve"], pythonPath: "" }, nothing);
  assert.deepEqual(launch, { command: "margin", args: ["serve"], source: "margin.server.command" });
});

test("blank entries of margin.server.command do not count", () => {
  const launch = resolveServerCommand({ command: ["  "], pythonPath: "/venv/bin/python" }, onPath({}));
  assert.deepEqual(launch, { command: "/venv/bin/python", args: ["-m", "margin.server"], source: "margin.server.pythonPath" });
});

test("margin.server.pythonPath runs the server as a module", () => {
  const launch = resolveServerCommand({ command: [], pythonPath: " /venv/bin/python " }, onPath({ margin: "/x/margin" }));
  assert.deepEqual(launch, { command: "/venv/bin/python", args: ["-m", "margin.server"], source: "margin.server.pythonPath" });
});

test("a pythonPath that does not exist names the setting and the fix", () => {
  const launch = resolveServerCommand({ command: [], pythonPath: "/nowhere/python" }, nothing);
  assert.ok("error" in launch);
  assert.match(launch.error, /margin\.server\.pythonPath is \/nowhere\/python/);
});

test("without settings the margin console script on PATH is used, then python3, then python", () => {
  assert.deepEqual(resolveServerCommand({ command: [], pythonPath: "" }, onPath({ margin: "/bin/margin", python3: "/bin/python3" })), {
    command: "/bin/margin",
    args: ["serve"],
    source: "the margin command on PATH",
  });
  assert.deepEqual(resolveServerCommand({ command: [], pythonPath: "" }, onPath({ python: "/bin/python" })), {
    command: "/bin/python",
    args: ["-m", "margin.server"],
    source: "python on PATH",
  });
});

test("with nothing to run the message says how to install margin", () => {
  const launch = resolveServerCommand({ command: [], pythonPath: "" }, nothing);
  assert.ok("error" in launch);
  assert.match(launch.error, /No margin command and no Python found on PATH/);
  assert.match(launch.error, /margin\.server\.pythonPath/);
});

test("server settings are nested, keep object values whole and leave out the extension's own settings", () => {
  const section = {
    readability: { threshold: 16, enabled: true },
    "review.mode": "fast",
    llm: { roles: { reader: { model: "small" } }, endpoint: "http://localhost:8000/v1", model: null },
    server: { command: ["margin", "serve"], pythonPath: "/venv/bin/python" },
  };
  assert.deepEqual(serverSettings(section), {
    readability: { threshold: 16, enabled: true },
    review: { mode: "fast" },
    llm: { roles: { reader: { model: "small" } }, endpoint: "http://localhost:8000/v1" },
  });
});

test("flatten turns nested and dotted keys into the same dotted keys", () => {
  assert.deepEqual(flatten({ a: { b: 1 }, "c.d": 2, llm: { roles: { x: {} } } }), { "a.b": 1, "c.d": 2, "llm.roles": { x: {} } });
});
