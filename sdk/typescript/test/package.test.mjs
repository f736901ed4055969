// The package as published: the CommonJS build loads with require and exports what the
// ESM build does; the generated facts match the contract's shape; the folder, as checked
// out, installs into another project and loads there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import * as esm from "../dist/esm/index.js";

const run = promisify(execFile);

test("the CommonJS and ESM builds export the same", () => {
  const require = createRequire(import.meta.url);
  const cjs = require("../dist/cjs/index.js");
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
  assert.equal(typeof cjs.createServerClient, "function");
});

test("money moves are recognised by their route templates", () => {
  assert.ok(esm.movesMoney("POST", "/api/broadcasts/b1/gifts"));
  assert.ok(esm.movesMoney("post", "/api/v1/wallets/u1/credits"));
  assert.ok(!esm.movesMoney("GET", "/api/broadcasts/b1/gifts"));
  assert.ok(!esm.movesMoney("POST", "/api/broadcasts/b1/gifts/extra"));
  assert.ok(esm.WEBHOOK_EVENT_TYPES.includes("gift.sent"));
});

test("signatures are the trust model's HMAC, as openssl computes it", async () => {
  // printf '%s' 'POST/api/v1/sessions{"title":"Launch"}1700000000' | openssl dgst -sha256 -hmac sk_test
  const expected = "791be0c7d831f28958530a835e51b852c0ff03bf1e3b5d538d837c4651129f26";
  const sig = await esm.signature("sk_test", "POST", "/api/v1/sessions", '{"title":"Launch"}', 1700000000);
  assert.equal(sig, expected);
});

test("the folder as checked out installs into a project with npm install, offline", async () => {
  const work = mkdtempSync(join(tmpdir(), "sdk-install-"));
  try {
    // The checkout: the package's files without what a build or `npm ci` leaves behind.
    const sdk = join(work, "sdk");
    const folder = fileURLToPath(new URL("..", import.meta.url));
    cpSync(folder, sdk, {
      recursive: true,
      filter: (path) => !["node_modules", "dist"].includes(basename(path)),
    });
    const app = join(work, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true }));
    // No registry: the SDK's locked dependencies come from npm's cache.
    const installed = await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "../sdk"], {
      cwd: app,
      env: { ...process.env, npm_config_update_notifier: "false" },
    }).catch((error) => assert.fail(`npm install ../sdk failed:\n${error.stdout}${error.stderr}`));
    const load = `
      const cjs = require("@live-platform/sdk");
      import("@live-platform/sdk").then(async (esm) => {
        const sig = await esm.signature("sk_test", "POST", "/api/v1/sessions", '{"title":"Launch"}', 1700000000);
        console.log(JSON.stringify({ sig, same: Object.keys(cjs).sort().join() === Object.keys(esm).sort().join() }));
      });`;
    const { stdout } = await run(process.execPath, ["-e", load], { cwd: app }).catch((error) =>
      assert.fail(`the installed SDK does not load:\n${error.stderr}\n(npm install said:\n${installed.stdout}${installed.stderr})`),
    );
    assert.deepEqual(JSON.parse(stdout), {
      sig: "791be0c7d831f28958530a835e51b852c0ff03bf1e3b5d538d837c4651129f26",
      same: true,
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

test("the player is its own entry point, loads outside a browser and names renditions and errors as the beacon does", async () => {
  const require = createRequire(import.meta.url);
  const player = await import("@live-platform/sdk/player");
  const cjs = require("@live-platform/sdk/player");
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(player).sort());
  assert.equal(typeof player.LivePlayer, "function");
  assert.equal(typeof player.defineLivePlayer, "function");
  assert.ok(!("LivePlayer" in esm), "the API client does not pull the player in");
  assert.equal(player.renditionName({ height: 720, bitrate: 1, url: "https://m.example/hls/s/v0.m3u8?exp=1&sig=a" }), "source");
  assert.equal(player.renditionName({ height: 480, bitrate: 1, url: "https://m.example/hls/s/v1.m3u8" }), "480p");
  assert.equal(player.renditionName(undefined), null);
  assert.equal(player.errorReason({ type: "networkError", details: "manifestLoadError", response: { code: 403 } }), "not_allowed");
  assert.equal(player.errorReason({ type: "networkError", details: "manifestLoadError", response: { code: 404 } }), "manifest");
  assert.equal(player.errorReason({ type: "networkError", details: "fragLoadError" }), "network");
  assert.equal(player.errorReason({ type: "mediaError", details: "bufferStalledError" }), "media");
  assert.equal(player.errorReason({ type: "keySystemError", details: "keySystemNoKeys" }), "other");
});

// The build compiles src/player once more without comments (tsconfig.asset.json) for the pages.
test("the platform's pages serve this build of the player (static/live-player.js)", async () => {
  const { readFileSync } = await import("node:fs");
  const built = readFileSync(new URL("../dist/asset/player/index.js", import.meta.url), "utf8");
  const served = readFileSync(new URL("../../../static/live-player.js", import.meta.url), "utf8");
  assert.ok(built === served, "static/live-player.js is not the player's build: run npm run build in sdk/typescript");
});
