// Live phone screens: every <canvas data-screen> streams its phone over a websocket.
// Frames are binary (see devices/streaming/frames.py): "FWF1" + a JPEG, or "FWH1" + H.264 that the
// phone encoded (scrcpy), decoded here with WebCodecs; an empty payload means "unchanged, checked
// at this time". Each drawn frame is acked, so the server sends the newest JPEG (dropping stale
// ones) or moves a viewer that cannot keep up with H.264 to JPEG. A browser without WebCodecs, or
// whose decoder fails, asks for JPEG. Hidden pages pause. Interactive canvases send input (tap,
// long press, swipe, keys, text) with the sequence number and size of the frame it was aimed at;
// a tap is echoed on the screen at once, and the frame that first shows its effect is marked.
(function () {
  "use strict";
  const JPEG_HEADER_BYTES = 24;
  const VIDEO_HEADER_BYTES = 26;
  const LONG_PRESS_MS = 600;
  const SWIPE_MIN_PX = 12;
  const canDecodeVideo = typeof window.VideoDecoder === "function" && window.isSecureContext;

  function parseFrame(buffer) {
    const view = new DataView(buffer);
    const magic = String.fromCharCode(view.getUint8(0), view.getUint8(1), view.getUint8(2), view.getUint8(3));
    const frame = {seq: view.getUint32(4, true), capturedAt: view.getFloat64(8, true)};
    if (magic === "FWF1") {
      return Object.assign(frame, {
        codec: "jpeg", width: view.getUint16(16, true), height: view.getUint16(18, true),
        phoneWidth: view.getUint16(20, true), phoneHeight: view.getUint16(22, true),
        payload: new Uint8Array(buffer, JPEG_HEADER_BYTES)});
    }
    if (magic === "FWH1") {
      return Object.assign(frame, {
        codec: "h264", key: Boolean(view.getUint8(16) & 1),
        width: view.getUint16(18, true), height: view.getUint16(20, true),
        phoneWidth: view.getUint16(22, true), phoneHeight: view.getUint16(24, true),
        payload: new Uint8Array(buffer, VIDEO_HEADER_BYTES)});
    }
    throw new Error("not a frame");
  }

  class PhoneScreen {
    constructor(canvas) {
      this.canvas = canvas;
      this.context = canvas.getContext("2d");
      this.interactive = canvas.hasAttribute("data-interactive");
      this.maxFps = Number(canvas.dataset.maxFps || 30);
      const scope = canvas.closest(".phone-page") || document;
      this.find = (name) => (this.interactive ? scope.querySelector(`[data-screen-${name}]`) : null);
      this.frame = null;          // the frame on screen: {seq, width, height}
      this.checkedAt = null;      // server time the shown picture was last confirmed
      this.clockOffset = 0;       // server clock minus ours
      this.frames = 0;
      this.inputId = 0;
      this.inputs = new Map();    // input id -> {action, sentAt}
      this.decoder = null;        // WebCodecs VideoDecoder while the stream is H.264
      this.videoHeaders = new Map();  // seq -> header of a chunk being decoded
      this.codecs = this.wantedCodecs();
      this.arrivals = 0;          // JPEG frames received, and the latest of them drawn
      this.drawnArrival = 0;
      this.codecChanged = false;  // the next frame clears what the previous codec drew
      this.fitCanvas(Number(canvas.dataset.phoneWidth || 0), Number(canvas.dataset.phoneHeight || 0));
      this.connect();
      document.addEventListener("visibilitychange", () => this.send({type: document.hidden ? "pause" : "resume"}));
      if (this.interactive) this.bindInput();
      if (this.find("age")) setInterval(() => this.showAge(), 200);
    }

    wantedCodecs() {
      // Thumbnails (a few frames a second) stay JPEG: newest-wins costs nothing there.
      const asked = (this.canvas.dataset.codecs || (this.maxFps > 5 ? "h264 jpeg" : "jpeg")).split(/\s+/);
      return asked.filter((codec) => codec === "jpeg" || (codec === "h264" && canDecodeVideo));
    }

    askView() {
      this.send({type: "view", ...this.viewSize(), max_fps: this.maxFps, codecs: this.codecs.length ? this.codecs : ["jpeg"]});
    }

    fitCanvas(phoneWidth, phoneHeight) {
      // Keep the CSS width; the height follows the phone's aspect ratio.
      if (!phoneWidth || !phoneHeight) return;
      const cssWidth = this.canvas.clientWidth || this.canvas.width;
      this.canvas.style.height = Math.round(cssWidth * phoneHeight / phoneWidth) + "px";
      this.aspect = phoneHeight / phoneWidth;
    }

    viewSize() {
      const ratio = window.devicePixelRatio || 1;
      const width = Math.round((this.canvas.clientWidth || this.canvas.width) * ratio);
      const height = Math.round(width * (this.aspect || this.canvas.height / this.canvas.width));
      return {width, height};
    }

    connect() {
      const scheme = location.protocol === "https:" ? "wss://" : "ws://";
      this.socket = new WebSocket(scheme + location.host + this.canvas.dataset.wsPath);
      this.socket.binaryType = "arraybuffer";
      this.socket.onmessage = (event) => {
        if (typeof event.data === "string") this.onJson(JSON.parse(event.data));
        else this.onFrame(parseFrame(event.data));
      };
      this.socket.onclose = (event) => {
        const reasons = {4401: "sign in to watch", 4403: "your role may not watch phones", 4404: "no such phone"};
        this.setState(reasons[event.code] || "disconnected, reconnecting…");
        if (!reasons[event.code]) setTimeout(() => this.connect(), 2000);
      };
    }

    send(message) {
      if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
    }

    onJson(message) {
      switch (message.type) {
        case "hello":
          this.clockOffset = message.server_time - Date.now();
          this.setControl(message.can_control);
          this.setState("live");
          this.askView();
          if (document.hidden) this.send({type: "pause"});
          break;
        case "stream":
          this.onStream(message);
          break;
        case "input_ack":
          this.say(`Sent: ${message.action.action}…`);
          break;
        case "input_result":
          if (message.ok) this.say(`Done: ${message.action.action} (${message.ms} ms)`);
          else this.say(message.blocked ? `Blocked by the safety audit: ${message.reason}`
                                         : `Not done (${message.error}): ${message.reason}`, true);
          break;
        case "input_frame":
          this.onInputFrame(message);
          break;
        case "lease":
          this.setControl(message.can_control);
          const holder = this.find("holder");
          if (holder) holder.textContent = message.holder || "nobody";
          this.say(`Lease changed (${message.event.replace("_", " ")}); holder: ${message.holder || "nobody"}`);
          break;
        case "phone_unavailable": this.setState("phone unavailable"); this.say(message.message, true); break;
        case "phone_back": this.setState("live"); this.say("The phone answers again."); break;
        case "error": this.say(`${message.code}: ${message.message}`, true); break;
      }
    }

    async onFrame(frame) {
      if (frame.codec === "h264") return this.onVideo(frame);
      if (frame.payload.length) {
        // Decoding is asynchronous: a frame decoded after a newer one was drawn would bring the
        // previous screen back, so only the newest arrival is drawn.
        const arrival = ++this.arrivals;
        const bitmap = await createImageBitmap(new Blob([frame.payload], {type: "image/jpeg"}));
        if (arrival > this.drawnArrival) {
          this.drawnArrival = arrival;
          this.draw(bitmap, frame);
        }
        bitmap.close();
      }
      // An unchanged frame stands for the same picture, so input may be aimed at its seq too.
      this.shown(frame);
    }

    draw(image, frame) {
      if (this.canvas.width !== frame.width || this.canvas.height !== frame.height) {
        this.canvas.width = frame.width;  // resizing empties the canvas
        this.canvas.height = frame.height;
      } else if (this.codecChanged) {
        this.context.clearRect(0, 0, this.canvas.width, this.canvas.height);
      }
      this.codecChanged = false;
      if (frame.phoneWidth && frame.phoneHeight && frame.phoneHeight / frame.phoneWidth !== this.aspect) {
        this.fitCanvas(frame.phoneWidth, frame.phoneHeight);  // rotated: the box takes the new aspect
      }
      // The picture covers the whole canvas whatever its own pixel size, so nothing of the last
      // screen is left at the edges.
      this.context.drawImage(image, 0, 0, this.canvas.width, this.canvas.height);
      this.frames += 1;
      const count = this.find("count");
      if (count) count.textContent = String(this.frames);
      this.canvas.dataset.frames = String(this.frames);
    }

    shown(frame) {
      this.frame = {seq: frame.seq, width: frame.width, height: frame.height};
      this.checkedAt = frame.capturedAt;
      this.send({type: "ack", seq: frame.seq});
    }

    // H.264 (WebCodecs) -------------------------------------------------------------------------
    onStream(message) {
      if (this.canvas.dataset.codec !== message.codec) this.codecChanged = true;
      this.canvas.dataset.codec = message.codec;
      this.canvas.dataset.source = message.source;
      const state = this.find("state");
      if (state) state.title = `${message.codec} from ${message.source}`;
      if (message.reason) this.say(`Stream: ${message.codec} from ${message.source} (${message.reason})`);
      if (message.codec !== "h264") { this.closeDecoder(); return; }
      this.startDecoder(message);
    }

    async startDecoder(message) {
      this.closeDecoder();
      const config = {codec: message.codec_string, optimizeForLatency: true};
      const ready = {pending: []};
      this.video = ready;
      try {
        const support = await VideoDecoder.isConfigSupported(config);
        if (!support.supported) throw new Error(`${message.codec_string} is not supported here`);
        const decoder = new VideoDecoder({
          output: (videoFrame) => this.onDecoded(videoFrame),
          error: (error) => this.videoFailed(error),
        });
        decoder.configure(config);
        if (this.video !== ready) { decoder.close(); return; }
        this.decoder = decoder;
        ready.pending.forEach((frame) => this.decode(frame));
        ready.pending = null;
      } catch (error) {
        this.videoFailed(error);
      }
    }

    closeDecoder() {
      if (this.decoder && this.decoder.state !== "closed") this.decoder.close();
      this.decoder = null;
      this.video = null;
      this.videoHeaders.clear();
    }

    onVideo(frame) {
      if (!frame.payload.length) {  // unchanged: the shown picture was checked at this time
        this.checkedAt = frame.capturedAt;
        return;
      }
      if (this.video && this.video.pending) { this.video.pending.push(frame); return; }
      if (this.decoder) this.decode(frame);
    }

    decode(frame) {
      this.videoHeaders.set(frame.seq, frame);
      try {
        this.decoder.decode(new EncodedVideoChunk({type: frame.key ? "key" : "delta", timestamp: frame.seq,
                                                   data: frame.payload}));
      } catch (error) {
        this.videoFailed(error);
      }
    }

    onDecoded(videoFrame) {
      const frame = this.videoHeaders.get(videoFrame.timestamp);
      this.videoHeaders.delete(videoFrame.timestamp);
      if (frame) {
        this.draw(videoFrame, frame);
        this.shown(frame);
      }
      videoFrame.close();
    }

    videoFailed(error) {
      if (!this.codecs.includes("h264")) return;
      this.closeDecoder();
      this.codecs = ["jpeg"];  // this browser cannot show the video: JPEG frames from now on
      this.say(`H.264 cannot be shown here (${error.message || error}); switched to JPEG frames.`, true);
      this.askView();
    }

    // input feedback ----------------------------------------------------------------------------
    echoTap(point) {
      // Where the tap landed, at once (the phone's answer follows in a later frame).
      const box = this.canvas.getBoundingClientRect();
      const dot = document.createElement("span");
      dot.className = "tap-echo";
      dot.dataset.testid = "tap-echo";
      dot.style.left = `${window.scrollX + box.left + point.x * box.width / this.canvas.width}px`;
      dot.style.top = `${window.scrollY + box.top + point.y * box.height / this.canvas.height}px`;
      document.body.appendChild(dot);
      setTimeout(() => dot.remove(), 700);
    }

    onInputFrame(message) {
      const input = this.inputs.get(message.id);
      this.inputs.delete(message.id);
      const name = input ? input.action : "input";
      if (!message.changed) { this.sayEffect(`${name}: the screen did not change`); return; }
      this.canvas.dataset.markedFrame = String(message.seq);
      this.canvas.classList.remove("input-effect");
      void this.canvas.offsetWidth;  // restart the outline animation
      this.canvas.classList.add("input-effect");
      this.sayEffect(`${name} → new frame ${message.seq} after ${message.ms} ms`);
    }

    sayEffect(text) {
      const el = this.find("effect");
      if (el) el.textContent = text;
    }

    showAge() {
      const age = this.find("age");
      if (!age || this.checkedAt === null) return;
      age.textContent = `${Math.max(0, Math.round(Date.now() + this.clockOffset - this.checkedAt))} ms`;
    }

    setState(text) { const el = this.find("state"); if (el) el.textContent = text; }

    setControl(canControl) {
      this.canControl = canControl;
      const el = this.find("control");
      if (el && canControl) el.textContent = "You hold the lease: your taps, swipes, keys and text reach the phone.";
    }

    say(text, bad) {
      const el = this.find("message");
      if (!el) return;
      el.textContent = text;
      el.classList.toggle("bad", Boolean(bad));
    }

    // input -----------------------------------------------------------------------------------
    sendInput(fields, aimedAt) {
      const message = {type: "input", id: ++this.inputId, ...fields};
      if (aimedAt) message.frame = aimedAt;
      this.inputs.set(message.id, {action: fields.action === "key" ? fields.key : fields.action, sentAt: performance.now()});
      if (this.inputs.size > 50) this.inputs.delete(this.inputs.keys().next().value);
      this.send(message);
    }

    framePoint(event) {
      // CSS pixels -> pixels of the frame on the canvas (the server scales by that frame's size).
      const box = this.canvas.getBoundingClientRect();
      const x = (event.clientX - box.left) * this.canvas.width / box.width;
      const y = (event.clientY - box.top) * this.canvas.height / box.height;
      return {x: Math.max(0, Math.min(this.canvas.width, Math.round(x))),
              y: Math.max(0, Math.min(this.canvas.height, Math.round(y)))};
    }

    bindInput() {
      let down = null;
      this.canvas.addEventListener("pointerdown", (event) => {
        if (!this.frame) return;
        // The point is read before focusing, and focusing must not scroll: a page that moved
        // between press and release would turn the tap into a swipe aimed elsewhere.
        down = {point: this.framePoint(event), at: performance.now(), frame: {...this.frame}};
        this.canvas.focus({preventScroll: true});
        this.canvas.setPointerCapture(event.pointerId);  // a drag that leaves the canvas still ends here
      });
      this.canvas.addEventListener("pointerup", (event) => {
        if (!down) return;
        const end = this.framePoint(event);
        const moved = Math.hypot(end.x - down.point.x, end.y - down.point.y);
        if (moved >= SWIPE_MIN_PX) {
          this.sendInput({action: "swipe", start_x: down.point.x, start_y: down.point.y,
                          end_x: end.x, end_y: end.y}, down.frame);
        } else {
          const action = performance.now() - down.at >= LONG_PRESS_MS ? "long_press" : "tap";
          this.echoTap(down.point);
          this.sendInput({action, x: down.point.x, y: down.point.y}, down.frame);
        }
        down = null;
      });
      const keys = {Escape: "back", Home: "home", End: "recents", Enter: "enter"};
      this.canvas.addEventListener("keydown", (event) => {
        if (keys[event.key]) {
          event.preventDefault();
          this.sendInput({action: "key", key: keys[event.key]});
        } else if (event.key === "t" || event.key === "T") {
          event.preventDefault();
          const box = this.find("text");
          if (box) box.querySelector("input").focus();
        }
      });
      document.querySelectorAll("[data-key]").forEach((button) =>
        button.addEventListener("click", () => this.sendInput({action: "key", key: button.dataset.key})));
      const textForm = this.find("text");
      if (textForm) textForm.addEventListener("submit", (event) => {
        event.preventDefault();
        const input = textForm.querySelector("input");
        if (input.value) this.sendInput({action: "text", text: input.value});
        input.value = "";
        this.canvas.focus({preventScroll: true});
      });
    }
  }

  function start() { document.querySelectorAll("canvas[data-screen]").forEach((c) => { c.phoneScreen = new PhoneScreen(c); }); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
