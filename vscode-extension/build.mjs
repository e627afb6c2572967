// Bundles the extension (dist/extension.js) with esbuild, or, with --tests, the unit tests (out-test/) with the
// vscode and vscode-languageclient modules replaced by the stubs in test/.
import { readdirSync } from "node:fs";
import * as esbuild from "esbuild";

const tests = process.argv.includes("--tests");

if (tests) {
  await esbuild.build({
    entryPoints: readdirSync("test")
      .filter((name) => name.endsWith(".test.ts"))
      .map((name) => `test/${name}`),
    outdir: "out-test",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: "inline",
    alias: { vscode: "./test/vscode-stub.ts", "vscode-languageclient/node": "./test/languageclient-stub.ts" },
    logLevel: "warning",
  });
} else {
  await esbuild.build({
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    external: ["vscode"],
    minify: process.argv.includes("--minify"),
    sourcemap: !process.argv.includes("--minify"),
    logLevel: "warning",
  });
}
