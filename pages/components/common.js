// Shared by the live components: pages/_live.py puts this file before each component's own JS.
// Decoding of the numbers Python sent, colours as the server's charts, and DOM building with text only.

// base64 of little-endian integer thousandths -> a typed array (divide by 1000 to read a value).
function unpackUint16(b64) { // weights: 0 ... 1000
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new Uint16Array(bytes.buffer);
}
function unpackInt32(b64) { // anything signed: scores, outputs
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new Int32Array(bytes.buffer);
}

// Colours as the server's heatmaps: weights on Blues (0..1).
function mix(a, b, t) { return `rgb(${a.map((x, i) => Math.round(x + (b[i] - x) * t)).join(",")})`; }
function blues(k) { return mix([247, 251, 255], [8, 48, 107], Math.min(1, Math.max(0, k / 1000))); }

// An element with a class and, optionally, text (always textContent: names are user data).
function el(tag, cls, parent, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

// When a moved control's value goes back to Python. A mouse lets go once (the range's "change" on release): sent
// at once. A key sends a "change" on every press, and each started a rerun whose answer, arriving while the
// arrow was still held, pulled the slider back to an older step: presses are sent once the keys have been quiet
// for KEY_QUIET_MS, and until Python has answered, its steps do not replace the reader's (pending()).
const KEY_QUIET_MS = 300;
function releaser(send) {
  const r = { keyboard: false, timer: null };
  r.changed = (steps) => {
    clearTimeout(r.timer);
    const go = () => { r.timer = null; send(steps); };
    if (r.keyboard) r.timer = setTimeout(go, KEY_QUIET_MS);
    else go();
  };
  r.pending = () => r.timer !== null; // the reader's steps are newer than Python's: a send is waiting
  return r;
}

// Keys that move a range (arrows, Home, End, Page Up/Down) mark what follows as the keyboard's; a pointer's.
const MOVE_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"]);
function watchKeys(target, release) {
  target.addEventListener("keydown", (e) => { if (MOVE_KEYS.has(e.key)) release.keyboard = true; });
  target.addEventListener("pointerdown", () => { release.keyboard = false; });
}
