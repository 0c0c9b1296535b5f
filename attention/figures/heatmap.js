// A heatmap on one canvas: draws attention.figures.canvas.CanvasHeatmap payloads (raw bytes, see to_bytes).
// Python chose every colour (a palette index per cell) and every number (float32 per cell); this file copies
// colours into pixels, writes labels and the numbers it was given, and says which cell or tile the pointer
// is on. Hover, click (or Enter) to open, drag a box to zoom, Escape or the button to zoom out, arrow keys (Home,
// End, Page Up, Page Down) to move, and a PNG button that saves the chart with its title. Text from the payload is user data: it reaches the page only as textContent or
// canvas text.
// The Model heads page mounts it as a Streamlit component (pages/_canvas.py); a notebook gets it from
// CanvasHeatmap._repr_html_.

const views = new WeakMap();
const FONT = "12px 'Source Sans Pro', 'Source Sans 3', sans-serif";
const NO_COLOUR = 255;

function decode(data) {
  const raw = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const bytes = raw.slice(); // its own buffer, from offset 0, so the arrays below are aligned
  if (String.fromCharCode(...bytes.subarray(0, 4)) !== "AEH1") throw new Error("not a heatmap payload");
  const n = new DataView(bytes.buffer).getUint32(4, true);
  const h = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const cells = h.rows * h.cols;
  h.colour = new Uint8Array(bytes.buffer, 8 + n, cells);
  h.values = new Float32Array(bytes.buffer, 8 + n + cells + ((4 - (cells % 4)) % 4), cells);
  return h;
}

function el(tag, cls, parent, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function rgb(hex) { return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)); }

function cut(label, most) { return label.length > most ? label.slice(0, most - 1) + "…" : label; }

// The cells' colours as an image of rows x cols pixels, drawn scaled: one drawImage however many cells.
function picture(h) {
  const off = document.createElement("canvas");
  off.width = h.cols; off.height = h.rows;
  const ctx = off.getContext("2d");
  const img = ctx.createImageData(h.cols, h.rows);
  const table = h.palette.map(rgb);
  for (let i = 0; i < h.colour.length; i++) {
    const k = h.colour[i];
    if (k === NO_COLOUR) continue; // transparent: the background shows (a gap, a masked cell)
    const c = table[k];
    img.data[4 * i] = c[0]; img.data[4 * i + 1] = c[1]; img.data[4 * i + 2] = c[2]; img.data[4 * i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  return off;
}

function build(parent) {
  const root = el("div", "aeh", parent);
  const bar = el("div", "aeh-bar", root);
  const title = el("div", "aeh-title", bar);
  const reset = el("button", "aeh-button", bar, "Zoom out");
  const png = el("button", "aeh-button", bar, "PNG");
  reset.type = png.type = "button";
  reset.title = "Back to every cell (Escape does the same)";
  png.title = "Save this chart as a PNG image";
  const stage = el("div", "aeh-stage", root);
  const canvas = el("canvas", "aeh-canvas", stage);
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "img");
  const box = el("div", "aeh-box", stage);
  const tip = el("div", "aeh-tip", stage);
  const mark = el("div", "aeh-mark", stage); // where the keyboard's cell is, for scrolling to it
  tip.setAttribute("role", "status"); // what the keyboard's cell holds is read out as it moves
  tip.setAttribute("aria-live", "polite");
  const v = { root, title, reset, png, stage, canvas, box, tip, mark, h: null, data: null, win: null, cursor: null,
              drag: null, trigger: () => {} };
  reset.onclick = () => { v.win = null; draw(v); };
  png.onclick = () => titled(v).toBlob((blob) => {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob); a.download = `${v.h.file_name}.png`; a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  });
  canvas.addEventListener("mousemove", (e) => move(v, e));
  canvas.addEventListener("mouseleave", () => { if (!v.drag) tip.style.display = "none"; });
  canvas.addEventListener("mousedown", (e) => { const p = at(v, e); if (p) v.drag = { x: p.x, y: p.y, moved: false }; });
  window.addEventListener("mouseup", (e) => up(v, e));
  canvas.addEventListener("keydown", (e) => key(v, e));
  canvas.addEventListener("focus", () => { // reached by Tab: its first cell and its tip at once (not on a click)
    if (!v.cursor && v.h && canvas.matches(":focus-visible")) key(v, { key: "Home", preventDefault() {} });
  });
  canvas.addEventListener("blur", () => { // the keyboard's cell and its tip go with the focus
    if (!v.cursor) return;
    v.cursor = null; tip.style.display = "none"; mark.style.display = "none"; draw(v);
  });
  new ResizeObserver(() => { if (v.h && v.width !== stage.clientWidth) draw(v); }).observe(stage);
  return v;
}

