// A stand-in for the `vscode` module, enough for the extension's own logic; tests read what it recorded.

type Listener<T> = (value: T) => unknown;

export class Disposable {
  constructor(private readonly callback: () => void = () => undefined) {}
  dispose(): void {
    this.callback();
  }
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export const recorded = {
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as { command: string; args: unknown[] }[],
  messages: [] as { kind: "error" | "info" | "warning"; text: string; actions: string[] }[],
  output: [] as string[],
  configuration: {} as Record<string, unknown>,
  configurationListeners: [] as Listener<{ affectsConfiguration(section: string): boolean }>[],
  statusItems: [] as { text: string; tooltip: string; command?: string; shown: boolean }[],
  answer: undefined as string | undefined, // the button the "user" clicks on the next message
};

export function reset(): void {
  recorded.commands.clear();
  recorded.executed.length = 0;
  recorded.messages.length = 0;
  recorded.output.length = 0;
  recorded.configuration = {};
  recorded.configurationListeners.length = 0;
  recorded.statusItems.length = 0;
  recorded.answer = undefined;
  window.activeTextEditor = undefined;
}

function message(kind: "error" | "info" | "warning") {
  return (text: string, ...actions: string[]) => {
    recorded.messages.push({ kind, text, actions });
    return Promise.resolve(recorded.answer);
  };
}

export const window = {
  activeTextEditor: undefined as
    | undefined
    | { document: { uri: { toString(): string } }; selection: { active: { line: number; character: number } } },
  createOutputChannel(_name: string) {
    return {
      appendLine: (line: string) => recorded.output.push(line),
      show: () => recorded.output.push("<shown>"),
      dispose: () => undefined,
    };
  },
  createStatusBarItem(_alignment: StatusBarAlignment, _priority: number) {
    const item = {
      text: "",
      tooltip: "",
      command: undefined as string | undefined,
      shown: false,
      show() {
        item.shown = true;
      },
      dispose: () => undefined,
    };
    recorded.statusItems.push(item);
    return item;
  },
  showErrorMessage: message("error"),
  showInformationMessage: message("info"),
  showWarningMessage: message("warning"),
};

function lookup(source: Record<string, unknown>, key: string): unknown {
  if (key in source) {
    return source[key];
  }
  let node: unknown = source;
  for (const part of key.split(".")) {
    if (typeof node !== "object" || node === null) {
      return undefined;
    }
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

export const workspace = {
  getConfiguration(section?: string) {
    const root = section ? (lookup(recorded.configuration, section) as Record<string, unknown> | undefined) ?? {} : recorded.configuration;
    return { get: <T>(key: string): T | undefined => lookup(root, key) as T | undefined };
  },
  onDidChangeConfiguration(listener: Listener<{ affectsConfiguration(section: string): boolean }>) {
    recorded.configurationListeners.push(listener);
    return new Disposable();
  },
};

export const commands = {
  registerCommand(id: string, callback: (...args: unknown[]) => unknown) {
    if (recorded.commands.has(id)) {
      throw new Error(`command ${id} already registered`);
    }
    recorded.commands.set(id, callback);
    return new Disposable(() => recorded.commands.delete(id));
  },
  executeCommand(command: string, ...args: unknown[]) {
    recorded.executed.push({ command, args });
    return Promise.resolve(undefined);
  },
};
