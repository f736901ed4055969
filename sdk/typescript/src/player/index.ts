/**
 * `<live-player>`: a broadcast's live player for a tenant's own page. The platform's watch
 * and embed pages play the same way (static/watch.js): hls.js, the quality menu from the
 * adaptive ladder, the honest live state and the view beacon.
 *
 * ```html
 * <script src="hls.light.min.js"></script>  <!-- or set LivePlayer.Hls -->
 * <script type="module" src="node_modules/@live-platform/sdk/dist/esm/player/index.js"></script>
 * <live-player src="https://media.example.com/hls/<streamId>/index.m3u8" broadcast="<shortId>"
 *              base-url="https://live.example.com" autoplay muted controls></live-player>
 * ```
 *
 * The live state (`state`, the `statechange` event): `live` while the playlist advances;
 * `reconnecting` once it has not for two and a half target durations, or after a fatal
 * network error (the frame on screen is let go rather than shown as live); back to `live`
 * by itself, at the live edge, once the playlist lists a segment newer than the last one
 * seen; `ended` when the playlist ends, when the source stays away longer than the
 * reconnect window (`reconnect-window`, 60 s as the platform's default), or on `end()`.
 */

/** What the element needs of hls.js (`window.Hls`, or `LivePlayer.Hls`). */
export interface HlsLevel {
  height?: number;
  width?: number;
  bitrate: number;
  url?: string | string[];
  uri?: string;
}
export interface HlsInstance {
  levels: HlsLevel[];
  currentLevel: number;
  autoLevelEnabled: boolean;
  loadSource(url: string): void;
  attachMedia(media: HTMLMediaElement): void;
  destroy(): void;
  on(event: string, listener: (event: string, data: any) => void): void;
}
export interface HlsConstructor {
  new (config?: Record<string, unknown>): HlsInstance;
  isSupported(): boolean;
  Events: Record<string, string>;
}

/** The player's live state. */
export type LiveState = "connecting" | "live" | "reconnecting" | "ended";
/** A fatal playback failure, as the view beacon names it. */
export type PlaybackError = "network" | "media" | "manifest" | "not_allowed" | "other";

/** The element's DOM events and their `detail`. */
export interface LivePlayerEventMap {
  playing: CustomEvent<null>;
  waiting: CustomEvent<null>;
  qualitychange: CustomEvent<{ rendition: string | null; auto: boolean }>;
  statechange: CustomEvent<{ state: LiveState }>;
  ended: CustomEvent<null>;
  error: CustomEvent<{ reason: PlaybackError }>;
}

/** What the view beacon reports (POST {base-url}/api/views). */
export interface ViewReport {
  startupMs: number | null;
  playedSeconds: number;
  rebufferCount: number;
  rebufferSeconds: number;
  rendition: string | null;
  error: PlaybackError | null;
}

const PROBE_MS = 2000;
const HEARTBEAT_MS = 10000;