// The plot's geometry for the current width: margins for labels, the cells' rectangle, the visible window.
function layout(v) {
  const h = v.h, ctx = v.canvas.getContext("2d");
  ctx.font = FONT;
  const win = v.win || { r0: 0, r1: h.rows, c0: 0, c1: h.cols };
  const width = Math.max(200, v.stage.clientWidth || 600), height = h.height;
  const inWin = (t, lo, hi) => t[0] >= lo - 0.5 && t[0] <= hi - 0.5;
  const yLabels = h.y_ticks.filter((t) => inWin(t, win.r0, win.r1)).map((t) => cut(t[1], 24));
  const xLabels = h.x_ticks.filter((t) => inWin(t, win.c0, win.c1)).map((t) => cut(t[1], 18));
  const yWidth = Math.min(170, Math.max(12, ...yLabels.map((s) => ctx.measureText(s).width)));
  const xWidth = Math.max(8, ...xLabels.map((s) => ctx.measureText(s).width));
  const left = yWidth + 30, right = 78;
  const pw0 = width - left - right;
  const cw0 = pw0 / (win.c1 - win.c0);
  const spacing = cw0 * Math.max(1, xLabels.length ? (win.c1 - win.c0) / xLabels.length : 1); // px between labels
  const rotate = !h.x_top && xWidth + 8 > spacing; // horizontal only where every label fits beside the next
  const xSpace = rotate ? Math.min(110, xWidth * 0.71 + 16) : 20;
  const top = h.x_top ? xSpace + 20 : 8, bottom = h.x_top ? 8 : xSpace + 22;
  // Tiles stay at most 1.5 times as tall as wide on a narrow page: the chart is no taller than that.
  const squared = h.tiles && !v.win ? Math.max(220, top + bottom + 1.5 * pw0 * (win.r1 - win.r0) / (win.c1 - win.c0))
    : height;
  const tall = Math.min(height, squared);
  const g = { width, height: tall, left, top, pw: pw0, ph: tall - top - bottom, rotate, win };
  g.cw = g.pw / (win.c1 - win.c0); g.ch = g.ph / (win.r1 - win.r0);
  return g;
}

