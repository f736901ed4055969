import type { components } from "./generated/api.js";
import type { components as socket } from "./generated/socket.js";
import { PlatformError } from "./errors.js";

/** A stored chat message, as the API and the socket carry it. */
export type ChatMessage = components["schemas"]["ChatMessage"];
/** A stream's real-time event: reactions, status, co-hosts and layout, viewers, gifts, moderation. */
export type RealtimeEvent = socket["schemas"]["RealtimeEvent"];
export type RealtimeEventKind = RealtimeEvent["kind"];
type GeneratedFrame = socket["schemas"]["ServerFrame"];
/** A frame the relay sends (messages typed as the API's records). */
export type ServerFrame =
  | { type: "history"; messages: ChatMessage[] }
  | { type: "message" | "held"; message: ChatMessage }
  | Exclude<GeneratedFrame, { type: "history" | "message" | "held" }>;
export type ErrorFrame = Extract<GeneratedFrame, { type: "error" }>;

export type ChatState = "connecting" | "open" | "reconnecting" | "closed";

export interface ChatListeners {
  /** A message, once, in order (across reconnects too). */
  message: (message: ChatMessage) => void;
  /** Held for review: only the sender sees it. */
  held: (message: ChatMessage) => void;
  deleted: (id: string) => void;
  event: (event: RealtimeEvent) => void;
  /** The socket accepted a renewed token. */
  authenticated: (frame: Extract<GeneratedFrame, { type: "authenticated" }>) => void;
  /** An error frame (a refused send, an expired token) or a failed reconnect. */
  error: (error: ErrorFrame | Error) => void;
  state: (state: ChatState) => void;
}

export interface ChatOptions {
  /** The platform's origin: the socket is `/ws/streams/{id}/chat` there (ws for http). */
  baseUrl: string;
  /** Where the socket is, when the relay has another origin than the API. */
  socketUrl?: string;
  streamId: string;
  /** The tenant's API key (REST history, and the socket of a read-only guest). */
  apiKey: string;
  /** The user's current token, asked at every (re)connect; none for a read-only guest. */
  token?: () => string | undefined | Promise<string | undefined>;
  /**
   * A fresh token for a socket whose token is about to expire (sent as an `auth` frame a
   * minute before); e.g. `() => app.refresh().then((s) => s.token)`.
   */
  renewToken?: () => Promise<string>;
  /** How long before the token expires it is renewed (default a minute). */
  renewAheadMs?: number;
  /** A socket ticket, for clients that require signed calls. */
  ticket?: () => Promise<string | undefined>;
  WebSocket?: typeof WebSocket;
  fetch?: typeof fetch;
  /** Reconnect waits: from `initialMs`, doubling, at most `maxMs` (with jitter). */
  backoff?: { initialMs?: number; maxMs?: number };
}

type Listener<K extends keyof ChatListeners> = ChatListeners[K];

/** The newest messages the history frame carries; a fuller gap is read over REST. */
const HISTORY_FRAME = 50;
const REST_PAGE = 200;

/**
 * How long a JWT lives (`exp - iat`, seconds), if it says: measured from when it was
 * received, so that a skewed clock does not matter.
 */
