/**
 * `<live-player>`: a broadcast's player for a tenant's own page. The platform's watch and
 * embed pages run this same file (served as `static/live-player.js`): hls.js playback, the
 * quality menu from the adaptive ladder, the honest live state and the view beacon.
 *
 * ```html
 * <script src="hls.light.min.js"></script>  <!-- or set LivePlayer.Hls -->
 * <script type="module" src="node_modules/@live-platform/sdk/dist/esm/player/index.js"></script>
 * <live-player src="https://media.example.com/hls/<streamId>/index.m3u8" broadcast="<shortId>"
 *              base-url="https://live.example.com" autoplay muted controls></live-player>
 * ```
 *
 * The live state (`state`, the `statechange` event): `live` once a fragment loaded at the
 * live edge is in; `reconnecting` once the playlist has not advanced for two and a half
 * target durations, or after a fatal error (the frame on screen is let go rather than
 * shown as live); back to `live` by itself, at the live edge, once the playlist lists a
 * segment newer than the last one seen; `ended` when the playlist ends, when the source
 * stays away longer than the reconnect window (`reconnect-window`, 60 s as the platform's
 * default), or on `end()`. A `recording` plays from its start (or from `start`, in
 * seconds), without a live state.
 *
 * Rewind (DVR): with `dvr-src` (the broadcast's `dvr.hlsUrl`), `dvr-window` (its
 * `windowSeconds`) and `dvr-since` (when the show started, epoch seconds), the viewer can
 * go back to the start of the window (`rewind(seconds)`, or the bar's slider) and return
 * to the live edge (`goLive()`, the LIVE button). The live playlist plays until the viewer
 * goes back further than it reaches; only then does the player switch to the DVR
 * playlist, and back to the live one on LIVE: a viewer who does not rewind plays as near
 * the edge as before.
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
  bandwidthEstimate?: number;
  playingDate?: Date | null;
  latency?: number;
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

/** What plays: the renditions, the one on screen, whether hls.js chooses, the latency. */
export interface PlayerStats {
  levels: { width?: number; height?: number; bitrate: number }[];
  currentLevel: number;
  bitrate: number | null;
  height: number | null;
  auto: boolean;
  bandwidthEstimate: number | undefined;
  latency: number | null;
  currentTime: number;
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

/** How far behind live the rewind slider is: `-1:05:30`, `-4:10`. */
export function behindLabel(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const two = (n: number) => String(n).padStart(2, "0");
  return h > 0 ? `-${h}:${two(m)}:${two(s % 60)}` : `-${m}:${two(s % 60)}`;
}

/** A level as the quality menu shows it: `720p (2.7 Mbit/s)`. */
function levelLabel(level: HlsLevel): string {
  const name = level.height ? `${level.height}p` : "Source";
  return level.bitrate ? `${name} (${(level.bitrate / 1e6).toFixed(1)} Mbit/s)` : name;
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
:host { display: block; position: relative; background: #000; color: #c8c8d0; aspect-ratio: 16 / 9; font: 13px system-ui, sans-serif; }
video { width: 100%; height: 100%; display: block; object-fit: contain; background: #000; }
.message { position: absolute; inset: 0; margin: 0; display: flex; align-items: center; justify-content: center; padding: 1em; text-align: center; font-size: 20px; background: rgba(0,0,0,.7); }
.bar { position: absolute; top: 8px; right: 8px; z-index: 12; display: flex; gap: 8px; align-items: center; padding: 4px 8px; border-radius: 6px; background: rgba(0,0,0,.6); }
select { font: inherit; background: #17171e; color: #fff; border: 1px solid #4b4b55; border-radius: 4px; }
.dvr { position: absolute; left: 8px; right: 8px; bottom: 48px; z-index: 12; display: flex; gap: 8px; align-items: center; padding: 4px 8px; border-radius: 6px; background: rgba(0,0,0,.6); }
.dvr input { flex: 1; }
.dvr button { font: inherit; font-weight: 600; color: #fff; background: #4b4b55; border: 0; border-radius: 4px; padding: 2px 8px; cursor: pointer; }
.dvr button[aria-pressed="true"] { background: #d61f3a; }
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
    return ["src", "recording", "autoplay", "muted", "controls", "poster"];
  }

  readonly video: HTMLVideoElement;
  private readonly message: HTMLParagraphElement;
  private readonly bar: HTMLDivElement;
  private readonly quality: HTMLSelectElement;
  private readonly latencyText: HTMLSpanElement;
  private readonly dvrBar: HTMLDivElement;
  private readonly dvrRange: HTMLInputElement;
  private readonly dvrBehind: HTMLSpanElement;
  private readonly liveButton: HTMLButtonElement;
  /** Whether the DVR playlist plays (the viewer went back beyond the live one's reach). */
  private onDvr = false;
  /** Where a switch to the DVR playlist starts: seconds behind its newest segment. */
  private dvrTarget = 0;
  /** The slider is being moved: the ticker leaves it alone. */
  private dragging = false;
  private hls: HlsInstance | null = null;
  private liveState: LiveState = "connecting";
  private edgeSN: number | null = null;
  private edgeChangedAt = 0;
  private targetDuration = 2;
  private staleSN: number | null = null;
  private reconnectingSince = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private ticker: ReturnType<typeof setInterval> | undefined;
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
  // A page back from the back-forward cache sends `start` again: the platform counts its
  // figures from zero, as for a reload.
  private readonly onPageShow = (e: PageTransitionEvent) => {
    if (!e.persisted || this.askedAt === null || this.hasAttribute("recording")) return;
    Object.assign(this.view, { playedSeconds: 0, rebufferCount: 0, rebufferSeconds: 0 });
    this.stallStart = null;
    this.startView();
  };

  constructor() {
    super();
    const shadow = this.attachShadow({ mode: "open" });
    // A constructed style sheet: a page whose policy refuses inline styles (the platform's
    // pages) takes it too.
    let style: HTMLStyleElement | null = null;
    if ("adoptedStyleSheets" in shadow && typeof CSSStyleSheet.prototype.replaceSync === "function") {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(STYLE);
      shadow.adoptedStyleSheets = [sheet];
    } else {
      style = document.createElement("style");
      style.textContent = STYLE;
    }
    this.video = document.createElement("video");
    this.video.playsInline = true;
    this.video.setAttribute("part", "video");
    this.message = document.createElement("p");
    this.message.className = "message";
    this.message.setAttribute("part", "message");
    this.message.hidden = true;
    this.bar = document.createElement("div");
    this.bar.className = "bar";
    this.bar.setAttribute("part", "bar");
    this.bar.hidden = true;
    const label = document.createElement("label");
    label.textContent = "Quality";
    this.quality = document.createElement("select");
    this.quality.setAttribute("part", "quality");
    this.quality.setAttribute("aria-label", "Quality");
    this.latencyText = document.createElement("span");
    this.latencyText.setAttribute("part", "latency");
    this.bar.append(label, this.quality, this.latencyText);
    // Rewind: a slider over the DVR window (seconds behind live, the edge at its right)
    // and LIVE, pressed while at the edge.
    this.dvrBar = document.createElement("div");
    this.dvrBar.className = "dvr";
    this.dvrBar.setAttribute("part", "dvr");
    this.dvrBar.hidden = true;
    this.dvrRange = document.createElement("input");
    this.dvrRange.type = "range";
    this.dvrRange.min = "0";
    this.dvrRange.step = "1";
    this.dvrRange.setAttribute("part", "dvr-range");
    this.dvrRange.setAttribute("aria-label", "Rewind");
    this.dvrBehind = document.createElement("span");
    this.dvrBehind.setAttribute("part", "dvr-behind");
    this.liveButton = document.createElement("button");
    this.liveButton.type = "button";
    this.liveButton.textContent = "LIVE";
    this.liveButton.setAttribute("part", "live-button");
    this.liveButton.setAttribute("aria-pressed", "true");
    this.dvrBar.append(this.dvrRange, this.dvrBehind, this.liveButton);
    if (style) shadow.append(style);
    shadow.append(this.video, this.message, this.bar, this.dvrBar);
    this.dvrRange.addEventListener("input", () => {
      this.dragging = true;
      this.dvrBehind.textContent = behindLabel(this.available() - Number(this.dvrRange.value));
    });
    this.dvrRange.addEventListener("change", () => {
      this.dragging = false;
      this.rewind(this.available() - Number(this.dvrRange.value));
    });
    this.liveButton.addEventListener("click", () => this.goLive());
    this.quality.addEventListener("change", () => {
      if (!this.hls) return;
      const level = parseInt(this.quality.value, 10);
      // Auto hands the choice back to hls.js; a rendition is switched to at once.
      this.hls.currentLevel = isNaN(level) ? -1 : level;
      this.labelAuto();
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

  /** Pins a rendition by its index in `renditions`, or -1 for Auto. */
  set level(index: number) {
    if (this.hls) this.hls.currentLevel = index;
    this.quality.value = String(index);
    this.labelAuto();
  }

  /** Seconds between the wall time of the frame on screen and now (null if unknown). */
  get latency(): number | null {
    const hls = this.hls;
    if (!hls) return null;
    const date = hls.playingDate;
    if (date && !isNaN(date.getTime())) return Math.max(0, (Date.now() - date.getTime()) / 1000);
    return typeof hls.latency === "number" && isFinite(hls.latency) ? hls.latency : null;
  }

  /** What plays (null before hls.js has the stream). */
  get stats(): PlayerStats | null {
    const hls = this.hls;
    if (!hls) return null;
    const level = hls.levels[hls.currentLevel];
    return {
      levels: hls.levels.map((l) => ({ width: l.width, height: l.height, bitrate: l.bitrate })),
      currentLevel: hls.currentLevel,
      bitrate: level ? level.bitrate : null,
      height: level?.height ?? null,
      auto: hls.autoLevelEnabled,
      bandwidthEstimate: hls.bandwidthEstimate,
      latency: this.latency,
      currentTime: this.video.currentTime,
    };
  }

  /** What the view beacon reports next. */
  get report(): ViewReport {
    return { ...this.view, rebufferSeconds: this.stalledSeconds(), rendition: this.rendition };
  }

  connectedCallback(): void {
    this.connected = true;
    window.addEventListener("pagehide", this.onPageHide);
    window.addEventListener("pageshow", this.onPageShow);
    this.applyMediaAttributes();
    this.load();
  }

  disconnectedCallback(): void {
    this.connected = false;
    window.removeEventListener("pagehide", this.onPageHide);
    window.removeEventListener("pageshow", this.onPageShow);
    this.endView();
    this.stop();
  }

  attributeChangedCallback(name: string, old: string | null, value: string | null): void {
    if (!this.connected || old === value) return;
    if (name === "src" || name === "recording") {
      this.liveState = "connecting";
      this.load();
    } else {
      this.applyMediaAttributes();
    }
  }

  /** Seconds behind the live edge the picture is (0 at the edge; null before playback). */
  get behindLive(): number | null {
    const v = this.video;
    if (!this.hls || v.seekable.length === 0) return null;
    const behind = v.seekable.end(v.seekable.length - 1) - v.currentTime;
    return Math.max(0, behind - (this.onDvr ? 0 : this.liveOffset()));
  }

  /** Whether the DVR playlist plays (the viewer rewound beyond the live playlist). */
  get rewound(): boolean {
    return this.onDvr;
  }

  /** How far back the viewer can go now, in seconds (0 without `dvr-src`). */
  available(): number {
    if (!this.getAttribute("dvr-src")) return 0;
    const window = Number(this.getAttribute("dvr-window") ?? 0);
    const since = Number(this.getAttribute("dvr-since") ?? 0);
    let seconds = since > 0 ? Date.now() / 1000 - since : 0;
    const v = this.video;
    // On the DVR playlist, what it lists is what there is.
    if (this.onDvr && v.seekable.length) seconds = v.seekable.end(v.seekable.length - 1) - v.seekable.start(0);
    return Math.max(0, Math.floor(window > 0 ? Math.min(window, seconds) : seconds));
  }

  /** Goes `seconds` back from the live edge (within the DVR window): within the live
   * playlist's reach it seeks there; further back it plays the DVR playlist from there. */
  rewind(seconds: number): void {
    const dvr = this.getAttribute("dvr-src");
    if (!dvr || this.hasAttribute("recording") || this.liveState === "ended") return;
    const behind = Math.max(0, Math.min(seconds, this.available()));
    const v = this.video;
    if (behind < 1) {
      this.goLive();
      return;
    }
    if (v.seekable.length) {
      const start = v.seekable.start(0);
      const end = v.seekable.end(v.seekable.length - 1);
      const target = end - behind - (this.onDvr ? 0 : this.liveOffset());
      // Within the playlist playing now (a segment of margin at its oldest end).
      if (target >= start + this.targetDuration) {
        v.currentTime = target;
        this.showDvr();
        return;
      }
    }
    this.onDvr = true;
    this.dvrTarget = behind;
    this.load();
    this.showDvr();
  }

  /** Back to the live edge, on the live playlist. */
  goLive(): void {
    if (this.hasAttribute("recording") || this.liveState === "ended") return;
    if (this.onDvr) {
      this.onDvr = false;
      this.load();
    } else if (this.hls && this.video.seekable.length) {
      const v = this.video;
      v.currentTime = v.seekable.end(v.seekable.length - 1) - this.liveOffset();
    }
    this.showDvr();
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

  private say(text: string): void {
    this.message.textContent = text;
    this.message.hidden = !text;
  }

  private setState(state: LiveState): void {
    if (this.liveState === state) return;
    this.liveState = state;
    this.dataset.state = state;
    this.say(MESSAGES[state]);
    if (state === "reconnecting") this.reconnectingSince = Date.now();
    if (state === "ended") this.dvrBar.hidden = true;
    this.emit("statechange", { state });
    if (state === "ended") this.emit("ended", null);
  }

  private fail(reason: PlaybackError): void {
    this.view.error = reason;
    this.emit("error", { reason });
  }

  private stop(): void {
    clearTimeout(this.timer);
    clearInterval(this.ticker);
    this.edgeChangedAt = 0;
    this.bar.hidden = true;
    if (this.hls) {
      this.hls.destroy();
      this.hls = null;
    }
  }

  private start(): void {
    if (this.hasAttribute("autoplay")) this.video.play().catch(() => {});
  }

  private load(): void {
    this.stop();
    const recording = this.hasAttribute("recording");
    if (recording || !this.getAttribute("dvr-src")) this.onDvr = false;
    const src = this.onDvr ? this.getAttribute("dvr-src") : this.getAttribute("src");
    if (!src || this.liveState === "ended") return;
    if (this.askedAt === null) this.askedAt = performance.now();
    // Views are of the live broadcast: a recording is not counted.
    if (!recording) this.startView();
    const Hls = this.Hls;
    if (recording && !/\.m3u8$/.test(new URL(src, location.href).pathname)) {
      this.video.src = src; // an MP4 recording plays in the video element itself
      this.seekToStart();
      this.start();
    } else if (Hls && Hls.isSupported()) {
      const hls = new Hls(this.config(!recording));
      this.hls = hls;
      hls.on(Hls.Events.ERROR, (_, data) => {
        if (!data.fatal) return;
        if (this.onDvr) {
          // The DVR playlist cannot be played (not written yet, its signature expired):
          // back to the live edge, without rewinding.
          this.onDvr = false;
          this.removeAttribute("dvr-src");
          this.load();
          return;
        }
        this.fail(errorReason(data));
        if (recording) {
          this.stop();
          this.say("The recording cannot be played.");
        } else {
          this.reconnect();
        }
      });
      hls.on(Hls.Events.MANIFEST_PARSED, () => {
        if (this.hasAttribute("controls") && !recording) this.showQualities();
        this.showDvr();
        this.start();
      });
      hls.on(Hls.Events.LEVEL_SWITCHED, () => {
        this.labelAuto();
        this.renditionChanged();
      });
      if (!recording) {
        hls.on(Hls.Events.LEVEL_LOADED, (_, data) => this.onPlaylist(data.details));
        // Live once a fragment of this load is in: the live edge, not a stale frame.
        hls.on(Hls.Events.FRAG_BUFFERED, () => {
          if (this.liveState !== "ended") this.setState("live");
        });
        this.ticker = setInterval(() => this.tick(), 1000);
      }
      if (this.onDvr) {
        // Where the viewer asked to go: that far behind the DVR playlist's newest segment
        // (the start position guessed it from when the show started).
        hls.on(Hls.Events.LEVEL_LOADED, (_, data) => {
          const total = data.details?.totalduration;
          const behind = this.dvrTarget;
          this.dvrTarget = 0;
          if (!(behind > 0) || typeof total !== "number") return;
          const at = Math.max(0, total - behind);
          const seek = () => {
            if (Math.abs(this.video.currentTime - at) > 2) this.video.currentTime = at;
          };
          if (this.video.readyState >= 1) seek();
          else this.video.addEventListener("loadedmetadata", seek, { once: true });
        });
      }
      hls.loadSource(src);
      hls.attachMedia(this.video);
    } else if (this.video.canPlayType("application/vnd.apple.mpegurl")) {
      this.video.src = src;
      if (recording) this.seekToStart();
      this.start();
      if (!recording) this.setState("live");
    } else {
      this.say("This browser cannot play HLS.");
      this.fail("other");
    }
  }

  /** Standard: two and a half segments (5 s) behind the edge. Low (`latency-mode="low"`):
   * a second and a half behind, caught up by playing slightly faster when behind. */
  private config(live: boolean): Record<string, unknown> {
    if (live && this.onDvr) {
      // Rewound: wherever the viewer went, never pulled back toward the edge.
      const startPosition = Math.max(0, this.available() - this.dvrTarget);
      return { enableWorker: false, lowLatencyMode: false, capLevelToPlayerSize: false, startPosition };
    }
    const config: Record<string, unknown> = { enableWorker: false, lowLatencyMode: live, capLevelToPlayerSize: false };
    const low = this.getAttribute("latency-mode") === "low";
    // hls.js refuses a segment count mixed with durations: one or the other.
    if (live && !low) config.liveSyncDurationCount = 2.5;
    if (live && low) {
      Object.assign(config, { liveSyncDuration: 1.5, liveMaxLatencyDuration: 5, maxLiveSyncPlaybackRate: 1.2, backBufferLength: 10 });
    }
    if (!live && this.startSeconds() > 0) config.startPosition = this.startSeconds();
    return config;
  }

  /** A recording's `start` attribute: whole seconds from its beginning, 0 when absent or
   * not a number. */
  private startSeconds(): number {
    const start = Number(this.getAttribute("start"));
    return Number.isFinite(start) && start > 0 ? start : 0;
  }

  /** Moves a recording the video element plays itself to `start` once it can seek (never
   * past its end). */
  private seekToStart(): void {
    const start = this.startSeconds();
    if (start === 0) return;
    this.video.addEventListener(
      "loadedmetadata",
      () => {
        const end = Number.isFinite(this.video.duration) ? this.video.duration : start;
        this.video.currentTime = Math.min(start, end);
      },
      { once: true },
    );
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

  /** How far behind the live playlist's end hls.js holds the edge (its sync position). */
  private liveOffset(): number {
    return this.getAttribute("latency-mode") === "low" ? 1.5 : 2.5 * this.targetDuration;
  }

  /** The rewind controls, with the controls, while live and rewinding is offered. */
  private showDvr(): void {
    const shown =
      this.hasAttribute("controls") &&
      !this.hasAttribute("recording") &&
      !!this.getAttribute("dvr-src") &&
      this.liveState !== "ended" &&
      this.available() > 0;
    this.dvrBar.hidden = !shown;
    if (!shown || this.dragging) return;
    const available = this.available();
    const behind = Math.min(available, this.behindLive ?? 0);
    this.dvrRange.max = String(available);
    this.dvrRange.value = String(Math.round(available - behind));
    const atEdge = !this.onDvr && behind < this.targetDuration * 2;
    this.liveButton.setAttribute("aria-pressed", String(atEdge));
    this.dvrBehind.textContent = atEdge ? "" : behindLabel(behind);
  }

  /** Every second: the latency shown, and a playlist that stopped advancing is a stopped source. */
  private tick(): void {
    const latency = this.latency;
    this.latencyText.textContent = this.onDvr || latency === null ? "" : `${latency.toFixed(1)} s behind live`;
    this.showDvr();
    if (this.liveState !== "live" || !this.edgeChangedAt) return;
    const limit = Math.max(2.5 * this.targetDuration, 4) * 1000;
    if (Date.now() - this.edgeChangedAt > limit) this.reconnect();
  }

  private reconnect(): void {
    if (this.liveState === "ended") return;
    // Back from a stop, the player plays live again.
    this.onDvr = false;
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
      option.textContent = levelLabel(hls.levels[r.index]);
      this.quality.appendChild(option);
    }
    this.quality.value = hls.autoLevelEnabled ? "-1" : String(hls.currentLevel);
    this.bar.hidden = false;
  }

  /** Auto says which rendition it chose. */
  private labelAuto(): void {
    const auto = this.quality.querySelector('option[value="-1"]');
    const level = this.hls?.levels[this.hls.currentLevel];
    if (auto) auto.textContent = this.hls?.autoLevelEnabled && level ? `Auto (${levelLabel(level)})` : "Auto";
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
      // A stall after the first frame is a rebuffer.
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

  /** The view beacon's address: only with `broadcast` and `base-url` (`/` for the page's own origin). */
  private beaconUrl(): string | null {
    const base = this.getAttribute("base-url");
    if (base === null || !this.getAttribute("broadcast")) return null;
    return new URL("/api/views", new URL(base, location.href)).href;
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
