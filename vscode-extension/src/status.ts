// The status-bar item's text: the server's state, its LLM endpoint, and work in progress.

export type ClientState = "starting" | "running" | "stopped" | "failed";

export interface ServerStatus {
  /** The endpoint setting ("auto" or a URL). */
  endpoint: string;
  /** Endpoints the server has used, with what it knows of them. */
  endpoints: { url: string; model: string | null; mode: string | null }[];
  /** Reviews and rewrites running now. */
  reviews: number;
  rewrites: number;
  /** Why models cannot run now (nothing answers, the embedded model crashed); absent or null when they can. */
  problem?: string | null;
}

export interface StatusView {
  text: string;
  tooltip: string;
}

export function statusView(state: ClientState, status?: ServerStatus, problem?: string): StatusView {
  if (state === "failed") {
    return { text: "$(error) margin", tooltip: `margin's server is not running: ${problem ?? "see the log"}. Click for the log.` };
  }
  if (state === "stopped") {
    return { text: "$(circle-slash) margin", tooltip: "margin's server stopped. Click for the log." };
  }
  if (state === "starting" || status === undefined) {
    return { text: "$(sync~spin) margin", tooltip: "margin's server is starting." };
  }
  if (status.problem) {
    return {
      text: "$(warning) margin: no model",
      tooltip: `Readability works; focused feedback and rewrites do not: ${status.problem}\nClick for the log.`,
    };
  }
  const busy = status.reviews + status.rewrites;
  const used = status.endpoints.map(
    (endpoint) => `${endpoint.url} (${endpoint.model ?? "model not chosen yet"}${endpoint.mode ? `, ${endpoint.mode}` : ""})`,
  );
  const lines = [
    `LLM endpoint setting: ${status.endpoint}`,
    used.length > 0 ? `In use: ${used.join("; ")}` : "No model called yet.",
    `${status.reviews} review(s) and ${status.rewrites} rewrite(s) running.`,
    "Click for the log.",
  ];
  const where = status.endpoints.length > 0 ? shortUrl(status.endpoints[0].url) : status.endpoint;
  const text = busy > 0 ? `$(sync~spin) margin: ${busy} running` : `$(check) margin: ${where}`;
  return { text, tooltip: lines.join("\n") };
}

function shortUrl(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