function jwtLifetime(token: string): number | undefined {
  try {
    const payload = token.split(".")[1] ?? "";
    const json = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
    const { exp, iat } = JSON.parse(json) as { exp?: unknown; iat?: unknown };
    return typeof exp === "number" && typeof iat === "number" ? exp - iat : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A stream's chat and events over the relay's socket, kept open: it reconnects with
 * backoff when the socket drops, and fills what it missed from the history (the socket's
 * history frame, and REST pages when the gap is longer), so that each message is delivered
 * once and in order. It renews the user's token over the socket before it expires.
 */
export class ChatConnection {
  private readonly options: ChatOptions;
  private readonly listeners: { [K in keyof ChatListeners]: Set<Listener<K>> } = {
    message: new Set(),
    held: new Set(),
    deleted: new Set(),
    event: new Set(),
    authenticated: new Set(),
    error: new Set(),
    state: new Set(),
  };
  private socket: WebSocket | undefined;
  private readonly seen = new Set<string>();
  private last: ChatMessage | undefined;
  private closedByUser = false;
  private failures = 0;
  private renewTimer: ReturnType<typeof setTimeout> | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private outbox: string[] = [];
  state: ChatState = "connecting";

  constructor(options: ChatOptions) {
    this.options = options;
    void this.connect();
  }

  on<K extends keyof ChatListeners>(kind: K, listener: Listener<K>): () => void {
    this.listeners[kind].add(listener);
    return () => this.listeners[kind].delete(listener);
  }

  /** Sends a message (queued while reconnecting). */
  send(text: string): void {
    this.transmit(JSON.stringify({ type: "message", message: text }));
  }

  /** Deletes a message (the sender, the owner or a moderator may). */
  delete(id: string): void {
    this.transmit(JSON.stringify({ type: "delete", id }));
  }

  /** Closes the socket for good. */
  close(): void {
    this.closedByUser = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.reconnectTimer);
    this.socket?.close(1000);
    this.setState("closed");
  }

  private emit<K extends keyof ChatListeners>(kind: K, ...args: Parameters<ChatListeners[K]>): void {
    for (const listener of this.listeners[kind]) {
      (listener as (...a: Parameters<ChatListeners[K]>) => void)(...args);
    }
  }

  private setState(state: ChatState): void {
    if (this.state === state) return;
    this.state = state;
    this.emit("state", state);
  }

  private transmit(frame: string): void {
    if (this.socket && this.socket.readyState === 1 && this.state === "open") {
      this.socket.send(frame);
    } else {
      this.outbox.push(frame);
    }
  }

  private async socketUrl(): Promise<string> {
    const base = new URL(this.options.socketUrl ?? this.options.baseUrl);
    base.protocol = base.protocol === "https:" ? "wss:" : base.protocol === "http:" ? "ws:" : base.protocol;
    const url = new URL(`/ws/streams/${encodeURIComponent(this.options.streamId)}/chat`, base);
    // Events that reach the socket together come in one `batch` frame.
    url.searchParams.set("batch", "1");
    const token = await this.options.token?.();
    if (token) url.searchParams.set("token", token);
    else url.searchParams.set("apiKey", this.options.apiKey);
    const ticket = await this.options.ticket?.();
    if (ticket) url.searchParams.set("ticket", ticket);
    return url.toString();
  }

  private async connect(): Promise<void> {
    if (this.closedByUser) return;
    const Socket = this.options.WebSocket ?? globalThis.WebSocket;
    if (!Socket) throw new Error("no WebSocket: pass options.WebSocket (e.g. from the ws package)");
    let socket: WebSocket;
    try {
      socket = new Socket(await this.socketUrl());
    } catch (error) {
      this.emit("error", error as Error);
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    let opened = false;
    socket.onmessage = (message) => {
      const frame = JSON.parse(String(message.data)) as ServerFrame;
      if (frame.type === "history") {
        opened = true;
        this.failures = 0;
        void this.catchUp(frame.messages).then(() => {
          this.setState("open");
          const queued = this.outbox;
          this.outbox = [];
          for (const f of queued) socket.send(f);
        });
        void this.scheduleRenewal();
        return;
      }
      if (frame.type === "batch") {
        for (const f of frame.frames) this.handle(f as ServerFrame);
        return;
      }
      this.handle(frame);
    };
    // Some WebSocket implementations (Node 20's) report a failed connection with an
    // error and never a close: either ends this socket, once.
    let ended = false;
    const lost = () => {
      if (ended) return;
      ended = true;
      clearTimeout(this.renewTimer);
      if (this.closedByUser) return;
      if (!opened) this.failures++;
      this.scheduleReconnect();
    };
    socket.onclose = lost;
    socket.onerror = () => {
      if (opened || ended) return;
      lost();
      try {
        // (Node's close() of a failed socket reports the error again: ended is set.)
        socket.close();
      } catch {
        // Not open yet: nothing to close.
      }
    };
  }

  private scheduleReconnect(): void {
    if (this.closedByUser) return;
    this.setState("reconnecting");
    const initial = this.options.backoff?.initialMs ?? 500;
    const max = this.options.backoff?.maxMs ?? 15_000;
    const wait = Math.min(initial * 2 ** this.failures, max) * (1 + Math.random() * 0.3);
    this.reconnectTimer = setTimeout(() => void this.connect(), wait);
  }

  private handle(frame: ServerFrame): void {
    switch (frame.type) {
      case "message":
        this.deliver(frame.message);
        break;
      case "held":
        this.emit("held", frame.message);
        break;
      case "deleted":
        this.emit("deleted", frame.id);
        break;
      case "event":
        if (frame.event.kind === "chat_message") {
          this.deliver(frame.event.message as unknown as ChatMessage);
        } else if (frame.event.kind === "chat_deleted") {
          this.emit("deleted", frame.event.id);
        } else {
          this.emit("event", frame.event);
        }
        break;
      case "error":
        this.emit("error", frame);
        break;
      case "authenticated":
        this.emit("authenticated", frame);
        break;
      default:
        break;
    }
  }

  private deliver(message: ChatMessage): void {
    if (this.seen.has(message.id)) return;
    this.seen.add(message.id);
    this.last = message;
    this.emit("message", message);
  }

  /**
   * Delivers what was missed: the history frame's messages, and, when the last message
   * seen is older than all of them (a long gap), the REST pages between.
   */
  private async catchUp(history: ChatMessage[]): Promise<void> {
    const last = this.last;
    const reachesBack = !last || history.length < HISTORY_FRAME || history.some((m) => m.id === last.id);
    let missed = history;
    if (!reachesBack) {
      try {
        missed = await this.readBack(last.id);
      } catch (error) {
        this.emit("error", error as Error);
      }
    }
    for (const message of missed) this.deliver(message);
  }

  /** The messages after `lastId`, oldest first, read back page by page over REST. */
  private async readBack(lastId: string): Promise<ChatMessage[]> {
    const send = this.options.fetch ?? globalThis.fetch.bind(globalThis);
    const token = await this.options.token?.();
    const newestFirst: ChatMessage[] = [];
    for (let offset = 0; ; offset += REST_PAGE) {
      const url = new URL(`/api/streams/${encodeURIComponent(this.options.streamId)}/chat`, this.options.baseUrl);
      url.searchParams.set("limit", String(REST_PAGE));
      url.searchParams.set("offset", String(offset));
      const headers: Record<string, string> = { "x-api-key": this.options.apiKey };
      if (token) headers.authorization = `Bearer ${token}`;
      const response = await send(url, { headers });
      if (!response.ok) throw await PlatformError.fromResponse(response);
      const page = (await response.json()) as { items: ChatMessage[] };
      // Each page is oldest first; walk it newest first until the last message seen.
      for (const message of [...page.items].reverse()) {
        if (message.id === lastId) return newestFirst.reverse();
        newestFirst.push(message);
      }
      if (page.items.length < REST_PAGE) return newestFirst.reverse();
    }
  }

  /** Sends a fresh token (an `auth` frame) before the socket's one expires. */
  private async scheduleRenewal(token?: string): Promise<void> {
    clearTimeout(this.renewTimer);
    if (!this.options.renewToken) return;
    const current = token ?? (await this.options.token?.());
    const lifetime = current ? jwtLifetime(current) : undefined;
    if (lifetime === undefined) return;
    // Never sooner than a second: a token that lives less than the margin is not renewed
    // in a tight loop.
    const wait = Math.max(1_000, lifetime * 1000 - (this.options.renewAheadMs ?? 60_000));
    this.renewTimer = setTimeout(async () => {
      try {
        const fresh = await this.options.renewToken?.();
        if (fresh) {
          this.socket?.send(JSON.stringify({ type: "auth", token: fresh }));
          void this.scheduleRenewal(fresh);
        }
      } catch (error) {
        this.emit("error", error as Error);
      }
    }, wait);
  }
}

/** Opens a stream's chat (see {@link ChatConnection}). */
export function connectChat(options: ChatOptions): ChatConnection {
  return new ChatConnection(options);
}
