// What the harness (tests/tests/platform/sdk_typescript.rs) started, and small helpers.
import assert from "node:assert/strict";

export const env = {
  platformUrl: need("PLATFORM_URL"),
  relayUrl: need("RELAY_URL"),
  controlUrl: need("CONTROL_URL"),
  apiKey: need("API_KEY"),
  secretKey: need("SECRET_KEY"),
  jobsToken: need("JOBS_TOKEN"),
  // A second platform, without an SFU (RTMP only), and a tenant of it.
  rtmpOnlyUrl: need("RTMP_ONLY_URL"),
  rtmpOnlyApiKey: need("RTMP_ONLY_API_KEY"),
};

function need(name) {
  const value = process.env[name];
  assert.ok(value, `${name} is not set: run these tests through tests/tests/platform/sdk_typescript.rs`);
  return value;
}

let counter = 0;
/** A name no other test uses. */
export function unique(prefix) {
  counter += 1;
  return `${prefix}${process.pid}x${counter}x${Date.now() % 100000}`;
}

/** Asks the harness to do something (stop or start the relay, move the clock). */
export async function control(path) {
  const response = await fetch(new URL(path, env.controlUrl), { method: "POST" });
  assert.equal(response.status, 200, await response.text());
}

/** Runs a scheduled job as the scheduler would. */
export async function runJob(name) {
  const response = await fetch(new URL(`/api/jobs/${name}`, env.platformUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${env.jobsToken}` },
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text);
}

/** Waits until `check` answers something truthy (or fails after `ms`, saying `why()`). */
export async function eventually(what, check, ms = 10_000, why = () => "") {
  const deadline = Date.now() + ms;
  for (let round = 0; ; round++) {
    if (process.env.SDK_TEST_DEBUG && round % 20 === 0) console.log(`waiting for ${what} ${why()}`);
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what} ${why()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * How far the platform's clock is ahead of this one (the harness moves it so that tokens
 * expire): signed calls and webhook checks take it into account, as a backend with a
 * skewed clock would.
 */
export async function clockOffsetMs() {
  const response = await fetch(new URL("/clock/advance?seconds=0", env.controlUrl), { method: "POST" });
  assert.equal(response.status, 200);
  const platformSeconds = Number(await response.text());
  return platformSeconds * 1000 - Date.now();
}