function draw(v) {
  const h = v.h, canvas = v.canvas, dpr = window.devicePixelRatio || 1;
  const g = layout(v);
  v.g = g; v.width = v.stage.clientWidth;
  canvas.width = Math.round(g.width * dpr); canvas.height = Math.round(g.height * dpr);
  canvas.style.width = `${g.width}px`; canvas.style.height = `${g.height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, g.width, g.height);
  const { left: px, top: py, pw, ph, cw, ch, win } = g;
  ctx.fillStyle = h.background; ctx.fillRect(px, py, pw, ph);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(v.picture, win.c0, win.r0, win.c1 - win.c0, win.r1 - win.r0, px, py, pw, ph);
  const X = (c) => px + (c - win.c0) * cw, Y = (r) => py + (r - win.r0) * ch; // cell edges -> pixels
  if (!h.tiles && cw >= 12 && ch >= 12) { // thin white borders between cells, as the Plotly heatmaps' gaps
    ctx.strokeStyle = "#ffffff"; ctx.lineWidth = 1; ctx.beginPath();
    for (let c = Math.ceil(win.c0); c <= win.c1; c++) { ctx.moveTo(X(c), py); ctx.lineTo(X(c), py + ph); }
    for (let r = Math.ceil(win.r0); r <= win.r1; r++) { ctx.moveTo(px, Y(r)); ctx.lineTo(px + pw, Y(r)); }
    ctx.stroke();
  }
  ctx.font = FONT; ctx.textBaseline = "middle";
  const size = Math.min(12, Math.floor(cw / 2.4), Math.floor(ch * 0.8)); // the numbers' font: as big as cells allow
  let widest = 0; // the widest number written, in px (the canvas's data-value-width: tests compare it with a cell)
  if (h.show_values && size >= 10) { // each cell's value, to cell_digits decimals
    ctx.textAlign = "center"; ctx.font = `${size}px 'Source Sans Pro', 'Source Sans 3', sans-serif`;
    for (let r = Math.floor(win.r0); r < Math.ceil(win.r1); r++) {
      for (let c = Math.floor(win.c0); c < Math.ceil(win.c1); c++) {
        const i = r * h.cols + c, k = h.colour[i];
        if (k === NO_COLOUR) continue;
        ctx.fillStyle = k > 150 ? "#ffffff" : "#262730";
        const text = h.values[i].toFixed(h.cell_digits);
        widest = Math.max(widest, ctx.measureText(text).width);
        ctx.fillText(text, X(c + 0.5), Y(r + 0.5));
      }
    }
    ctx.font = FONT;
  }
  for (const line of h.lines) {
    ctx.save(); ctx.beginPath(); ctx.rect(px, py, pw, ph); ctx.clip();
    ctx.strokeStyle = line.colour; ctx.lineWidth = 2; ctx.setLineDash([6, 4]); ctx.beginPath();
    ctx.moveTo(X(line.x0 + 0.5), Y(line.y0 + 0.5)); ctx.lineTo(X(line.x1 + 0.5), Y(line.y1 + 0.5)); ctx.stroke();
    ctx.setLineDash([]); ctx.fillStyle = line.colour; ctx.textAlign = "left";
    ctx.fillText(line.text, X(line.x0 + 0.5) + 4, Y(line.y0 + 0.5) + 10);
    ctx.restore();
  }
  // Labels, thinned so that none overlaps the last one kept.
  ctx.fillStyle = "#31333f"; ctx.textAlign = "right";
  let last = -Infinity;
  for (const [pos, label] of h.y_ticks) {
    if (pos < win.r0 - 0.5 || pos > win.r1 - 0.5) continue;
    const y = Y(pos + 0.5);
    if (y - last < 14) continue;
    ctx.fillText(cut(label, 24), px - 6, y); last = y;
  }
  last = -Infinity;
  for (const [pos, label] of h.x_ticks) {
    if (pos < win.c0 - 0.5 || pos > win.c1 - 0.5) continue;
    const x = X(pos + 0.5), text = cut(label, 18);
    const room = g.rotate ? 14 : ctx.measureText(text).width + 8;
    if (x - last < room) continue;
    last = x;
    if (h.x_top) { ctx.textAlign = "center"; ctx.fillText(text, x, py - 10); continue; }
    if (!g.rotate) { ctx.textAlign = "center"; ctx.fillText(text, x, py + ph + 10); continue; }
    ctx.save(); ctx.translate(x, py + ph + 6); ctx.rotate(-Math.PI / 4); ctx.textAlign = "right";
    ctx.fillText(text, 0, 0); ctx.restore();
  }
  ctx.textAlign = "center"; ctx.fillStyle = "#31333f";
  ctx.fillText(h.x_title, px + pw / 2, h.x_top ? 10 : g.height - 9);
  ctx.save(); ctx.translate(10, py + ph / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(h.y_title, 0, 0); ctx.restore();
  // The colour bar: the palette's steps bottom to top, labelled where Python said.
  const bx = px + pw + 14, by = py, bh = Math.max(40, Math.min(ph, 320, g.height - by - 24));
  const step = bh / h.palette.length;
  h.palette.forEach((c, i) => { ctx.fillStyle = c; ctx.fillRect(bx, by + bh - (i + 1) * step, 12, step + 0.5); });
  ctx.fillStyle = "#31333f"; ctx.textAlign = "left";
  for (const [pos, label] of h.colorbar) ctx.fillText(label, bx + 16, by + bh - pos * bh);
  // Below the bar, clear of its lowest label, cut to what is left of the width ("entropy (nats)" ran off).
  let name = h.value_name;
  while (name.length > 2 && ctx.measureText(name).width > g.width - bx - 2) name = name.slice(0, -2) + "…";
  ctx.fillText(name, bx - 2, by + bh + 17);
  if (v.cursor) { // the keyboard's cell (or tile): a dark outline
    const [r, c, rows, cols] = cursorCells(v);
    ctx.strokeStyle = "#ff4b4b"; ctx.lineWidth = 2; ctx.strokeRect(X(c), Y(r), cols * cw, rows * ch);
  }
  v.reset.style.display = v.win ? "" : "none";
  Object.assign(canvas.dataset, { plot: [px, py, pw, ph].map((x) => x.toFixed(1)).join(","),
                                  window: [win.r0, win.r1, win.c0, win.c1].join(","), rows: h.rows, cols: h.cols,
                                  tile: h.tiles ? `${h.tiles.rows},${h.tiles.cols}` : "",
                                  cellWidth: cw.toFixed(1), valueFont: widest ? size : 0, valueWidth: widest.toFixed(1) });
}

// The chart as saved: its title written above it (a PNG alone would not say what it shows).
function titled(v) {
  const heading = v.h.title || v.h.export_title, dpr = window.devicePixelRatio || 1, band = heading ? 28 : 0;
  const out = document.createElement("canvas");
  out.width = v.canvas.width; out.height = v.canvas.height + Math.round(band * dpr);
  const ctx = out.getContext("2d");
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, out.width, out.height);
  ctx.drawImage(v.canvas, 0, Math.round(band * dpr));
  if (band) {
    ctx.scale(dpr, dpr); ctx.fillStyle = "#31333f"; ctx.textBaseline = "middle";
    ctx.font = "15px 'Source Sans Pro', 'Source Sans 3', sans-serif"; ctx.fillText(heading, 8, band / 2);
  }
  return out;
}

function at(v, e) {
  const r = v.canvas.getBoundingClientRect(), g = v.g;
  const x = e.clientX - r.left, y = e.clientY - r.top;
  if (x < g.left || y < g.top || x >= g.left + g.pw || y >= g.top + g.ph) return null;
  return { x, y, row: Math.floor(g.win.r0 + (y - g.top) / g.ch), col: Math.floor(g.win.c0 + (x - g.left) / g.cw) };
}

// What a cell is: its tile (with tiles), its row and column names, its value; null for a gap. With `whole`,
// a tile is described by its rows' largest values, averaged (Python's, from the header), as the keyboard moves
// tile by tile.
function describe(v, row, col, whole = false) {
  const h = v.h, i = row * h.cols + col, value = h.values[i];
  const number = Number.isNaN(value) ? "masked" : value.toFixed(h.digits);
  if (h.tiles) {
    const t = h.tiles, tr = Math.floor(row / (t.rows + 1)), tc = Math.floor(col / (t.cols + 1));
    if (row % (t.rows + 1) === t.rows || col % (t.cols + 1) === t.cols) return null;
    const across = Math.round((h.cols + 1) / (t.cols + 1)), k = tr * across + tc;
    const b = t.block || 1, token = (i) => (b > 1 ? `${i * b}–${i * b + b - 1}` // a block: its positions
      : t.tokens && t.tokens.length ? `${i} “${t.tokens[i]}”` : String(i));
    const lines = [`${t.row_title} ${tr + 1} · ${t.col_title} ${tc + 1}`,
                   ...(whole ? [`each row's largest ${h.value_name}, mean: ${t.row_peak[k].toFixed(h.digits)}`]
                             : [`query ${token(row % (t.rows + 1))} → key ${token(col % (t.cols + 1))}`,
                                `${h.value_name}${h.value_note}: ${number}`])];
    if (t.extra_label) lines.push(`${t.extra_label}: ${t.extra[k]}%`);
    if (h.click) lines.push("click to open it in the zoom");
    return { lines, report: { row, col, tile: [tr, tc] } };
  }
  const named = (title, name) => (title ? `${title}: ${name}` : String(name)); // an untitled axis: the name alone
  return { lines: [named(h.y_title, h.y_names[row] ?? row), named(h.x_title, h.x_names[col] ?? col),
                   `${h.value_name}${h.value_note}: ${number}`, ...(h.click_text ? [h.click_text] : [])],
           report: { row, col } };
}

