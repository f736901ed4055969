// Webhooks as the tenant's backend receives them: an endpoint registered with the server
// client, a test event delivered to a receiver here, verified with verifyWebhook; a
// forged body and a wrong secret refused; both secrets accepted during a rotation.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { createServerClient, verifyWebhook, WebhookVerificationError } from "../dist/esm/index.js";
import { clockOffsetMs, env, eventually, runJob } from "./support.mjs";

/** A receiver on loopback that keeps each delivery's raw body and headers. */
async function receiver() {
  const received = [];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (c) => chunks.push(c));
    request.on("end", () => {
      received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: request.headers });
      response.writeHead(200).end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/hooks`, received, close: () => server.close() };
}

test("a delivery verified, a forgery refused, both secrets during a rotation", async () => {
  const offset = await clockOffsetMs();
  const now = () => Date.now() + offset;
  const backend = createServerClient({ baseUrl: env.platformUrl, apiKey: env.apiKey, secretKey: env.secretKey, now });
  const hooks = await receiver();
  try {
    const { data: endpoint } = await backend.api.POST("/api/v1/webhooks", {
      // A type nothing here causes: what arrives is the test events asked for.
      body: { url: hooks.url, events: ["payout.rejected"], description: "sdk tests" },
    });
    const oldSecret = endpoint.secret;
    assert.match(oldSecret, /^whsec_/);
    const delivered = async (count) => {
      await backend.api.POST("/api/v1/webhooks/{id}/test", { params: { path: { id: endpoint.id } } });
      return eventually("a delivery", async () => {
        await runJob("deliver-webhooks");
        return hooks.received.length >= count && hooks.received[count - 1];
      });
    };

    const first = await delivered(1);
    const event = await verifyWebhook(first.body, first.headers, oldSecret, { now });
    assert.equal(event.type, "webhook.test");
    assert.equal(event.data.endpointId, endpoint.id);
    await assert.rejects(verifyWebhook(first.body + " ", first.headers, oldSecret, { now }), WebhookVerificationError);
    await assert.rejects(
      verifyWebhook(first.body, first.headers, "whsec_" + Buffer.alloc(32, 7).toString("base64"), { now }),
      WebhookVerificationError,
    );
    // Ten minutes later the same delivery is too old.
    await assert.rejects(
      verifyWebhook(first.body, first.headers, oldSecret, { now: () => now() + 600_000 }),
      WebhookVerificationError,
    );

    const { data: rotated } = await backend.api.POST("/api/v1/webhooks/{id}/rotate-secret", {
      params: { path: { id: endpoint.id } },
    });
    const newSecret = rotated.secret;
    assert.notEqual(newSecret, oldSecret);
    const second = await delivered(2);
    const again = await verifyWebhook(second.body, second.headers, [oldSecret, newSecret], { now });
    assert.equal(again.type, "webhook.test");
    await verifyWebhook(second.body, second.headers, newSecret, { now });
  } finally {
    hooks.close();
  }
});
