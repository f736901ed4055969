import createClient, { type Client } from "openapi-fetch";
import type { components, operations, paths } from "./generated/api.js";
import { type RetryPolicy, createTransport } from "./transport.js";
import { randomToken, signature } from "./signing.js";
import { PlatformError } from "./errors.js";

/** The typed API: `api.GET("/api/broadcasts/{id}", { params: { path: { id } } })`. */
export type Api = Client<paths>;

/** What every client takes. */
export interface ClientOptions {
  /** The platform's origin, e.g. `https://live.example.com`. */
  baseUrl: string;
  /** The tenant's public API key (`pk_...`). */
  apiKey: string;
  /** Another `fetch` (tests, React Native polyfills). */
  fetch?: typeof fetch;
  retry?: Partial<RetryPolicy>;
}

/** A signed-in user's tokens, as log-in and refresh answer them. */
export interface Session {
  token: string;
  refreshToken: string;
  /** Seconds the access token lives from when it was issued. */
  expiresIn?: number;
  user?: components["schemas"]["AuthSession"]["user"];
}

type SignUpBody = operations["post-users-signup"]["requestBody"]["content"]["application/json"];
type LogInBody = NonNullable<
  operations["post-users-login"]["requestBody"]
>["content"]["application/json"];

export interface AppClientOptions extends ClientOptions {
  /** A session kept from before (e.g. from storage). */
  session?: Session;
  /** Called whenever the session changes (log-in, refresh, log-out): persist it here. */
  onSession?: (session: Session | null) => void;
}

export interface AppClient {
  api: Api;
  /** The current session, if signed in. */
  readonly session: Session | null;
  signUp(body: SignUpBody): Promise<Session>;
  logIn(body: LogInBody): Promise<Session>;
  /** Trades the refresh token for new tokens (done by itself when a call gets `token_expired`). */
  refresh(): Promise<Session>;
  /** Forgets the session (the tokens stay valid until they expire). */
  logOut(): void;
}

type AuthAnswer = components["schemas"]["AuthSession"];

function sessionOf(answer: AuthAnswer): Session {
  return {
    token: answer.token,
    refreshToken: answer.refreshToken,
    expiresIn: answer.expiresIn,
    user: answer.user,
  };
}

/** `data` of a call that succeeded (the transport throws for any failure). */
function dataOf<T>(result: { data?: T }): T {
  if (result.data === undefined) throw new Error("the platform answered without a body");
  return result.data;
}

/**
 * The client for browser and mobile apps: the API key, and the user's token once signed
 * in. A call answered 401 `token_expired` refreshes the tokens (once for concurrent
 * calls) and is sent again.
 */
export function createAppClient(options: AppClientOptions): AppClient {
  let session: Session | null = options.session ?? null;
  let refreshing: Promise<Session> | null = null;
  const setSession = (next: Session | null) => {
    session = next;
    options.onSession?.(next);
  };
  const send = options.fetch ?? globalThis.fetch.bind(globalThis);

  const refresh = (): Promise<Session> => {
    refreshing ??= (async () => {
      const current = session;
      if (!current) throw new Error("not signed in");
      const response = await send(new URL("/api/users/refresh", options.baseUrl), {
        method: "POST",
        headers: { "x-api-key": options.apiKey, "content-type": "application/json" },
        body: JSON.stringify({ refreshToken: current.refreshToken }),
      });
      if (!response.ok) {
        const problem = await PlatformError.fromResponse(response);
        // A refresh token that is refused (reused, revoked, expired) ends the session.
        if (response.status === 401) setSession(null);
        throw problem;
      }
      const next = sessionOf((await response.json()) as AuthAnswer);
      setSession({ ...next, user: next.user ?? current.user });
      return session as Session;
    })().finally(() => {
      refreshing = null;
    });
    return refreshing;
  };

  const transport = createTransport({
    fetch: options.fetch,
    retry: options.retry,
    authorize(attempt) {
      attempt.headers.set("x-api-key", options.apiKey);
      if (session && !attempt.headers.has("authorization")) {
        attempt.headers.set("authorization", `Bearer ${session.token}`);
      }
    },
    async renew(problem, attempt) {
      if (problem.code !== "token_expired" || !session) return false;
      // Sent with a token that a concurrent call has already replaced: send it again with
      // the new one rather than refresh a second time.
      if (attempt.headers.get("authorization") !== `Bearer ${session.token}`) return true;
      await refresh();
      return true;
    },
  });
  const api = createClient<paths>({ baseUrl: options.baseUrl, fetch: transport });

  return {
    api,
    get session() {
      return session;
    },
    async signUp(body) {
      const answer = dataOf(await api.POST("/api/users/signup", { body }));
      setSession(sessionOf(answer));
      return session as Session;
    },
    async logIn(body) {
      const answer = dataOf(await api.POST("/api/users/login", { body }));
      setSession(sessionOf(answer));
      return session as Session;
    },
    refresh,
    logOut() {
      setSession(null);
    },
  };
}

export interface ServerClientOptions extends ClientOptions {
  /** The tenant's secret key (`sk_...`): only ever on the tenant's own servers. */
  secretKey: string;
  /** The clock signatures are stamped with (epoch milliseconds). */
  now?: () => number;
}

export interface ServerClient {
  api: Api;
}

/**
 * The client for the tenant's backend: every call signed (a fresh timestamp and nonce on
 * every attempt), money-moving calls given an `Idempotency-Key` that every retry reuses,
 * and 429/503 retried with backoff, honouring `Retry-After`.
 */
export function createServerClient(options: ServerClientOptions): ServerClient {
  const now = options.now ?? Date.now;
  const transport = createTransport({
    fetch: options.fetch,
    retry: options.retry,
    idempotencyKeys: true,
    async authorize(attempt) {
      // Two identical calls in one second would carry the same signature, which is
      // accepted once: the nonce (signed, otherwise ignored) tells attempts apart.
      attempt.url.searchParams.set("nonce", randomToken(8));
      const timestamp = Math.floor(now() / 1000);
      const target = attempt.url.pathname + attempt.url.search;
      attempt.headers.set("x-api-key", options.apiKey);
      attempt.headers.set("x-timestamp", String(timestamp));
      attempt.headers.set(
        "x-signature",
        await signature(options.secretKey, attempt.method, target, attempt.body, timestamp),
      );
    },
  });
  return { api: createClient<paths>({ baseUrl: options.baseUrl, fetch: transport }) };
}