function showTip(v, lines, x, y) {
  v.tip.replaceChildren(...lines.map((line) => el("div", "", null, line)));
  v.tip.style.display = "block";
  const w = v.tip.offsetWidth, g = v.g;
  v.tip.style.left = `${Math.min(x + 14, g.width - w - 4)}px`;
  const above = y - 10 - v.tip.offsetHeight;
  v.tip.style.top = `${above >= 0 ? above : y + 18}px`; // below the pointer where there is no room above
}

function move(v, e) {
  const p = at(v, e);
  if (v.drag) {
    const r = v.canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    if (Math.abs(x - v.drag.x) + Math.abs(y - v.drag.y) > 12) v.drag.moved = true; // a shaky click stays a click
    if (v.drag.moved) {
      Object.assign(v.box.style, { display: "block", left: `${Math.min(x, v.drag.x)}px`, top: `${Math.min(y, v.drag.y)}px`,
                                   width: `${Math.abs(x - v.drag.x)}px`, height: `${Math.abs(y - v.drag.y)}px` });
      v.tip.style.display = "none";
      return;
    }
  }
  const d = p && describe(v, p.row, p.col);
  if (!d) { v.tip.style.display = "none"; v.canvas.style.cursor = "default"; return; }
  v.canvas.style.cursor = v.h.click ? "pointer" : "crosshair";
  showTip(v, d.lines, p.x, p.y);
}

