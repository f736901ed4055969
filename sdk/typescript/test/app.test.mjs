// An app's flow with the app client: sign-up, the user's calls, a broadcast with its OBS
// and LiveKit settings (and with OBS's alone on a platform without an SFU), going live with
// heartbeats and viewer reports, errors as typed PlatformErrors, and an expired token
// refreshed and the call sent again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAppClient, createClip, createStream, goLive, listClips, PlatformError, waitForClip } from "../dist/esm/index.js";
import { control, env, eventually, unique } from "./support.mjs";

function newUser() {
  const name = unique("ada");
  return { username: name, email: `${name}@example.com`, password: "correct horse battery" };
}

test("sign-up, profile and a refused body as a typed error", async () => {
  const sessions = [];
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey, onSession: (s) => sessions.push(s) });
  const body = newUser();
  const session = await app.signUp(body);
  assert.ok(session.token && session.refreshToken);
  assert.equal(sessions.length, 1);
  const { data: profile } = await app.api.GET("/api/users/profile/full");
  assert.equal(profile.username, body.username);

  const other = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey });
  await assert.rejects(
    other.signUp({ username: "x", email: "not an email", password: "short" }),
    (error) => {
      assert.ok(error instanceof PlatformError);
      assert.equal(error.status, 422);
      assert.equal(error.code, "validation_failed");
      assert.ok(error.errors.some((e) => e.field === "email"), JSON.stringify(error.errors));
      assert.ok(error.requestId === undefined || typeof error.requestId === "string");
      return true;
    },
  );
});

test("a broadcast's OBS and LiveKit settings in one call, then live with reports, then stopped", async () => {
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey });
  await app.signUp(newUser());
  const setup = await createStream(app.api, { title: "SDK show", visibility: "public" });
  assert.equal(setup.broadcast.status, "pending");
  assert.equal(`${setup.obs.server}/${setup.obs.key}`, setup.broadcast.rtmpUrl);
  assert.ok(setup.livekit.token.length > 20);
  assert.equal(setup.livekit.room, setup.broadcast.streamId);

  const errors = [];
  let viewers = 7;
  const live = await goLive(app.api, setup.broadcast.id, {
    viewerCount: () => viewers++,
    onError: (e) => errors.push(e),
    heartbeatIntervalMs: 100,
    viewerCountIntervalMs: 50,
  });
  // A few reports (each asks for the count once), then stop.
  await eventually("three viewer reports", () => viewers >= 10);
  const ended = await live.stop();
  assert.equal(ended.status, "completed");
  assert.deepEqual(errors, []);
  const { data: analytics } = await app.api.GET("/api/broadcasts/{id}/analytics", {
    params: { path: { id: setup.broadcast.id } },
  });
  // Every report asked for landed before the broadcast ended: the peak is the last one.
  assert.equal(analytics.peakViewers, viewers - 1, JSON.stringify(analytics));
});

test("clip that: a clip of a live broadcast, listed, and its numbers checked", async () => {
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey });
  await app.signUp(newUser());
  const setup = await createStream(app.api, { title: "Clipped", visibility: "public" }, { livekit: false });
  const live = await goLive(app.api, setup.broadcast.id);
  const clip = await createClip(app.api, setup.broadcast.id, { lastSeconds: 30, title: "That" });
  assert.equal(clip.state, "processing");
  assert.equal(clip.duration, 30);
  assert.equal(clip.broadcastId, setup.broadcast.id);
  const page = await listClips(app.api, setup.broadcast.id);
  assert.equal(page.total, 1);
  assert.equal(page.items[0].id, clip.id);
  await assert.rejects(createClip(app.api, setup.broadcast.id, { lastSeconds: 300 }), (error) => {
    assert.ok(error instanceof PlatformError);
    assert.equal(error.status, 422);
    assert.ok(error.errors.some((e) => e.field === "lastSeconds"), JSON.stringify(error.errors));
    return true;
  });
  // No media server runs here: the clip stays processing, and the wait says so in time.
  await assert.rejects(waitForClip(app.api, clip.id, "hls", { timeoutMs: 300, intervalMs: 100 }), /not playable yet/);
  await live.stop();
});

/** The user's broadcasts, title to status. */
async function statuses(app) {
  const { data } = await app.api.GET("/api/broadcasts");
  return Object.fromEntries(data.items.map((b) => [b.title, b.status]));
}

test("without an SFU, createStream answers the OBS settings alone; a required token leaves no pending broadcast", async () => {
  const app = createAppClient({ baseUrl: env.rtmpOnlyUrl, apiKey: env.rtmpOnlyApiKey });
  await app.signUp(newUser());
  const setup = await createStream(app.api, { title: "RTMP only", visibility: "public" });
  assert.equal(setup.livekit, null);
  assert.equal(setup.broadcast.status, "pending");
  assert.match(setup.obs.server, /^rtmp:\/\//);
  assert.equal(`${setup.obs.server}/${setup.obs.key}`, setup.broadcast.rtmpUrl);

  await assert.rejects(
    createStream(app.api, { title: "LiveKit required" }, { livekit: true }),
    (error) => {
      assert.ok(error instanceof PlatformError, String(error));
      assert.equal(error.status, 503);
      assert.equal(error.code, "sfu_not_configured");
      return true;
    },
  );
  // The broadcast created before the token was refused is closed, not left pending.
  assert.deepEqual(await statuses(app), { "RTMP only": "pending", "LiveKit required": "error" });
});

test("a token that cannot be had closes the broadcast; livekit: false asks for none", async () => {
  const asked = [];
  const lost = (input, init) => {
    const request = new Request(input, init);
    asked.push(new URL(request.url).pathname);
    if (request.url.endsWith("/token")) return Promise.reject(new TypeError("fetch failed: connection reset"));
    return fetch(request);
  };
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey, fetch: lost });
  await app.signUp(newUser());
  await assert.rejects(createStream(app.api, { title: "Connection lost" }), /connection reset/);

  asked.length = 0;
  const setup = await createStream(app.api, { title: "OBS only" }, { livekit: false });
  assert.equal(setup.livekit, null);
  assert.deepEqual(asked, ["/api/broadcasts"]);
  assert.deepEqual(await statuses(app), { "Connection lost": "error", "OBS only": "pending" });
});

test("an expired token is refreshed and the call sent again, once for concurrent calls", async () => {
  const sessions = [];
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey, onSession: (s) => sessions.push(s) });
  await app.signUp(newUser());
  const before = app.session.token;
  // An hour and a bit later the access token has expired; the refresh token has not.
  await control("/clock/advance?seconds=3700");
  const answers = await Promise.all([1, 2, 3].map(() => app.api.GET("/api/users/profile/full")));
  for (const { data } of answers) assert.ok(data.id);
  assert.notEqual(app.session.token, before);
  assert.equal(sessions.length, 2, "one sign-up, one refresh for three concurrent calls");
});