/** A random id of `bytes` bytes, base64url. */
function randomId(bytes: number): string {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  return btoa(String.fromCharCode(...b))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

/** An id kept in `storage` under `key` (a fresh one when storage is unavailable). */
function keptId(storage: () => Storage, key: string): string {
  try {
    let id = storage().getItem(key);
    if (!id || !/^[A-Za-z0-9_-]{16,64}$/.test(id)) {
      id = randomId(16);
      storage().setItem(key, id);
    }
    return id;
  } catch {
    return randomId(16);
  }
}

/** The contract's reason for a fatal hls.js error. */
export function errorReason(data: { type?: string; details?: string; response?: { code?: number } }): PlaybackError {
  const code = data.response?.code;
  if (code === 401 || code === 403) return "not_allowed";
  if (/^manifest/i.test(data.details ?? "")) return "manifest";
  if (data.type === "networkError") return "network";
  if (data.type === "mediaError" || data.type === "muxError") return "media";
  return "other";
}

/** A level's ladder name: the first media playlist (`v0`) is the source, the others by height. */
export function renditionName(level: HlsLevel | undefined): string | null {
  if (!level) return null;
  const url = String((Array.isArray(level.url) ? level.url[0] : level.url) ?? level.uri ?? "");
  if (/(^|\/)v0\.m3u8(\?|$)/.test(url)) return "source";
  return level.height ? `${level.height}p` : null;
}

/** The newest segment's number in the stream's first media playlist (null if none). */
async function newestSegment(url: string): Promise<number | null> {
  const text = async (u: string) => {
    const r = await fetch(u, { cache: "no-store" });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    return r.text();
  };
  let media = await text(url);
  if (media.includes("#EXT-X-STREAM-INF")) {
    const lines = media.split(/\r?\n/);
    const at = lines.findIndex((l) => l.startsWith("#EXT-X-STREAM-INF"));
    const uri = lines.slice(at + 1).find((l) => l.trim() && !l.startsWith("#"));
    if (!uri) return null;
    media = await text(new URL(uri.trim(), url).href);
  }
  const seq = /#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(media);
  const count = media.split(/\r?\n/).filter((l) => l.trim() && !l.trim().startsWith("#")).length;
  return seq && count ? parseInt(seq[1], 10) + count - 1 : null;
}

const STYLE = `
:host { display: block; position: relative; background: #000; color: #fff; aspect-ratio: 16 / 9; font: 14px system-ui, sans-serif; }
video { width: 100%; height: 100%; display: block; object-fit: contain; background: #000; }
.message { position: absolute; inset: 0; margin: 0; display: flex; align-items: center; justify-content: center; background: rgba(0,0,0,.6); text-align: center; padding: 1em; }
.bar { position: absolute; top: 8px; right: 8px; display: flex; gap: 8px; align-items: center; background: rgba(0,0,0,.55); padding: 4px 8px; border-radius: 6px; }
[hidden] { display: none !important; }
`;

const MESSAGES: Record<LiveState, string> = {
  connecting: "",
  live: "",
  reconnecting: "Reconnecting…",
  ended: "This broadcast has ended.",
};

// Outside a browser (Node, server rendering) the module loads and defines nothing.
const Element = (typeof HTMLElement === "undefined" ? class {} : HTMLElement) as typeof HTMLElement;

/** The `<live-player>` element. */
export class LivePlayer extends Element {
  /** hls.js, when the page does not provide `window.Hls`. */
  static Hls: HlsConstructor | undefined;
  static get observedAttributes(): string[] {
    return ["src", "autoplay", "muted", "controls", "poster"];
  }

  readonly video: HTMLVideoElement;
  private readonly message: HTMLParagraphElement;
  private readonly bar: HTMLDivElement;
  private readonly quality: HTMLSelectElement;
  private hls: HlsInstance | null = null;
  private liveState: LiveState = "connecting";
  private edgeSN: number | null = null;
  private edgeChangedAt = 0;
  private targetDuration = 2;
  private staleSN: number | null = null;
  private reconnectingSince = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private watchdog: ReturnType<typeof setInterval> | undefined;
  private connected = false;
  private lastRendition: string | null | undefined = undefined;
  // The view beacon.
  private viewStarted = false;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private askedAt: number | null = null;
  private view: ViewReport = {
    startupMs: null,
    playedSeconds: 0,
    rebufferCount: 0,
    rebufferSeconds: 0,
    rendition: null,
    error: null,
  };
  private lastTime: number | null = null;
  private stallStart: number | null = null;
  private readonly onPageHide = () => this.endView();

  constructor() {
    super();
    const shadow = this.attachShadow({ mode: "open" });
    const style = document.createElement("style");
    style.textContent = STYLE;
    this.video = document.createElement("video");
    this.video.playsInline = true;
    this.message = document.createElement("p");
    this.message.className = "message";
    this.message.setAttribute("part", "message");
    this.message.hidden = true;
    this.bar = document.createElement("div");
    this.bar.className = "bar";
    this.bar.setAttribute("part", "bar");
    this.bar.hidden = true;
    const label = document.createElement("label");
    label.textContent = "Quality ";
    this.quality = document.createElement("select");
    this.quality.setAttribute("part", "quality");
    label.appendChild(this.quality);
    this.bar.appendChild(label);
    shadow.append(style, this.video, this.message, this.bar);
    this.quality.addEventListener("change", () => {
      if (!this.hls) return;
      const level = parseInt(this.quality.value, 10);
      this.hls.currentLevel = isNaN(level) ? -1 : level;
    });
    this.listenToVideo();
  }

  /** The live state now. */
  get state(): LiveState {
    return this.liveState;
  }

  /** The renditions, highest first, and the one playing. */
  get renditions(): { index: number; name: string | null; height?: number; bitrate: number }[] {
    const levels = this.hls?.levels ?? [];
    return levels
      .map((l, index) => ({ index, name: renditionName(l), height: l.height, bitrate: l.bitrate }))
      .sort((a, b) => b.bitrate - a.bitrate);
  }

  /** The rendition on screen, by its ladder name (`720p`, `source`). */
  get rendition(): string | null {
    return renditionName(this.hls?.levels[this.hls.currentLevel]);
  }

  /** Pins a rendition by its index in hls.js's levels, or -1 for Auto. */
  set level(index: number) {
    if (this.hls) this.hls.currentLevel = index;
    this.quality.value = String(index);
  }

  /** What the view beacon reports next. */
  get report(): ViewReport {
    return { ...this.view, rebufferSeconds: this.stalledSeconds(), rendition: this.rendition };
  }

  connectedCallback(): void {
    this.connected = true;
    window.addEventListener("pagehide", this.onPageHide);
    this.applyMediaAttributes();
    this.load();
  }

  disconnectedCallback(): void {
    this.connected = false;
    window.removeEventListener("pagehide", this.onPageHide);
    this.endView();
    this.stop();
  }

  attributeChangedCallback(name: string, old: string | null, value: string | null): void {
    if (!this.connected || old === value) return;
    if (name === "src") {
      this.setState("connecting");
      this.load();
    } else {
      this.applyMediaAttributes();
    }
  }

  /** The broadcast has ended (e.g. the app heard so from the platform). */
  end(): void {
    this.stop();
    this.setState("ended");
  }

  private applyMediaAttributes(): void {
    const v = this.video;
    v.muted = this.hasAttribute("muted");
    v.controls = this.hasAttribute("controls");
    v.autoplay = this.hasAttribute("autoplay");
    const poster = this.getAttribute("poster");
    if (poster) v.poster = poster;
    else v.removeAttribute("poster");
  }

  private get Hls(): HlsConstructor | undefined {
    return LivePlayer.Hls ?? (window as unknown as { Hls?: HlsConstructor }).Hls;
  }

  private emit<K extends keyof LivePlayerEventMap>(type: K, detail: LivePlayerEventMap[K]["detail"]): void {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  private setState(state: LiveState): void {
    if (this.liveState === state) return;
    this.liveState = state;
    this.dataset.state = state;
    this.message.textContent = MESSAGES[state];
    this.message.hidden = !MESSAGES[state];
    if (state === "reconnecting") this.reconnectingSince = Date.now();
    this.emit("statechange", { state });
    if (state === "ended") this.emit("ended", null);
  }

  private fail(reason: PlaybackError): void {
    this.view.error = reason;
    this.emit("error", { reason });
  }

  private stop(): void {
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    this.edgeChangedAt = 0;
    this.bar.hidden = true;
    if (this.hls) {
      this.hls.destroy();
      this.hls = null;
    }
  }

  private load(): void {
    this.stop();
    const src = this.getAttribute("src");
    if (!src || this.liveState === "ended") return;
    if (this.askedAt === null) this.askedAt = performance.now();
    this.startView();
    const Hls = this.Hls;
    if (Hls && Hls.isSupported()) {
      const hls = new Hls({ enableWorker: false, lowLatencyMode: true, liveSyncDurationCount: 2.5 });
      this.hls = hls;
      hls.on(Hls.Events.ERROR, (_, data) => {
        if (!data.fatal) return;
        this.fail(errorReason(data));
        this.reconnect();
      });
      hls.on(Hls.Events.MANIFEST_PARSED, () => {
        if (this.hasAttribute("controls")) this.showQualities();
        if (this.hasAttribute("autoplay")) this.video.play().catch(() => {});
      });
      hls.on(Hls.Events.LEVEL_LOADED, (_, data) => this.onPlaylist(data.details));
      // Live once a fragment of this load is in: the live edge, not a stale frame.
      hls.on(Hls.Events.FRAG_BUFFERED, () => {
        if (this.liveState !== "ended") this.setState("live");
      });
      hls.on(Hls.Events.LEVEL_SWITCHED, () => this.renditionChanged());
      hls.loadSource(src);
      hls.attachMedia(this.video);
      this.watchdog = setInterval(() => this.checkEdge(), 1000);
    } else if (this.video.canPlayType("application/vnd.apple.mpegurl")) {
      this.video.src = src;
      this.setState("live");
    } else {
      this.fail("other");
    }
  }

  private onPlaylist(details: { live?: boolean; endSN?: number; targetduration?: number } | undefined): void {
    if (!details) return;
    if (!details.live) {
      // The playlist ended (#EXT-X-ENDLIST): so did the broadcast.
      if (this.liveState === "live") this.end();
      return;
    }
    if (details.targetduration) this.targetDuration = details.targetduration;
    if (details.endSN !== undefined && details.endSN !== this.edgeSN) {
      this.edgeSN = details.endSN;
      this.edgeChangedAt = Date.now();
    }
  }

  /** Every second: a playlist that stopped advancing is a stopped source. */
  private checkEdge(): void {
    if (this.liveState !== "live" || !this.edgeChangedAt) return;
    const limit = Math.max(2.5 * this.targetDuration, 4) * 1000;
    if (Date.now() - this.edgeChangedAt > limit) this.reconnect();
  }

  private reconnect(): void {
    if (this.liveState === "ended") return;
    this.staleSN = this.edgeSN;
    this.stop();
    this.setState("reconnecting");
    this.timer = setTimeout(() => this.probe(), PROBE_MS);
  }

  /** Reads the playlist until it moves past the stale edge; then loads it afresh. */
  private probe(): void {
    if (this.liveState !== "reconnecting") return;
    const windowSeconds = Number(this.getAttribute("reconnect-window") ?? 60);
    if (Date.now() - this.reconnectingSince > windowSeconds * 1000) {
      this.end();
      return;
    }
    const src = this.getAttribute("src");
    if (!src) return;
    newestSegment(src).then(
      (sn) => {
        if (this.liveState !== "reconnecting") return;
        if (sn !== null && (this.staleSN === null || sn > this.staleSN)) this.load();
        else this.timer = setTimeout(() => this.probe(), PROBE_MS);
      },
      () => {
        if (this.liveState === "reconnecting") this.timer = setTimeout(() => this.probe(), PROBE_MS);
      },
    );
  }

  /** The quality menu: Auto, then each rendition, highest first. */
  private showQualities(): void {
    const hls = this.hls;
    if (!hls) return;
    this.quality.textContent = "";
    const auto = document.createElement("option");
    auto.value = "-1";
    auto.textContent = "Auto";
    this.quality.appendChild(auto);
    for (const r of this.renditions) {
      const option = document.createElement("option");
      option.value = String(r.index);
      const rate = r.bitrate ? ` (${(r.bitrate / 1e6).toFixed(1)} Mbit/s)` : "";
      option.textContent = (r.name === "source" ? "Source" : r.name ?? "Source") + rate;
      this.quality.appendChild(option);
    }
    this.quality.value = hls.autoLevelEnabled ? "-1" : String(hls.currentLevel);
    this.bar.hidden = false;
  }

  private renditionChanged(): void {
    const rendition = this.rendition;
    if (rendition === this.lastRendition) return;
    this.lastRendition = rendition;
    this.emit("qualitychange", { rendition, auto: this.hls?.autoLevelEnabled ?? true });
  }

  private stalledSeconds(): number {
    const open = this.stallStart === null ? 0 : (performance.now() - this.stallStart) / 1000;
    return Math.round((this.view.rebufferSeconds + open) * 1000) / 1000;
  }

  private listenToVideo(): void {
    const v = this.video;
    v.addEventListener("loadeddata", () => {
      if (this.view.startupMs === null && this.askedAt !== null) {
        this.view.startupMs = Math.round(performance.now() - this.askedAt);
      }
    });
    v.addEventListener("timeupdate", () => {
      const t = v.currentTime;
      if (this.lastTime !== null && !v.seeking) {
        const delta = t - this.lastTime;
        if (delta > 0 && delta < 2) this.view.playedSeconds += delta;
      }
      this.lastTime = t;
    });
    v.addEventListener("seeking", () => {
      this.lastTime = null;
    });
    v.addEventListener("emptied", () => {
      this.lastTime = null;
      this.closeStall();
    });
    v.addEventListener("waiting", () => {
      this.emit("waiting", null);
      if (this.view.startupMs === null || v.seeking || this.stallStart !== null) return;
      this.view.rebufferCount += 1;
      this.stallStart = performance.now();
    });
    v.addEventListener("playing", () => {
      this.closeStall();
      this.emit("playing", null);
    });
  }

  private closeStall(): void {
    if (this.stallStart !== null) this.view.rebufferSeconds += (performance.now() - this.stallStart) / 1000;
    this.stallStart = null;
  }

  /** The view beacon: only with `broadcast` and `base-url`. */
  private beaconUrl(): string | null {
    const base = this.getAttribute("base-url");
    if (!base || !this.getAttribute("broadcast")) return null;
    return new URL("/api/views", base).href;
  }

  private sendView(event: "start" | "heartbeat" | "end"): void {
    const url = this.beaconUrl();
    if (!url) return;
    const broadcast = this.getAttribute("broadcast") as string;
    const body: Record<string, unknown> = {
      viewId: keptId(() => sessionStorage, `livePlatform.view.${broadcast}`),
      viewerId: keptId(() => localStorage, "livePlatform.viewer"),
      broadcast,
      event,
      ...this.report,
      playedSeconds: Math.round(this.view.playedSeconds * 1000) / 1000,
    };
    try {
      const query = new URL(this.getAttribute("src") ?? "", location.href).searchParams;
      const exp = query.get("exp");
      const sig = query.get("sig");
      if (exp && sig) Object.assign(body, { exp, sig });
    } catch {
      // No signature to pass on.
    }
    const text = JSON.stringify(body);
    if (navigator.sendBeacon?.(url, text)) return;
    fetch(url, { method: "POST", body: text, keepalive: true, mode: "no-cors" }).catch(() => {});
  }

  private startView(): void {
    if (this.viewStarted) return;
    this.viewStarted = true;
    this.sendView("start");
    this.heartbeat = setInterval(() => this.sendView("heartbeat"), HEARTBEAT_MS);
  }

  private endView(): void {
    if (!this.viewStarted) return;
    this.viewStarted = false;
    clearInterval(this.heartbeat);
    this.sendView("end");
  }
}

declare global {
  interface HTMLElementTagNameMap {
    "live-player": LivePlayer;
  }
}

/** Defines `<live-player>` (once; importing this module does it in a browser). */
export function defineLivePlayer(name = "live-player"): void {
  if (typeof customElements !== "undefined" && !customElements.get(name)) {
    customElements.define(name, LivePlayer);
  }
}

defineLivePlayer();
