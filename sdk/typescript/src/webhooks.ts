import type { WebhookEventType } from "./generated/contract.js";

/** A delivered event, as the platform signs and sends it. */
export interface WebhookEvent<T = Record<string, unknown>> {
  id: string;
  type: WebhookEventType;
  /** RFC 3339. */
  timestamp: string;
  sequence?: number;
  data: T;
}

/** A delivery that is forged, altered, too old or unreadable. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

export interface VerifyOptions {
  /** How far the delivery's timestamp may be from now (default 300 s). */
  toleranceSeconds?: number;
  /** The clock (epoch milliseconds). */
  now?: () => number;
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  for (const [key, value] of Object.entries(headers as Record<string, unknown>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(" ") : (value as string);
  }
  return undefined;
}

function base64ToBytes(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** Compares in time independent of where the strings differ. */
function equalInConstantTime(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

/**
 * Verifies a delivery as Standard Webhooks says (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the
 * endpoint's `whsec_` secret) and answers the event. During a secret rotation pass both
 * secrets: a delivery signed with either is accepted. Pass the body exactly as received
 * (before any JSON parsing).
 */
export async function verifyWebhook<T = Record<string, unknown>>(
  rawBody: string | Uint8Array,
  headers: HeaderSource,
  secret: string | string[],
  options: VerifyOptions = {},
): Promise<WebhookEvent<T>> {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  const seconds = Number(timestamp);
  const now = (options.now ?? Date.now)() / 1000;
  const tolerance = options.toleranceSeconds ?? 300;
  if (!Number.isInteger(seconds) || Math.abs(now - seconds) > tolerance) {
    throw new WebhookVerificationError("the delivery's timestamp is outside the tolerance");
  }
  const body = typeof rawBody === "string" ? new TextEncoder().encode(rawBody) : rawBody;
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(new ArrayBuffer(prefix.length + body.length));
  signed.set(prefix);
  signed.set(body, prefix.length);
  const offered = signatures
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .map((s) => s.slice(3));
  for (const candidate of Array.isArray(secret) ? secret : [secret]) {
    const key = await crypto.subtle.importKey(
      "raw",
      base64ToBytes(candidate.replace(/^whsec_/, "")),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    const expected = bytesToBase64(new Uint8Array(await crypto.subtle.sign("HMAC", key, signed)));
    if (offered.some((s) => equalInConstantTime(s, expected))) {
      const event = JSON.parse(new TextDecoder().decode(body)) as WebhookEvent<T>;
      return event;
    }
  }
  throw new WebhookVerificationError("no signature matches the secret");
}
