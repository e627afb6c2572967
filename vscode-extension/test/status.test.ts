import assert from "node:assert/strict";
import { test } from "node:test";
import { statusView } from "../src/status";

const idle = { endpoint: "auto", endpoints: [], reviews: 0, rewrites: 0 };

test("a failed start shows an error icon and the reason", () => {
  const view = statusView("failed", undefined, "no Python found");
  assert.equal(view.text, "$(error) margin");
  assert.match(view.tooltip, /no Python found/);
});

test("while starting, and before the first status, the item spins", () => {
  assert.equal(statusView("starting").text, "$(sync~spin) margin");
  assert.equal(statusView("running").text, "$(sync~spin) margin");
});

test("a running server shows its endpoint setting until a model is used, then the endpoint's host", () => {
  assert.equal(statusView("running", idle).text, "$(check) margin: auto");
  assert.match(statusView("running", idle).tooltip, /No model called yet/);
  const used = { ...idle, endpoints: [{ url: "http://127.0.0.1:8000/v1", model: "qwen", mode: "json_schema" }] };
  assert.equal(statusView("running", used).text, "$(check) margin: 127.0.0.1:8000");
  assert.match(statusView("running", used).tooltip, /http:\/\/127\.0\.0\.1:8000\/v1 \(qwen, json_schema\)/);
});

test("work in progress is counted in the item", () => {
  const view = statusView("running", { ...idle, reviews: 2, rewrites: 1 });
  assert.equal(view.text, "$(sync~spin) margin: 3 running");
  assert.match(view.tooltip, /2 review\(s\) and 1 rewrite\(s\) running/);
});

test("a stopped server says so", () => {
  assert.equal(statusView("stopped").text, "$(circle-slash) margin");
});

test("a server whose models cannot run says so in the item, with the reason in the tooltip", () => {
  const view = statusView("running", { ...idle, problem: "the embedded model server crashed: signal 11" });
  assert.equal(view.text, "$(warning) margin: no model");
  assert.match(view.tooltip, /Readability works/);
  assert.match(view.tooltip, /crashed: signal 11/);
  assert.equal(statusView("running", { ...idle, problem: null }).text, "$(check) margin: auto");
});
