// margin for VS Code: starts margin's language server for LaTeX and Markdown, forwards settings, adds commands
// and a status-bar item. The logic lives in small modules that are tested without VS Code.

import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";
import { LanguageClient, type LanguageClientOptions, type ServerOptions, State } from "vscode-languageclient/node";
import { EDITOR, SERVER, resultMessage, serverCall } from "./commands";
import { INSTALL_HINT, type LaunchProblem, resolveServerCommand, serverSettings, type ServerLaunch } from "./configuration";
import { type ClientState, type ServerStatus, statusView } from "./status";

const SECTION = "margin";
const STATUS_POLL_MS = 5000;
export const DOCUMENTS = [
  { scheme: "file", language: "latex" },
  { scheme: "file", language: "tex" },
  { scheme: "file", language: "markdown" },
  { scheme: "untitled", language: "latex" },
  { scheme: "untitled", language: "markdown" },
];

/** The part of LanguageClient the extension uses (a fake in tests). */
export interface Client {
  start(): Promise<void>;
  stop(): Promise<void>;
  restart(): Promise<void>;
  sendRequest(method: string, params: unknown): Promise<unknown>;
  onDidChangeState(listener: (event: { newState: State }) => void): vscode.Disposable;
  readonly state: State;
}

export type ClientFactory = (launch: ServerLaunch, options: LanguageClientOptions) => Client;

const defaultFactory: ClientFactory = (launch, options) => {
  const server: ServerOptions = { command: launch.command, args: launch.args };
  return new LanguageClient("margin", "margin", server, options) as unknown as Client;
};

const environment = {
  which(name: string): string | undefined {
    const suffixes = process.platform === "win32" ? [".exe", ".cmd", ""] : [""];
    for (const folder of (process.env.PATH ?? "").split(path.delimiter)) {
      for (const suffix of suffixes) {
        const candidate = path.join(folder, name + suffix);
        if (folder && fs.existsSync(candidate)) {
          return candidate;
        }
      }
    }
    return undefined;
  },
  exists: (file: string) => fs.existsSync(file),
};

