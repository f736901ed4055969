const PROBE_MS = 2000;
const HEARTBEAT_MS = 10000;
function randomId(bytes) {
    const b = new Uint8Array(bytes);
    crypto.getRandomValues(b);
    return btoa(String.fromCharCode(...b))
        .replace(/\+/g, "-")
        .replace(/\//g, "_")
        .replace(/=+$/, "");
}
function keptId(storage, key) {
    try {
        let id = storage().getItem(key);
        if (!id || !/^[A-Za-z0-9_-]{16,64}$/.test(id)) {
            id = randomId(16);
            storage().setItem(key, id);
        }
        return id;
    }
    catch {
        return randomId(16);
    }
}
export function errorReason(data) {
    const code = data.response?.code;
    if (code === 401 || code === 403)
        return "not_allowed";
    if (/^manifest/i.test(data.details ?? ""))
        return "manifest";
    if (data.type === "networkError")
        return "network";
    if (data.type === "mediaError" || data.type === "muxError")
        return "media";
    return "other";
}
export function renditionName(level) {
    if (!level)
        return null;
    const url = String((Array.isArray(level.url) ? level.url[0] : level.url) ?? level.uri ?? "");
    if (/(^|\/)v0\.m3u8(\?|$)/.test(url))
        return "source";
    return level.height ? `${level.height}p` : null;
}
export function behindLabel(seconds) {
    const s = Math.max(0, Math.round(seconds));
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const two = (n) => String(n).padStart(2, "0");
    return h > 0 ? `-${h}:${two(m)}:${two(s % 60)}` : `-${m}:${two(s % 60)}`;
}
function levelLabel(level) {
    const name = level.height ? `${level.height}p` : "Source";
    return level.bitrate ? `${name} (${(level.bitrate / 1e6).toFixed(1)} Mbit/s)` : name;
}
async function newestSegment(url) {
    const text = async (u) => {
        const r = await fetch(u, { cache: "no-store" });
        if (!r.ok)
            throw new Error(`HTTP ${r.status}`);
        return r.text();
    };
    let media = await text(url);
    if (media.includes("#EXT-X-STREAM-INF")) {
        const lines = media.split(/\r?\n/);
        const at = lines.findIndex((l) => l.startsWith("#EXT-X-STREAM-INF"));
        const uri = lines.slice(at + 1).find((l) => l.trim() && !l.startsWith("#"));
        if (!uri)
            return null;
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
const MESSAGES = {
    connecting: "",
    live: "",
    reconnecting: "Reconnecting…",
    ended: "This broadcast has ended.",
};
const Element = (typeof HTMLElement === "undefined" ? class {
} : HTMLElement);
export class LivePlayer extends Element {
    static Hls;
    static get observedAttributes() {
        return ["src", "recording", "autoplay", "muted", "controls", "poster"];
    }
    video;
    message;
    bar;
    quality;
    latencyText;
    dvrBar;
    dvrRange;
    dvrBehind;
    liveButton;
    onDvr = false;
    dvrTarget = 0;
    dragging = false;
    hls = null;
    liveState = "connecting";
    edgeSN = null;
    edgeChangedAt = 0;
    targetDuration = 2;
    staleSN = null;
    reconnectingSince = 0;
    timer;
    ticker;
    connected = false;
    lastRendition = undefined;
    viewStarted = false;
    heartbeat;
    askedAt = null;
    view = {
        startupMs: null,
        playedSeconds: 0,
        rebufferCount: 0,
        rebufferSeconds: 0,
        rendition: null,
        error: null,
    };
    lastTime = null;
    stallStart = null;
    onPageHide = () => this.endView();
    onPageShow = (e) => {
        if (!e.persisted || this.askedAt === null || this.hasAttribute("recording"))
            return;
        Object.assign(this.view, { playedSeconds: 0, rebufferCount: 0, rebufferSeconds: 0 });
        this.stallStart = null;
        this.startView();
    };
    constructor() {
        super();
        const shadow = this.attachShadow({ mode: "open" });
        let style = null;
        if ("adoptedStyleSheets" in shadow && typeof CSSStyleSheet.prototype.replaceSync === "function") {
            const sheet = new CSSStyleSheet();
            sheet.replaceSync(STYLE);
            shadow.adoptedStyleSheets = [sheet];
        }
        else {
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
        if (style)
            shadow.append(style);
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
            if (!this.hls)
                return;
            const level = parseInt(this.quality.value, 10);
            this.hls.currentLevel = isNaN(level) ? -1 : level;
            this.labelAuto();
        });
        this.listenToVideo();
    }
    get state() {
        return this.liveState;
    }
    get renditions() {
        const levels = this.hls?.levels ?? [];
        return levels
            .map((l, index) => ({ index, name: renditionName(l), height: l.height, bitrate: l.bitrate }))
            .sort((a, b) => b.bitrate - a.bitrate);
    }
    get rendition() {
        return renditionName(this.hls?.levels[this.hls.currentLevel]);
    }
    set level(index) {
        if (this.hls)
            this.hls.currentLevel = index;
        this.quality.value = String(index);
        this.labelAuto();
    }
    get latency() {
        const hls = this.hls;
        if (!hls)
            return null;
        const date = hls.playingDate;
        if (date && !isNaN(date.getTime()))
            return Math.max(0, (Date.now() - date.getTime()) / 1000);
        return typeof hls.latency === "number" && isFinite(hls.latency) ? hls.latency : null;
    }
    get stats() {
        const hls = this.hls;
        if (!hls)
            return null;
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
    get report() {
        return { ...this.view, rebufferSeconds: this.stalledSeconds(), rendition: this.rendition };
    }
    connectedCallback() {
        this.connected = true;
        window.addEventListener("pagehide", this.onPageHide);
        window.addEventListener("pageshow", this.onPageShow);
        this.applyMediaAttributes();
        this.load();
    }
    disconnectedCallback() {
        this.connected = false;
        window.removeEventListener("pagehide", this.onPageHide);
        window.removeEventListener("pageshow", this.onPageShow);
        this.endView();
        this.stop();
    }
    attributeChangedCallback(name, old, value) {
        if (!this.connected || old === value)
            return;
        if (name === "src" || name === "recording") {
            this.liveState = "connecting";
            this.load();
        }
        else {
            this.applyMediaAttributes();
        }
    }
    get behindLive() {
        const v = this.video;
        if (!this.hls || v.seekable.length === 0)
            return null;
        const behind = v.seekable.end(v.seekable.length - 1) - v.currentTime;
        return Math.max(0, behind - (this.onDvr ? 0 : this.liveOffset()));
    }
    get rewound() {
        return this.onDvr;
    }
    available() {
        if (!this.getAttribute("dvr-src"))
            return 0;
        const window = Number(this.getAttribute("dvr-window") ?? 0);
        const since = Number(this.getAttribute("dvr-since") ?? 0);
        let seconds = since > 0 ? Date.now() / 1000 - since : 0;
        const v = this.video;
        if (this.onDvr && v.seekable.length)
            seconds = v.seekable.end(v.seekable.length - 1) - v.seekable.start(0);
        return Math.max(0, Math.floor(window > 0 ? Math.min(window, seconds) : seconds));
    }
    rewind(seconds) {
        const dvr = this.getAttribute("dvr-src");
        if (!dvr || this.hasAttribute("recording") || this.liveState === "ended")
            return;
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
    goLive() {
        if (this.hasAttribute("recording") || this.liveState === "ended")
            return;
        if (this.onDvr) {
            this.onDvr = false;
            this.load();
        }
        else if (this.hls && this.video.seekable.length) {
            const v = this.video;
            v.currentTime = v.seekable.end(v.seekable.length - 1) - this.liveOffset();
        }
        this.showDvr();
    }
    end() {
        this.stop();
        this.setState("ended");
    }
    applyMediaAttributes() {
        const v = this.video;
        v.muted = this.hasAttribute("muted");
        v.controls = this.hasAttribute("controls");
        v.autoplay = this.hasAttribute("autoplay");
        const poster = this.getAttribute("poster");
        if (poster)
            v.poster = poster;
        else
            v.removeAttribute("poster");
    }
    get Hls() {
        return LivePlayer.Hls ?? window.Hls;
    }
    emit(type, detail) {
        this.dispatchEvent(new CustomEvent(type, { detail }));
    }
    say(text) {
        this.message.textContent = text;
        this.message.hidden = !text;
    }
    setState(state) {
        if (this.liveState === state)
            return;
        this.liveState = state;
        this.dataset.state = state;
        this.say(MESSAGES[state]);
        if (state === "reconnecting")
            this.reconnectingSince = Date.now();
        if (state === "ended")
            this.dvrBar.hidden = true;
        this.emit("statechange", { state });
        if (state === "ended")
            this.emit("ended", null);
    }
    fail(reason) {
        this.view.error = reason;
        this.emit("error", { reason });
    }
    stop() {
        clearTimeout(this.timer);
        clearInterval(this.ticker);
        this.edgeChangedAt = 0;
        this.bar.hidden = true;
        if (this.hls) {
            this.hls.destroy();
            this.hls = null;
        }
    }
    start() {
        if (this.hasAttribute("autoplay"))
            this.video.play().catch(() => { });
    }
    load() {
        this.stop();
        const recording = this.hasAttribute("recording");
        if (recording || !this.getAttribute("dvr-src"))
            this.onDvr = false;
        const src = this.onDvr ? this.getAttribute("dvr-src") : this.getAttribute("src");
        if (!src || this.liveState === "ended")
            return;
        if (this.askedAt === null)
            this.askedAt = performance.now();
        if (!recording)
            this.startView();
        const Hls = this.Hls;
        if (recording && !/\.m3u8$/.test(new URL(src, location.href).pathname)) {
            this.video.src = src;
            this.seekToStart();
            this.start();
        }
        else if (Hls && Hls.isSupported()) {
            const hls = new Hls(this.config(!recording));
            this.hls = hls;
            hls.on(Hls.Events.ERROR, (_, data) => {
                if (!data.fatal)
                    return;
                if (this.onDvr) {
                    this.onDvr = false;
                    this.removeAttribute("dvr-src");
                    this.load();
                    return;
                }
                this.fail(errorReason(data));
                if (recording) {
                    this.stop();
                    this.say("The recording cannot be played.");
                }
                else {
                    this.reconnect();
                }
            });
            hls.on(Hls.Events.MANIFEST_PARSED, () => {
                if (this.hasAttribute("controls") && !recording)
                    this.showQualities();
                this.showDvr();
                this.start();
            });
            hls.on(Hls.Events.LEVEL_SWITCHED, () => {
                this.labelAuto();
                this.renditionChanged();
            });
            if (!recording) {
                hls.on(Hls.Events.LEVEL_LOADED, (_, data) => this.onPlaylist(data.details));
                hls.on(Hls.Events.FRAG_BUFFERED, () => {
                    if (this.liveState !== "ended")
                        this.setState("live");
                });
                this.ticker = setInterval(() => this.tick(), 1000);
            }
            if (this.onDvr) {
                hls.on(Hls.Events.LEVEL_LOADED, (_, data) => {
                    const total = data.details?.totalduration;
                    const behind = this.dvrTarget;
                    this.dvrTarget = 0;
                    if (!(behind > 0) || typeof total !== "number")
                        return;
                    const at = Math.max(0, total - behind);
                    const seek = () => {
                        if (Math.abs(this.video.currentTime - at) > 2)
                            this.video.currentTime = at;
                    };
                    if (this.video.readyState >= 1)
                        seek();
                    else
                        this.video.addEventListener("loadedmetadata", seek, { once: true });
                });
            }
            hls.loadSource(src);
            hls.attachMedia(this.video);
        }
        else if (this.video.canPlayType("application/vnd.apple.mpegurl")) {
            this.video.src = src;
            if (recording)
                this.seekToStart();
            this.start();
            if (!recording)
                this.setState("live");
        }
        else {
            this.say("This browser cannot play HLS.");
            this.fail("other");
        }
    }
    config(live) {
        if (live && this.onDvr) {
            const startPosition = Math.max(0, this.available() - this.dvrTarget);
            return { enableWorker: false, lowLatencyMode: false, capLevelToPlayerSize: false, startPosition };
        }
        const config = { enableWorker: false, lowLatencyMode: live, capLevelToPlayerSize: false };
        const low = this.getAttribute("latency-mode") === "low";
        if (live && !low)
            config.liveSyncDurationCount = 2.5;
        if (live && low) {
            Object.assign(config, { liveSyncDuration: 1.5, liveMaxLatencyDuration: 5, maxLiveSyncPlaybackRate: 1.2, backBufferLength: 10 });
        }
        if (!live && this.startSeconds() > 0)
            config.startPosition = this.startSeconds();
        return config;
    }
    startSeconds() {
        const start = Number(this.getAttribute("start"));
        return Number.isFinite(start) && start > 0 ? start : 0;
    }
    seekToStart() {
        const start = this.startSeconds();
        if (start === 0)
            return;
        this.video.addEventListener("loadedmetadata", () => {
            const end = Number.isFinite(this.video.duration) ? this.video.duration : start;
            this.video.currentTime = Math.min(start, end);
        }, { once: true });
    }
    onPlaylist(details) {
        if (!details)
            return;
        if (!details.live) {
            if (this.liveState === "live")
                this.end();
            return;
        }
        if (details.targetduration)
            this.targetDuration = details.targetduration;
        if (details.endSN !== undefined && details.endSN !== this.edgeSN) {
            this.edgeSN = details.endSN;
            this.edgeChangedAt = Date.now();
        }
    }
    liveOffset() {
        return this.getAttribute("latency-mode") === "low" ? 1.5 : 2.5 * this.targetDuration;
    }
    showDvr() {
        const shown = this.hasAttribute("controls") &&
            !this.hasAttribute("recording") &&
            !!this.getAttribute("dvr-src") &&
            this.liveState !== "ended" &&
            this.available() > 0;
        this.dvrBar.hidden = !shown;
        if (!shown || this.dragging)
            return;
        const available = this.available();
        const behind = Math.min(available, this.behindLive ?? 0);
        this.dvrRange.max = String(available);
        this.dvrRange.value = String(Math.round(available - behind));
        const atEdge = !this.onDvr && behind < this.targetDuration * 2;
        this.liveButton.setAttribute("aria-pressed", String(atEdge));
        this.dvrBehind.textContent = atEdge ? "" : behindLabel(behind);
    }
    tick() {
        const latency = this.latency;
        this.latencyText.textContent = this.onDvr || latency === null ? "" : `${latency.toFixed(1)} s behind live`;
        this.showDvr();
        if (this.liveState !== "live" || !this.edgeChangedAt)
            return;
        const limit = Math.max(2.5 * this.targetDuration, 4) * 1000;
        if (Date.now() - this.edgeChangedAt > limit)
            this.reconnect();
    }
    reconnect() {
        if (this.liveState === "ended")
            return;
        this.onDvr = false;
        this.staleSN = this.edgeSN;
        this.stop();
        this.setState("reconnecting");
        this.timer = setTimeout(() => this.probe(), PROBE_MS);
    }
    probe() {
        if (this.liveState !== "reconnecting")
            return;
        const windowSeconds = Number(this.getAttribute("reconnect-window") ?? 60);
        if (Date.now() - this.reconnectingSince > windowSeconds * 1000) {
            this.end();
            return;
        }
        const src = this.getAttribute("src");
        if (!src)
            return;
        newestSegment(src).then((sn) => {
            if (this.liveState !== "reconnecting")
                return;
            if (sn !== null && (this.staleSN === null || sn > this.staleSN))
                this.load();
            else
                this.timer = setTimeout(() => this.probe(), PROBE_MS);
        }, () => {
            if (this.liveState === "reconnecting")
                this.timer = setTimeout(() => this.probe(), PROBE_MS);
        });
    }
    showQualities() {
        const hls = this.hls;
        if (!hls)
            return;
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
    labelAuto() {
        const auto = this.quality.querySelector('option[value="-1"]');
        const level = this.hls?.levels[this.hls.currentLevel];
        if (auto)
            auto.textContent = this.hls?.autoLevelEnabled && level ? `Auto (${levelLabel(level)})` : "Auto";
    }
    renditionChanged() {
        const rendition = this.rendition;
        if (rendition === this.lastRendition)
            return;
        this.lastRendition = rendition;
        this.emit("qualitychange", { rendition, auto: this.hls?.autoLevelEnabled ?? true });
    }
    stalledSeconds() {
        const open = this.stallStart === null ? 0 : (performance.now() - this.stallStart) / 1000;
        return Math.round((this.view.rebufferSeconds + open) * 1000) / 1000;
    }
    listenToVideo() {
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
                if (delta > 0 && delta < 2)
                    this.view.playedSeconds += delta;
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
            if (this.view.startupMs === null || v.seeking || this.stallStart !== null)
                return;
            this.view.rebufferCount += 1;
            this.stallStart = performance.now();
        });
        v.addEventListener("playing", () => {
            this.closeStall();
            this.emit("playing", null);
        });
    }
    closeStall() {
        if (this.stallStart !== null)
            this.view.rebufferSeconds += (performance.now() - this.stallStart) / 1000;
        this.stallStart = null;
    }
    beaconUrl() {
        const base = this.getAttribute("base-url");
        if (base === null || !this.getAttribute("broadcast"))
            return null;
        return new URL("/api/views", new URL(base, location.href)).href;
    }
    sendView(event) {
        const url = this.beaconUrl();
        if (!url)
            return;
        const broadcast = this.getAttribute("broadcast");
        const body = {
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
            if (exp && sig)
                Object.assign(body, { exp, sig });
        }
        catch {
        }
        const text = JSON.stringify(body);
        if (navigator.sendBeacon?.(url, text))
            return;
        fetch(url, { method: "POST", body: text, keepalive: true, mode: "no-cors" }).catch(() => { });
    }
    startView() {
        if (this.viewStarted)
            return;
        this.viewStarted = true;
        this.sendView("start");
        this.heartbeat = setInterval(() => this.sendView("heartbeat"), HEARTBEAT_MS);
    }
    endView() {
        if (!this.viewStarted)
            return;
        this.viewStarted = false;
        clearInterval(this.heartbeat);
        this.sendView("end");
    }
}
export function defineLivePlayer(name = "live-player") {
    if (typeof customElements !== "undefined" && !customElements.get(name)) {
        customElements.define(name, LivePlayer);
    }
}
defineLivePlayer();
