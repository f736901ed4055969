// A tenant's backend with the server client: every call signed, identical calls in the
// same second both accepted, 429 retried after Retry-After, and a money move whose answer
// was lost retried with the same Idempotency-Key: credited once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAppClient, createServerClient, movesMoney, PlatformError } from "../dist/esm/index.js";
import { clockOffsetMs, env, unique } from "./support.mjs";

async function server(fetchImpl) {
  const offset = await clockOffsetMs();
  return createServerClient({
    baseUrl: env.platformUrl,
    apiKey: env.apiKey,
    secretKey: env.secretKey,
    now: () => Date.now() + offset,
    fetch: fetchImpl,
    retry: { baseDelayMs: 20 },
  });
}

async function newFan() {
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey });
  const name = unique("fan");
  const session = await app.signUp({ username: name, email: `${name}@example.com`, password: "correct horse battery" });
  return { app, userId: session.user.id };
}

test("signed calls, twice in the same second", async () => {
  const backend = await server();
  const [a, b] = await Promise.all([
    backend.api.POST("/api/v1/sessions", { body: { title: "Launch" } }),
    backend.api.POST("/api/v1/sessions", { body: { title: "Launch" } }),
  ]);
  assert.ok(a.data.id && b.data.id);
  assert.notEqual(a.data.id, b.data.id);
  const { data: list } = await backend.api.GET("/api/v1/sessions");
  assert.ok(list.items.length >= 2);
});

test("a wrong secret is a typed 401, not retried", async () => {
  let calls = 0;
  const offset = await clockOffsetMs();
  const backend = createServerClient({
    baseUrl: env.platformUrl,
    apiKey: env.apiKey,
    secretKey: "sk_not_the_secret",
    now: () => Date.now() + offset,
    fetch: (request) => {
      calls += 1;
      return fetch(request);
    },
  });
  await assert.rejects(backend.api.GET("/api/v1/sessions"), (error) => {
    assert.ok(error instanceof PlatformError);
    assert.equal(error.status, 401);
    return true;
  });
  assert.equal(calls, 1);
});

test("429 is retried after Retry-After", async () => {
  const started = [];
  const backend = await server((request) => {
    started.push(Date.now());
    if (started.length === 1) {
      return Promise.resolve(new Response('{"code":"rate_limited","detail":"slow down","status":429}', {
        status: 429,
        headers: { "retry-after": "1", "content-type": "application/problem+json" },
      }));
    }
    return fetch(request);
  });
  const { data } = await backend.api.GET("/api/v1/sessions");
  assert.ok(Array.isArray(data.items));
  assert.equal(started.length, 2);
  assert.ok(started[1] - started[0] >= 950, `waited ${started[1] - started[0]} ms`);
});

test("a money move whose answer was lost is retried with the same key and credited once", async () => {
  const { app, userId } = await newFan();
  const path = `/api/v1/wallets/${userId}/credits`;
  assert.ok(movesMoney("POST", path));
  const keys = [];
  const backend = await server(async (request) => {
    if (new URL(request.url).pathname !== path) return fetch(request);
    keys.push(request.headers.get("idempotency-key"));
    const answer = await fetch(request);
    // The first answer never reaches the caller: the platform did the work, the network
    // lost the reply, and the SDK sees what a proxy would say.
    if (keys.length === 1) {
      return new Response('{"code":"unavailable","detail":"upstream went away","status":503}', {
        status: 503,
        headers: { "content-type": "application/problem+json" },
      });
    }
    return answer;
  });
  const { data: credit } = await backend.api.POST("/api/v1/wallets/{userId}/credits", {
    params: { path: { userId } },
    // The reference alone would refuse a second credit (409 duplicate_reference): only the
    // same Idempotency-Key gets the first answer back.
    body: { tokens: 250, reason: "purchase", reference: unique("order") },
  });
  assert.equal(keys.length, 2);
  assert.ok(keys[0] && keys[0] === keys[1], `the key was reused: ${keys}`);
  assert.ok(credit);
  const { data: wallet } = await app.api.GET("/api/wallet");
  assert.equal(wallet.tokens, 250, JSON.stringify(wallet));
});
