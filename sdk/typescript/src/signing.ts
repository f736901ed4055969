/**
 * The tenant's server signs its calls: `X-Signature` is the hex HMAC-SHA256, keyed with
 * the secret key, of METHOD + PATH (with its query) + BODY + TIMESTAMP, and `X-Timestamp`
 * the epoch seconds. It uses WebCrypto, present in Node 20+, browsers and workers.
 */
export async function signature(
  secretKey: string,
  method: string,
  pathAndQuery: string,
  body: string,
  timestamp: number,
): Promise<string> {
  const encoder = new TextEncoder();
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secretKey),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const message = encoder.encode(`${method.toUpperCase()}${pathAndQuery}${body}${timestamp}`);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, message));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A random token (hex) for nonces and idempotency keys. */
export function randomToken(bytes = 16): string {
  const buffer = new Uint8Array(bytes);
  crypto.getRandomValues(buffer);
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("");
}
