import type { components, operations } from "./generated/api.js";
import type { Api } from "./clients.js";

/** A clip, as `GET /api/clips/{id}` answers it. */
export type Clip = components["schemas"]["Clip"];
/** `{startOffset, duration}` or `{lastSeconds}`, and an optional `title`. */
export type NewClip = NonNullable<
  operations["post-broadcasts_by-id-clips"]["requestBody"]
>["content"]["application/json"];

/**
 * Clips 5 to 120 seconds of a broadcast (docs/replays.md#clips): `{lastSeconds}` while
 * live ("clip that"), or `{startOffset, duration}` in the replay's seconds. Works with an
 * app client's `api` (the owner, or a viewer where the tenant lets viewers clip) and a
 * server client's. Answers the clip, `processing`.
 */
export async function createClip(api: Api, broadcastId: string, body: NewClip): Promise<Clip> {
  const { data } = await api.POST("/api/broadcasts/{id}/clips", {
    params: { path: { id: broadcastId } },
    body,
  });
  if (!data) throw new Error("the platform answered without a clip");
  return data;
}

/** One page of a broadcast's clips, newest first. */
export async function listClips(
  api: Api,
  broadcastId: string,
  page: { limit?: number; offset?: number } = {},
): Promise<{ items: Clip[]; total: number; limit: number; offset: number }> {
  const { data } = await api.GET("/api/broadcasts/{id}/clips", {
    params: { path: { id: broadcastId }, query: page },
  });
  if (!data) throw new Error("the platform answered without a page");
  return data;
}

/** A clip that failed (`error`: `out_of_range`, `no_media`, ...). */
export class ClipFailedError extends Error {
  constructor(readonly clip: Clip) {
    super(`clip ${clip.id} failed: ${clip.error ?? "unknown"}`);
    this.name = "ClipFailedError";
  }
}

export interface WaitForClipOptions {
  /** Give up after this long (default 90 s). */
  timeoutMs?: number;
  /** How often to ask (default 1 s). */
  intervalMs?: number;
}

/**
 * Waits until the clip plays: `"hls"` (its `hlsUrl`, within seconds) or `"mp4"` (ready,
 * its `mp4Url`, within a minute). Throws {@link ClipFailedError} when it failed, and an
 * error when it is not there in time.
 */
export async function waitForClip(
  api: Api,
  clipId: string,
  until: "hls" | "mp4" = "mp4",
  options: WaitForClipOptions = {},
): Promise<Clip> {
  const deadline = Date.now() + (options.timeoutMs ?? 90_000);
  for (;;) {
    const { data: clip } = await api.GET("/api/clips/{id}", { params: { path: { id: clipId } } });
    if (!clip) throw new Error("the platform answered without a clip");
    if (clip.state === "failed") throw new ClipFailedError(clip);
    if (until === "hls" ? clip.hlsUrl : clip.mp4Url) return clip;
    if (Date.now() >= deadline) {
      throw new Error(`clip ${clipId} is not ${until === "hls" ? "playable" : "ready"} yet`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 1_000));
  }
}
