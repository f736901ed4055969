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
        if (style)
            shadow.append(style);
        shadow.append(this.video, this.message, this.bar);
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
        const src = this.getAttribute("src");
        if (!src || this.liveState === "ended")
            return;
        const recording = this.hasAttribute("recording");
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
    tick() {
        const latency = this.latency;
        this.latencyText.textContent = latency === null ? "" : `${latency.toFixed(1)} s behind live`;
        if (this.liveState !== "live" || !this.edgeChangedAt)
            return;
        const limit = Math.max(2.5 * this.targetDuration, 4) * 1000;
        if (Date.now() - this.edgeChangedAt > limit)
            this.reconnect();
    }
    reconnect() {
        if (this.liveState === "ended")
            return;
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
