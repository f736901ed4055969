// The package as published: the CommonJS build loads with require and exports what the
// ESM build does; the generated facts match the contract's shape.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import * as esm from "../dist/esm/index.js";

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
