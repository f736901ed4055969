import type { components, operations } from "./generated/api.js";
import type { Api } from "./clients.js";
import { PlatformError } from "./errors.js";

type Broadcast = components["schemas"]["Broadcast"];
type NewBroadcast = NonNullable<
  operations["post-broadcasts"]["requestBody"]
>["content"]["application/json"];

/** What a broadcaster needs to go on air: the broadcast, OBS's settings and LiveKit's. */
export interface StreamSetup {
  broadcast: Broadcast;
  /** OBS: Settings → Stream → Service "Custom": `server` and the stream `key`. */
  obs: { server: string; key: string };
  /**
   * LiveKit: connect to `url` with `token` (a publisher token for the broadcast's room);
   * null when none was asked for, or when the platform has no SFU and it was not required
   * (the broadcast then goes on air over RTMP only).
   */
  livekit: { url: string; token: string; room: string } | null;
}

export interface StreamOptions {
  /**
   * The LiveKit publisher token: `"auto"` (the default) asks for one and goes without when
   * the platform has no SFU (503 `sfu_not_configured`); `true` requires one; `false` asks
   * for none (RTMP only).
   */
  livekit?: boolean | "auto";
}

/** The spec's intervals: a heartbeat every 30 s, the viewer count every 5 s. */
export const HEARTBEAT_INTERVAL_MS = 30_000;
export const VIEWER_COUNT_INTERVAL_MS = 5_000;

/**
 * Creates a broadcast as the signed-in user (an app client's `api`) and answers its OBS
 * settings and, unless told not to, a LiveKit publisher token, in one call.
 *
 * The token is asked for once the broadcast exists (it names the broadcast's room). When
 * that fails, the broadcast is closed (status `error`) before the failure is thrown, so
 * that no pending broadcast is left behind.
 */
export async function createStream(
  api: Api,
  body: NewBroadcast,
  options: StreamOptions = {},
): Promise<StreamSetup> {
  const wanted = options.livekit ?? "auto";
  const { data: broadcast } = await api.POST("/api/broadcasts", { body });
  if (!broadcast) throw new Error("the platform answered without a broadcast");
  let livekit: StreamSetup["livekit"] = null;
  if (wanted !== false) {
    try {
      livekit = await publisherGrant(api, broadcast.id, wanted === "auto");
    } catch (error) {
      await api
        .POST("/api/broadcasts/{id}/status", {
          params: { path: { id: broadcast.id } },
          body: { status: "error" },
        })
        .catch((closing: unknown) => {
          // Both failures matter: the broadcast is still pending.
          throw new AggregateError(
            [error, closing],
            `no LiveKit token for broadcast ${broadcast.id}, and it could not be closed`,
          );
        });
      throw error;
    }
  }
  const rtmpUrl = broadcast.rtmpUrl ?? "";
  const key = broadcast.streamKey ?? "";
  const server = rtmpUrl.endsWith(`/${key}`) ? rtmpUrl.slice(0, -key.length - 1) : rtmpUrl;
  return { broadcast, obs: { server, key }, livekit };
}

/** A publisher token for the broadcast's room; null when `optional` and there is no SFU. */
async function publisherGrant(
  api: Api,
  broadcastId: string,
  optional: boolean,
): Promise<StreamSetup["livekit"]> {
  try {
    const { data: grant } = await api.POST("/api/streaming/sessions/{id}/token", {
      params: { path: { id: broadcastId } },
      body: { role: "publisher" },
    });
    if (!grant) throw new Error("the platform answered without a token");
    return { url: grant.serverUrl, token: grant.token, room: grant.room };
  } catch (error) {
    if (optional && error instanceof PlatformError && error.code === "sfu_not_configured") return null;
    throw error;
  }
}

export interface LiveOptions {
  /** The audience now (asked every 5 s and reported); none to report nothing. */
  viewerCount?: () => number;
  /** A report or heartbeat failed (the loop goes on). */
  onError?: (error: unknown) => void;
  heartbeatIntervalMs?: number;
  viewerCountIntervalMs?: number;
}

/** A broadcast on air: its heartbeat and viewer reports run until {@link Live.stop}. */
export interface Live {
  /** Stops the loops and completes the broadcast (or moves it to `error`). */
  stop(status?: "completed" | "error"): Promise<Broadcast>;
}

/**
 * Moves the broadcast to `active`, then sends its heartbeat every 30 s and its viewer count
 * every 5 s (without them the platform closes it after 90 s), until stopped.
 */
export async function goLive(api: Api, broadcastId: string, options: LiveOptions = {}): Promise<Live> {
  const path = { params: { path: { id: broadcastId } } };
  await api.POST("/api/broadcasts/{id}/status", { ...path, body: { status: "active" } });
  // Reports in flight: stop() waits for them, so that none lands after the broadcast ended.
  const inFlight = new Set<Promise<unknown>>();
  const report = (work: () => Promise<unknown>) => () => {
    const sent = work().catch((error) => options.onError?.(error));
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
  };
  const timers = [
    setInterval(
      report(() => api.POST("/api/sessions/{id}/heartbeat", path)),
      options.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS,
    ),
  ];
  const count = options.viewerCount;
  if (count) {
    timers.push(
      setInterval(
        report(() =>
          api.POST("/api/broadcasts/{id}/viewer-count", { ...path, body: { viewerCount: count() } }),
        ),
        options.viewerCountIntervalMs ?? VIEWER_COUNT_INTERVAL_MS,
      ),
    );
  }
  return {
    async stop(status = "completed") {
      for (const timer of timers) clearInterval(timer);
      await Promise.allSettled([...inFlight]);
      const { data } = await api.POST("/api/broadcasts/{id}/status", { ...path, body: { status } });
      if (!data) throw new Error("the platform answered without a broadcast");
      return data;
    },
  };
}
