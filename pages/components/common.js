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