export class MarginExtension {
  client: Client | undefined;
  private problem: string | undefined;
  private serverStatus: ServerStatus | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  readonly output: vscode.OutputChannel;
  readonly statusItem: vscode.StatusBarItem;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly factory: ClientFactory = defaultFactory,
  ) {
    this.output = vscode.window.createOutputChannel("margin");
    this.statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 0);
    this.statusItem.command = EDITOR.showLog;
    context.subscriptions.push(this.output, this.statusItem);
  }

  async activate(): Promise<void> {
    this.registerCommands();
    this.context.subscriptions.push(
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration(`${SECTION}.server`)) {
          void vscode.window
            .showInformationMessage("margin: restart the server to use the new server command.", "Restart")
            .then((choice) => (choice === "Restart" ? this.restart() : undefined));
        }
      }),
    );
    this.showStatus("starting");
    this.statusItem.show();
    await this.start();
  }

  private launch(): ServerLaunch | LaunchProblem {
    const configuration = vscode.workspace.getConfiguration(SECTION);
    return resolveServerCommand(
      {
        command: configuration.get<string[]>("server.command") ?? [],
        pythonPath: configuration.get<string>("server.pythonPath") ?? "",
      },
      environment,
    );
  }

  async start(): Promise<void> {
    const launch = this.launch();
    if ("error" in launch) {
      this.fail(launch.error);
      return;
    }
    this.output.appendLine(`Starting margin's server: ${launch.command} ${launch.args.join(" ")} (from ${launch.source})`);
    const options: LanguageClientOptions = {
      documentSelector: DOCUMENTS,
      synchronize: { configurationSection: SECTION },
      initializationOptions: {
        [SECTION]: serverSettings(vscode.workspace.getConfiguration().get(SECTION) ?? {}),
        // The user-only settings are application-scoped in package.json, so VS Code never takes a workspace's value
        // for them: the server may then trust what workspace/configuration answers.
        enforcesSettingScopes: true,
      },
      outputChannel: this.output,
    };
    const client = this.factory(launch, options);
    this.client = client;
    this.context.subscriptions.push(
      client.onDidChangeState((event) => {
        this.showStatus(event.newState === State.Running ? "running" : event.newState === State.Starting ? "starting" : "stopped");
      }),
    );
    try {
      await client.start();
    } catch (error) {
      this.fail(`${String(error)}. Is margin installed for ${launch.command}? ${INSTALL_HINT}`);
      return;
    }
    this.showStatus("running");
    this.poll();
  }

  private fail(problem: string): void {
    this.problem = problem;
    this.output.appendLine(`margin's server could not start: ${problem}`);
    this.showStatus("failed");
    void vscode.window
      .showErrorMessage(`margin's server could not start: ${problem}`, "Open Settings", "Show Log")
      .then((choice) => {
        if (choice === "Open Settings") {
          void vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.server`);
        } else if (choice === "Show Log") {
          this.output.show();
        }
      });
  }

  private poll(): void {
    if (this.timer !== undefined) {
      clearInterval(this.timer);
    }
    const refresh = async () => {
      if (this.client === undefined || this.client.state !== State.Running) {
        return;
      }
      try {
        this.serverStatus = (await this.client.sendRequest("workspace/executeCommand", {
          command: SERVER.status,
          arguments: [],
        })) as ServerStatus;
        this.showStatus("running");
      } catch {
        // an older server without margin.status: the item keeps the client's state
      }
    };
    void refresh();
    this.timer = setInterval(() => void refresh(), STATUS_POLL_MS);
    this.context.subscriptions.push({ dispose: () => clearInterval(this.timer) });
  }

  showStatus(state: ClientState): void {
    const view = statusView(state, state === "running" ? this.serverStatus : undefined, this.problem);
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
  }

  async restart(): Promise<void> {
    if (this.client !== undefined) {
      try {
        await this.client.stop();
      } catch (error) {
        this.output.appendLine(`stopping the server: ${String(error)}`);
      }
    }
    this.problem = undefined;
    this.serverStatus = undefined;
    this.showStatus("starting");
    await this.start();
  }

  private registerCommands(): void {
    const forwarded = [
      EDITOR.reviewParagraph,
      EDITOR.reviewDocument,
      EDITOR.simplifyParagraph,
      EDITOR.simplifyDocument,
      EDITOR.generateLayArticle,
    ];
    for (const id of forwarded) {
      this.context.subscriptions.push(vscode.commands.registerCommand(id, () => this.runOnActiveEditor(id)));
    }
    this.context.subscriptions.push(
      vscode.commands.registerCommand(EDITOR.restartServer, () => this.restart()),
      vscode.commands.registerCommand(EDITOR.showLog, () => this.output.show()),
    );
  }

  async runOnActiveEditor(id: string): Promise<unknown> {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined) {
      void vscode.window.showInformationMessage("margin: open a LaTeX or Markdown document first.");
      return undefined;
    }
    if (this.client === undefined || this.client.state !== State.Running) {
      void vscode.window.showWarningMessage("margin's server is not running; see the log.");
      return undefined;
    }
    const cursor = editor.selection.active;
    const call = serverCall(id, { uri: editor.document.uri.toString(), line: cursor.line, character: cursor.character });
    if (call === undefined) {
      return undefined;
    }
    const result = await this.client.sendRequest("workspace/executeCommand", call);
    const message = resultMessage(result);
    if (message !== undefined) {
      void vscode.window.showInformationMessage(message);
    }
    return result;
  }

  async deactivate(): Promise<void> {
    if (this.timer !== undefined) {
      clearInterval(this.timer);
    }
    await this.client?.stop();
  }
}

let extension: MarginExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new MarginExtension(context);
  await extension.activate();
}

export async function deactivate(): Promise<void> {
  await extension?.deactivate();
}
