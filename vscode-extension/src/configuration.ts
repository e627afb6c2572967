// How the extension finds margin's server and what it sends it: pure functions, tested without VS Code.

export interface ServerLaunch {
  command: string;
  args: string[];
  /** Which setting or fallback chose this command, for messages and the log. */
  source: string;
}

export interface LaunchProblem {
  error: string;
}

export interface LaunchSettings {
  /** margin.server.command: the whole command line, e.g. ["/opt/venv/bin/margin", "serve"]. */
  command: readonly string[];
  /** margin.server.pythonPath: a Python that has margin installed. */
  pythonPath: string;
}

export interface Environment {
  /** The absolute path of an executable found on PATH, or undefined. */
  which(name: string): string | undefined;
  exists(path: string): boolean;
}

export const INSTALL_HINT =
  "Install margin into a Python environment (pip install margin), then set margin.server.pythonPath to " +
  "that environment's python, or margin.server.command to its `margin serve`.";

/** The server's command line: margin.server.command, else margin.server.pythonPath -m margin.server, else the
 * `margin` console script on PATH, else python3/python -m margin.server. */
export function resolveServerCommand(settings: LaunchSettings, environment: Environment): ServerLaunch | LaunchProblem {
  const command = settings.command.filter((part) => part.trim() !== "");
  if (command.length > 0) {
    const [program, ...args] = command;
    if (looksLikePath(program) && !environment.exists(program)) {
      return { error: `margin.server.command starts with ${program}, which does not exist. ${INSTALL_HINT}` };
    }
    return { command: program, args, source: "margin.server.command" };
  }
  const python = settings.pythonPath.trim();
  if (python !== "") {
    if (looksLikePath(python) && !environment.exists(python)) {
      return { error: `margin.server.pythonPath is ${python}, which does not exist. ${INSTALL_HINT}` };
    }
    return { command: python, args: ["-m", "margin.server"], source: "margin.server.pythonPath" };
  }
  const script = environment.which("margin");
  if (script !== undefined) {
    return { command: script, args: ["serve"], source: "the margin command on PATH" };
  }
  for (const name of ["python3", "python"]) {
    const found = environment.which(name);
    if (found !== undefined) {
      return { command: found, args: ["-m", "margin.server"], source: `${name} on PATH` };
    }
  }
  return { error: `No margin command and no Python found on PATH. ${INSTALL_HINT}` };
}

function looksLikePath(program: string): boolean {
  return program.includes("/") || program.includes("\\");
}

/** Settings that only the extension reads; the server ignores them. */
export const CLIENT_ONLY = ["server.command", "server.pythonPath"];

/** The server's settings from VS Code's `margin` section as a nested object (what initializationOptions and
 * workspace/configuration carry), leaving out unset values and the extension's own settings. */
export function serverSettings(section: Record<string, unknown>): Record<string, unknown> {
  const nested: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(flatten(section))) {
    if (value === undefined || value === null || CLIENT_ONLY.includes(key)) {
      continue;
    }
    const parts = key.split(".");
    let node = nested;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      if (typeof next !== "object" || next === null || Array.isArray(next)) {
        node[part] = {};
      }
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = value;
  }
  return nested;
}

/** `{llm: {endpoint: "x"}}` and `{"llm.endpoint": "x"}` both become `{"llm.endpoint": "x"}`; objects that are
 * values (margin.llm.roles) stay whole. */
export function flatten(section: Record<string, unknown>, prefix = ""): Record<string, unknown> {
  const flat: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(section)) {
    const dotted = prefix + key;
    if (isPlainObject(value) && !OBJECT_VALUES.has(dotted)) {
      Object.assign(flat, flatten(value, `${dotted}.`));
    } else {
      flat[dotted] = value;
    }
  }
  return flat;
}

/** Settings whose value is itself an object. */
export const OBJECT_VALUES = new Set(["llm.roles"]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
