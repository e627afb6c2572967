import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { EDITOR, SERVER } from "../src/commands";
import { type Client, MarginExtension } from "../src/extension";
import { State } from "./languageclient-stub";
import * as vscode from "./vscode-stub";

class FakeClient implements Client {
  state: State = State.Stopped;
  requests: { method: string; params: unknown }[] = [];
  listeners: ((event: { newState: State }) => void)[] = [];
  starts = 0;
  stops = 0;
  constructor(
    readonly launch: { command: string; args: string[] },
    readonly options: Record<string, unknown>,
    private readonly failToStart = false,
  ) {}
  async start(): Promise<void> {
    this.starts += 1;
    if (this.failToStart) {
      throw new Error("spawn ENOENT");
    }
    this.state = State.Running;
  }
  async stop(): Promise<void> {
    this.stops += 1;
    this.state = State.Stopped;
  }
  async restart(): Promise<void> {}
  async sendRequest(method: string, params: unknown): Promise<unknown> {
    this.requests.push({ method, params });
    const call = params as { command: string };
    if (call.command === SERVER.status) {
      return { endpoint: "auto", endpoints: [{ url: "http://127.0.0.1:8000/v1", model: "m", mode: null }], reviews: 0, rewrites: 1 };
    }
    return { status: "written", path: "/papers/main-lay-article.md" };
  }
  onDidChangeState(listener: (event: { newState: State }) => void) {
    this.listeners.push(listener);
    return new vscode.Disposable();
  }
}

function context() {
  return { subscriptions: [] as { dispose(): void }[] };
}

let clients: FakeClient[] = [];

async function started(configuration: Record<string, unknown>, failToStart = false) {
  vscode.recorded.configuration = configuration;
  const owner = context();
  const extension = new MarginExtension(owner as never, (launch, options) => {
    const client = new FakeClient(launch, options as Record<string, unknown>, failToStart);
    clients.push(client);
    return client;
  });
  await extension.activate();
  return { extension, owner };
}

beforeEach(() => {
  vscode.reset();
  clients = [];
});

test("activation starts the server from the settings and forwards the server's settings only", async () => {
  const { extension } = await started({
    margin: { server: { pythonPath: process.execPath }, readability: { threshold: 12 }, llm: { roles: { reader: { model: "s" } } } },
  });
  assert.equal(clients.length, 1);
  assert.deepEqual(clients[0].launch, { command: process.execPath, args: ["-m", "margin.server"], source: "margin.server.pythonPath" });
  assert.deepEqual(clients[0].options.initializationOptions, {
    margin: { readability: { threshold: 12 }, llm: { roles: { reader: { model: "s" } } } },
    enforcesSettingScopes: true,
  });
  assert.deepEqual(clients[0].options.synchronize, { configurationSection: "margin" });
  const languages = (clients[0].options.documentSelector as { language: string }[]).map((item) => item.language);
  assert.deepEqual([...new Set(languages)].sort(), ["latex", "markdown", "tex"]);
  await extension.deactivate();
});

test("every editor command is registered under its own id, apart from the server's", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } });
  assert.deepEqual([...vscode.recorded.commands.keys()].sort(), Object.values(EDITOR).sort());
  for (const id of vscode.recorded.commands.keys()) {
    assert.ok(!Object.values(SERVER).includes(id as never), id);
  }
  await extension.deactivate();
});

test("simplify paragraph sends the server command with the document and the cursor", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } });
  vscode.window.activeTextEditor = {
    document: { uri: { toString: () => "file:///papers/main.tex" } },
    selection: { active: { line: 7, character: 3 } },
  };
  await vscode.recorded.commands.get(EDITOR.simplifyParagraph)?.();
  const sent = clients[0].requests.filter((request) => (request.params as { command: string }).command !== SERVER.status);
  assert.deepEqual(sent, [
    { method: "workspace/executeCommand", params: { command: SERVER.simplifyParagraph, arguments: ["file:///papers/main.tex", 7, 3] } },
  ]);
  await extension.deactivate();
});

test("generate lay article reports where the article was written", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } });
  vscode.window.activeTextEditor = {
    document: { uri: { toString: () => "file:///papers/main.tex" } },
    selection: { active: { line: 0, character: 0 } },
  };
  await vscode.recorded.commands.get(EDITOR.generateLayArticle)?.();
  assert.ok(vscode.recorded.messages.some((m) => m.text === "margin: lay article written to /papers/main-lay-article.md"));
  await extension.deactivate();
});

test("a command without an open document asks for one and sends nothing", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } });
  await vscode.recorded.commands.get(EDITOR.reviewDocument)?.();
  assert.ok(vscode.recorded.messages.some((m) => m.kind === "info" && /open a LaTeX or Markdown document/.test(m.text)));
  assert.ok(clients[0].requests.every((request) => (request.params as { command: string }).command === SERVER.status));
  await extension.deactivate();
});

test("the status item shows the endpoint in use and the running work, from margin.status", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } });
  await new Promise((resolve) => setImmediate(resolve));
  const [item] = vscode.recorded.statusItems;
  assert.equal(item.shown, true);
  assert.equal(item.command, EDITOR.showLog);
  assert.equal(item.text, "$(sync~spin) margin: 1 running");
  assert.match(item.tooltip, /127\.0\.0\.1:8000/);
  await extension.deactivate();
});

test("a missing server is a clear error with the fix, and the status item says it failed", async () => {
  const { extension } = await started({ margin: { server: { pythonPath: "/no/such/python" } } });
  assert.equal(clients.length, 0);
  const [error] = vscode.recorded.messages;
  assert.equal(error.kind, "error");
  assert.match(error.text, /margin\.server\.pythonPath is \/no\/such\/python, which does not exist/);
  assert.deepEqual(error.actions, ["Open Settings", "Show Log"]);
  assert.equal(vscode.recorded.statusItems[0].text, "$(error) margin");
  await extension.deactivate();
});

test("a server that fails to start is reported with the command it ran", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } }, true);
  const [error] = vscode.recorded.messages;
  assert.match(error.text, /spawn ENOENT\. Is margin installed for margin\?/);
  await extension.deactivate();
});

test("restart stops the running server and starts a new one", async () => {
  const { extension } = await started({ margin: { server: { command: ["margin", "serve"] } } });
  await vscode.recorded.commands.get(EDITOR.restartServer)?.();
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stops, 1);
  assert.equal(clients[1].state, State.Running);
  await extension.deactivate();
});