function up(v, e) {
  const drag = v.drag;
  v.drag = null;
  if (!drag) return;
  v.box.style.display = "none";
  const g = v.g, r = v.canvas.getBoundingClientRect();
  if (drag.moved) { // zoom to the box, whole cells
    const cx = (x) => g.win.c0 + (Math.min(Math.max(x, g.left), g.left + g.pw) - g.left) / g.cw;
    const cy = (y) => g.win.r0 + (Math.min(Math.max(y, g.top), g.top + g.ph) - g.top) / g.ch;
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const c0 = Math.floor(cx(Math.min(x, drag.x))), c1 = Math.ceil(cx(Math.max(x, drag.x)));
    const r0 = Math.floor(cy(Math.min(y, drag.y))), r1 = Math.ceil(cy(Math.max(y, drag.y)));
    if (c1 - c0 >= 2 || r1 - r0 >= 2) { v.win = { r0, r1, c0, c1 }; draw(v); return; }
  } // a box inside one cell is a click on it
  const p = at(v, e);
  const d = p && describe(v, p.row, p.col);
  if (d && v.h.click) v.trigger("click", d.report);
}

function cursorCells(v) { // [row, col, rows, cols] of the keyboard's cell, or its whole tile
  const t = v.h.tiles, [r, c] = v.cursor;
  return t ? [r * (t.rows + 1), c * (t.cols + 1), t.rows, t.cols] : [r, c, 1, 1];
}

function key(v, e) {
  const h = v.h, t = h.tiles;
  const rows = t ? Math.round((h.rows + 1) / (t.rows + 1)) : h.rows, cols = t ? Math.round((h.cols + 1) / (t.cols + 1)) : h.cols;
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
                  PageUp: [-rows, 0], PageDown: [rows, 0], Home: [0, -cols], End: [0, cols] };
  if (e.key === "Escape") { v.win = null; draw(v); return; }
  if (moves[e.key]) {
    e.preventDefault();
    const [r, c] = v.cursor || [0, 0], [dr, dc] = v.cursor ? moves[e.key] : [0, 0]; // the first key shows the first cell
    v.cursor = [Math.min(rows - 1, Math.max(0, r + dr)), Math.min(cols - 1, Math.max(0, c + dc))];
    const [cr, cc, nr, nc] = cursorCells(v);
    const w = v.win;
    if (w && (cr < w.r0 || cr + nr > w.r1 || cc < w.c0 || cc + nc > w.c1)) v.win = null; // left the zoomed part
    draw(v);
    const d = describe(v, cr, cc, Boolean(t)), g = v.g;
    Object.assign(v.mark.style, { display: "block", left: `${g.left + (cc - g.win.c0) * g.cw}px`,
                                  top: `${g.top + (cr - g.win.r0) * g.ch}px`, width: `${nc * g.cw}px`,
                                  height: `${nr * g.ch}px` });
    v.mark.scrollIntoView({ block: "nearest" }); // a tall grid: the page follows the cursor
    if (d) showTip(v, d.lines, g.left + (cc + nc - g.win.c0) * g.cw, g.top + (cr - g.win.r0) * g.ch);
    return;
  }
  if ((e.key === "Enter" || e.key === " ") && v.cursor && h.click) {
    e.preventDefault();
    const [cr, cc] = cursorCells(v), d = describe(v, cr, cc);
    if (d) v.trigger("click", d.report);
  }
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const v = views.get(parentElement) || build(parentElement);
  views.set(parentElement, v);
  v.trigger = setTriggerValue || (() => {});
  if (!data || data === v.data) return;
  v.data = data;
  v.h = decode(data);
  v.picture = picture(v.h);
  v.win = null; v.cursor = null;
  v.title.textContent = v.h.title;
  const t = v.h.tiles, size = t ? `${Math.round((v.h.rows + 1) / (t.rows + 1))} ${t.row_title}s by `
    + `${Math.round((v.h.cols + 1) / (t.cols + 1))} ${t.col_title}s` : `${v.h.rows} by ${v.h.cols} cells`;
  v.canvas.setAttribute("aria-label", `${v.h.title || v.h.export_title || "heatmap"}: ${size}. Arrow keys move`
                        + (v.h.click ? ", Enter opens." : "."));
  v.canvas.dataset.meta = JSON.stringify(v.h.meta);
  v.canvas.dataset.xLabels = JSON.stringify(v.h.x_ticks.map((t) => t[1])); // what the columns are, for tests
  v.canvas.dataset.yLabels = JSON.stringify(v.h.y_ticks.map((t) => t[1])); // and the rows, the words and numbers
  v.canvas.dataset.texts = JSON.stringify({ titles: [v.h.title, v.h.x_title, v.h.y_title, v.h.value_name], // drawn
                                            colorbar: v.h.colorbar.map((t) => t[1]) }); // (tests/chart_checks.py)
  draw(v);
}
