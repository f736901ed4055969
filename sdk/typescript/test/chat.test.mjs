// The chat and events socket: messages in order and once, typed events, and a relay that
// goes away while 60 messages are posted: the client reconnects and fills the gap from the
// history (more than the socket's history frame holds, so from REST pages too).
import { test } from "node:test";
import assert from "node:assert/strict";
import { connectChat, createAppClient } from "../dist/esm/index.js";
import { control, env, eventually, unique } from "./support.mjs";

async function user(prefix) {
  const app = createAppClient({ baseUrl: env.platformUrl, apiKey: env.apiKey });
  const name = unique(prefix);
  await app.signUp({ username: name, email: `${name}@example.com`, password: "correct horse battery" });
  return app;
}

test("no message lost or shown twice across a relay restart", async () => {
  const owner = await user("host");
  const { data: broadcast } = await owner.api.POST("/api/broadcasts", {
    body: { title: "Chatty", visibility: "public" },
  });
  const streamId = broadcast.streamId;
  const ada = await user("ada");
  let historyReads = 0;
  const chat = connectChat({
    baseUrl: env.platformUrl,
    socketUrl: env.relayUrl,
    streamId,
    apiKey: env.apiKey,
    token: () => ada.session?.token,
    backoff: { initialMs: 100, maxMs: 1000 },
    fetch: (input, init) => {
      historyReads += 1;
      return fetch(input, init);
    },
  });
  const messages = [];
  const events = [];
  const states = [];
  chat.on("message", (m) => messages.push(m));
  chat.on("event", (e) => events.push(e));
  chat.on("state", (s) => states.push(s));
  const errors = [];
  chat.on("error", (e) => errors.push(e));
  const why = () => JSON.stringify({ got: messages.length, states, errors: errors.map(String) });
  try {
    await eventually("the socket to open", () => chat.state === "open");
    for (const text of ["one", "two", "three"]) chat.send(text);
    await eventually("three messages", () => messages.length === 3);
    assert.deepEqual(messages.map((m) => m.message), ["one", "two", "three"]);

    // A status change arrives as a typed event.
    await owner.api.POST("/api/broadcasts/{id}/status", {
      params: { path: { id: broadcast.id } },
      body: { status: "active" },
    });
    await eventually("the status event", () => events.some((e) => e.kind === "status" && e.status === "active"));

    // The relay goes away; six viewers post 60 messages meanwhile.
    await control("/relay/stop");
    await eventually("the client to notice", () => chat.state === "reconnecting");
    const posters = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => user(`viewer${n}`)));
    await Promise.all(
      posters.map(async (poster, p) => {
        for (let i = 0; i < 10; i++) {
          await poster.api.POST("/api/streams/{id}/chat", {
            params: { path: { id: streamId } },
            body: { message: `while away ${p}-${i}` },
          });
        }
      }),
    );
    await control("/relay/start");
    await eventually("the 60 messages posted meanwhile", () => messages.length === 63, 20_000, why);

    chat.send("back");
    await eventually("the message sent after the restart", () => messages.length === 64);
    const ids = messages.map((m) => m.id);
    assert.equal(new Set(ids).size, ids.length, "no message twice");
    // The same messages, in the same order, as the stored history.
    const { data: history } = await ada.api.GET("/api/streams/{id}/chat", {
      params: { path: { id: streamId }, query: { limit: 200 } },
    });
    assert.deepEqual(ids, history.items.map((m) => m.id));
    assert.ok(states.includes("reconnecting") && chat.state === "open", states.join(","));
    assert.ok(historyReads >= 1, "the gap beyond the history frame was read over REST");

    // The sender deletes a message: everyone's client hears it.
    const deleted = [];
    chat.on("deleted", (id) => deleted.push(id));
    chat.delete(messages.at(-1).id);
    await eventually("the deletion", () => deleted.includes(messages.at(-1).id));
  } finally {
    chat.close();
  }
});

test("the socket's token is renewed over the socket before it expires", async () => {
  const owner = await user("host");
  const { data: broadcast } = await owner.api.POST("/api/broadcasts", {
    body: { title: "Long show", visibility: "public" },
  });
  const ada = await user("ada");
  const chat = connectChat({
    baseUrl: env.platformUrl,
    socketUrl: env.relayUrl,
    streamId: broadcast.streamId,
    apiKey: env.apiKey,
    token: () => ada.session?.token,
    renewToken: () => ada.refresh().then((s) => s.token),
    // Renew a token an hour and a second before it expires: a second after connecting.
    renewAheadMs: 3_599_000,
  });
  const renewed = [];
  chat.on("authenticated", (frame) => renewed.push(frame));
  try {
    const first = ada.session.token;
    await eventually("a renewed token", () => renewed.length >= 1, 10_000);
    assert.notEqual(ada.session.token, first);
    assert.equal(renewed[0].userId, ada.session.user.id);
    chat.send("still here");
    const messages = [];
    chat.on("message", (m) => messages.push(m));
    await eventually("a message sent with the renewed token", () => messages.some((m) => m.message === "still here"));
  } finally {
    chat.close();
  }
});

test("frames that arrive together in a batch reach the listeners one by one, in order", async () => {
  const owner = await user("batcher");
  const { data: broadcast } = await owner.api.POST("/api/broadcasts", {
    body: { title: "Busy room", visibility: "public" },
  });
  const streamId = broadcast.streamId;
  // The watching client's socket, observed: which frame types the relay sent it.
  const types = [];
  class WatchedSocket extends globalThis.WebSocket {
    constructor(url) {
      super(url);
      this.addEventListener("message", (m) => types.push(JSON.parse(String(m.data)).type));
    }
  }
  const open = (app, WebSocket) =>
    connectChat({
      baseUrl: env.platformUrl,
      socketUrl: env.relayUrl,
      streamId,
      apiKey: env.apiKey,
      token: app ? () => app.session?.token : undefined,
      WebSocket,
    });
  const watcher = open(null, WatchedSocket);
  const senders = (await Promise.all([1, 2, 3, 4].map((n) => user(`burst${n}`)))).map((app) => open(app));
  const messages = [];
  watcher.on("message", (m) => messages.push(m));
  try {
    await eventually("the sockets to open", () => [watcher, ...senders].every((c) => c.state === "open"));
    // Messages sent at once over four sockets reach the room within its batch window; a
    // round is repeated until one did share a frame.
    for (let round = 0; round < 5 && !types.includes("batch"); round++) {
      const before = messages.length;
      senders.forEach((chat, p) => chat.send(`burst ${round}-${p}`));
      await eventually("the burst", () => messages.length === before + senders.length);
    }
    assert.ok(types.includes("batch"), `frames: ${types.join(",")}`);
    const { data: history } = await owner.api.GET("/api/streams/{id}/chat", {
      params: { path: { id: streamId }, query: { limit: 200 } },
    });
    // (Messages sent at once are stored, and fanned out, in no set order.)
    assert.deepEqual(
      messages.map((m) => m.id).sort(),
      history.items.map((m) => m.id).sort(),
      "every stored message, once",
    );
  } finally {
    for (const chat of [watcher, ...senders]) chat.close();
  }
});
