import { PlatformError, retryAfterSeconds } from "./errors.js";
import { IDEMPOTENT_ROUTES } from "./generated/contract.js";
import { randomToken } from "./signing.js";

/** How failed calls are retried: 429 and 503 (honouring `Retry-After`), and lost connections. */
export interface RetryPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  /** The first wait; each next one doubles, with up to 50 % random jitter. */
  baseDelayMs: number;
  /** The longest wait, `Retry-After` included. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 250, maxDelayMs: 10_000 };

/** One attempt of a call, for a client to add its credentials to. */
export interface Attempt {
  method: string;
  url: URL;
  headers: Headers;
  body: string;
  /** 1 for the first attempt. */
  number: number;
}

export interface TransportOptions {
  fetch?: typeof fetch;
  retry?: Partial<RetryPolicy>;
  /** Adds the credentials to an attempt (called for every attempt: signatures expire). */
  authorize(attempt: Attempt): void | Promise<void>;
  /**
   * A 401 came back for `attempt`. Answer true when the credentials were renewed (a
   * refreshed token): the call is then sent once more.
   */
  renew?(problem: PlatformError, attempt: Attempt): Promise<boolean>;
  /** Give money-moving calls an `Idempotency-Key` (the same on every retry). */
  idempotencyKeys?: boolean;
  sleep?: (ms: number) => Promise<void>;
}

/** A route template as a pattern: `/api/broadcasts/{id}/gifts` matches `/api/broadcasts/x/gifts`. */
function templatePattern(template: string): RegExp {
  const escaped = template
    .split(/\{[^}]+\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[^/]+");
  return new RegExp(`^${escaped}$`);
}

const IDEMPOTENT = IDEMPOTENT_ROUTES.map((route) => {
  const [method, template] = route.split(" ") as [string, string];
  return { method, pattern: templatePattern(template) };
});

/** Whether a call moves money (its route takes an `Idempotency-Key`). */
export function movesMoney(method: string, path: string): boolean {
  return IDEMPOTENT.some((r) => r.method === method.toUpperCase() && r.pattern.test(path));
}

const SAFE_TO_REPEAT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

/**
 * The `fetch` the typed clients send through: credentials on every attempt, retries with
 * backoff on 429 and 503 (`Retry-After` honoured) and on lost connections when repeating
 * the call is safe (a read, a PUT or DELETE, or a call with an `Idempotency-Key`), one
 * renewal on 401, and a {@link PlatformError} thrown for any other failure.
 */
export function createTransport(options: TransportOptions): (input: Request) => Promise<Response> {
  const policy = { ...DEFAULT_RETRY, ...options.retry };
  const send = options.fetch ?? globalThis.fetch.bind(globalThis);
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const backoff = (attempt: number, retryAfter?: number) => {
    if (retryAfter !== undefined) return Math.min(retryAfter * 1000, policy.maxDelayMs);
    const base = policy.baseDelayMs * 2 ** (attempt - 1);
    return Math.min(base * (1 + Math.random() * 0.5), policy.maxDelayMs);
  };

  return async (input: Request) => {
    const method = input.method.toUpperCase();
    const body = method === "GET" || method === "HEAD" ? "" : await input.text();
    const headers = new Headers(input.headers);
    const path = new URL(input.url).pathname;
    if (options.idempotencyKeys && movesMoney(method, path) && !headers.has("idempotency-key")) {
      headers.set("idempotency-key", randomToken());
    }
    const repeatable = SAFE_TO_REPEAT.has(method) || headers.has("idempotency-key");
    let renewed = false;
    for (let number = 1; ; number++) {
      const attempt: Attempt = {
        method,
        url: new URL(input.url),
        headers: new Headers(headers),
        body,
        number,
      };
      await options.authorize(attempt);
      let response: Response;
      try {
        response = await send(
          new Request(attempt.url, {
            method,
            headers: attempt.headers,
            body: body === "" ? undefined : body,
            signal: input.signal,
          }),
        );
      } catch (error) {
        if (!repeatable || number >= policy.attempts || input.signal?.aborted) throw error;
        await sleep(backoff(number));
        continue;
      }
      if (response.ok) return response;
      const retryable = response.status === 429 || (response.status === 503 && repeatable);
      if (retryable && number < policy.attempts) {
        await response.body?.cancel();
        await sleep(backoff(number, retryAfterSeconds(response.headers)));
        continue;
      }
      const problem = await PlatformError.fromResponse(response);
      if (response.status === 401 && options.renew && !renewed) {
        renewed = true;
        if (await options.renew(problem, attempt)) {
          number--;
          continue;
        }
      }
      throw problem;
    }
  };
}
