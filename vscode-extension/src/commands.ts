// The editor's commands: each asks margin's server to run one of its commands on the active document.

export interface EditorPosition {
  uri: string;
  line: number;
  character: number;
}

/** Server command ids (workspace/executeCommand), as server/lsp.py registers them. */
export const SERVER = {
  reviewParagraph: "margin.reviewParagraph",
  reviewDocument: "margin.reviewDocument",
  simplifyParagraph: "margin.simplifyParagraph",
  simplifyDocument: "margin.simplifyDocument",
  generateLayArticle: "margin.generateLayArticle",
  status: "margin.status",
} as const;

/** Editor command ids (package.json contributes.commands). They differ from the server's: vscode-languageclient
 * registers the server's own ids, which take arguments, as commands too. */
export const EDITOR = {
  reviewParagraph: "margin.editor.reviewParagraph",
  reviewDocument: "margin.editor.reviewDocument",
  simplifyParagraph: "margin.editor.simplifyParagraph",
  simplifyDocument: "margin.editor.simplifyDocument",
  generateLayArticle: "margin.editor.generateLayArticle",
  restartServer: "margin.editor.restartServer",
  showLog: "margin.editor.showLog",
} as const;

/** The server command and its arguments for an editor command at a cursor position. */
export function serverCall(editorCommand: string, at: EditorPosition): { command: string; arguments: unknown[] } | undefined {
  switch (editorCommand) {
    case EDITOR.reviewParagraph:
      return { command: SERVER.reviewParagraph, arguments: [at.uri, at.line, at.character] };
    case EDITOR.simplifyParagraph:
      return { command: SERVER.simplifyParagraph, arguments: [at.uri, at.line, at.character] };
    case EDITOR.reviewDocument:
      return { command: SERVER.reviewDocument, arguments: [at.uri] };
    case EDITOR.simplifyDocument:
      return { command: SERVER.simplifyDocument, arguments: [at.uri] };
    case EDITOR.generateLayArticle:
      return { command: SERVER.generateLayArticle, arguments: [at.uri] };
    default:
      return undefined;
  }
}

/** What to tell the user about a command's result (the server already reports problems itself). */
export function resultMessage(result: unknown): string | undefined {
  if (typeof result !== "object" || result === null) {
    return undefined;
  }
  const outcome = result as { status?: string; path?: string; reviewed?: number };
  if (outcome.status === "written" && outcome.path) {
    return `margin: lay article written to ${outcome.path}`;
  }
  if (typeof outcome.reviewed === "number") {
    return outcome.reviewed === 0 ? "margin: nothing new to review" : `margin: reviewed ${outcome.reviewed} paragraph(s)`;
  }
  return undefined;
}
