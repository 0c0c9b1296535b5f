// Live sweep: one or more sliders whose every step was precomputed in Python (attention/toy/live.py); while a
// slider moves, each chart shows the frame for that step. No attention math here: frames are looked up, and
// so is the bar drawn darker in each frame (the panel's `best`, from Python).
// On release the step indices go back to Python (setStateValue), which updates its own widgets and tables.
// Labels and titles are user-visible strings: always textContent, never HTML.
// unpackInt32, blues, mix, el, releaser and watchKeys come from common.js (pages/_live.py puts it first).

// Colours as the server's charts: weights on Blues (0..1), signed values on red-white-blue around 0.
function colour(k, panel) {
  if (!panel.signed) {
    return blues(k);
  }
  const t = Math.max(-1, Math.min(1, k / 1000 / panel.scale));
  return t >= 0 ? mix([247, 247, 247], [33, 102, 172], t) : mix([247, 247, 247], [178, 24, 43], -t);
}
const shownValue = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(2));

const views = new WeakMap(); // parentElement -> view (the module runs again on every rerun)

function build(parent) {
  const root = el("div", "sweep", parent);
  const view = { root, sliders: el("div", "sliders", root), panels: el("div", "panels", root), data: null,
                 moved: -1 };
  view.release = releaser((steps) => view.setStateValue("indices", steps));
  views.set(parent, view);
  return view;
}

function render(view, data) {
  const fresh = !view.data || view.data.signature !== data.signature;
  view.data = data;
  // Python's steps, unless the reader has moved a slider since the last value Python acknowledged: a rerun
  // started by an earlier key press must not pull the slider back while the arrow is still held (issue 68:
  // 12 presses moved the lookup's slider 5 steps).
  if (!view.release.pending()) view.index = data.sliders.map((s) => s.index);
  if (fresh) {
    view.frames = data.panels.map((p) => unpackInt32(p.frames));
    view.steps = Math.max(...data.sliders.map((s) => s.values.length));
    buildPanels(view);
  }
  buildSliders(view); // kept when their shape is the same: a focused slider keeps its focus across reruns
  const f = Math.max(0, view.moved);
  draw(view, f, view.index[f], null);
}

// The sliders' elements are built once per set of labels and updated in place after (their number of steps
// too: a typed d between two steps adds one): rebuilding them took the keyboard's focus away after one press.
function buildSliders(view) {
  const shape = JSON.stringify(view.data.sliders.map((s) => s.label));
  if (view.shape !== shape) {
    view.shape = shape;
    view.sliders.replaceChildren();
    view.inputs = view.data.sliders.map((s, f) => {
      const box = el("div", "slider", view.sliders);
      const id = `sweep-${view.data.key}-${f}`;
      const label = el("label", "", box, s.label);
      label.htmlFor = id;
      const input = el("input", "", box);
      Object.assign(input, { type: "range", min: 0, step: 1, id });
      el("span", "value", box);
      input.addEventListener("input", (e) => {
        view.index[f] = Number(input.value);
        view.moved = f;
        showValue(view, f);
        draw(view, f, view.index[f], e.timeStamp);
      });
      input.addEventListener("change", () => view.release.changed(view.index.slice()));
      watchKeys(input, view.release);
      return input;
    });
  }
  view.inputs.forEach((input, f) => {
    input.max = view.data.sliders[f].values.length - 1;
    input.value = view.index[f];
    showValue(view, f);
  });
}

function showValue(view, f) {
  const input = view.inputs[f];
  input.nextElementSibling.textContent = shownValue(view.data.sliders[f].values[view.index[f]]);
  input.setAttribute("aria-valuetext", input.nextElementSibling.textContent);
}

const CROWDED_PX = 48; // a bar narrower than this draws its number and name sideways

function buildPanels(view) {
  view.panels.replaceChildren();
  view.cells = view.data.panels.map((p) => {
    const wide = p.chart === "matrix" || p.cols.length > 8; // many bars: a row of their own, so numbers fit
    const box = el("div", `panel chart-${p.chart}${wide ? " wide" : ""}`, view.panels);
    el("div", "title", box, p.title);
    if (p.chart === "bars") {
      const bars = el("div", p.signed ? "bars signed" : "bars", box);
      // Too narrow for a word per bar (13 keys at 800 px: "watched" read "wa…"): numbers and names turn on
      // their side, and each name keeps its whole text as a tooltip.
      new ResizeObserver(() => bars.classList.toggle("crowded", bars.clientWidth / p.cols.length < CROWDED_PX))
        .observe(bars);
      return p.cols.map((name) => {
        const col = el("div", "bar", bars);
        const num = el("span", "num", col);
        const track = el("div", "track", col);
        const fill = el("div", "fill", track);
        el("span", "name", col, name).title = name;
        return { num, fill };
      });
    }
    const table = el("table", "matrix", box);
    const head = el("tr", "", table);
    el("th", "", head, "");
    p.cols.forEach((c) => { el("th", "col", head, c).title = c; });
    const cells = [];
    p.rows.forEach((r) => {
      const tr = el("tr", "", table);
      el("th", "row", tr, r).title = r;
      p.cols.forEach(() => cells.push(el("td", "", tr)));
    });
    return cells;
  });
}

function draw(view, f, s, at) {
  view.data.panels.forEach((p, k) => {
    const size = p.rows.length * p.cols.length;
    const start = (f * view.steps + s) * size;
    const frame = view.frames[k].subarray(start, start + size);
    if (p.chart === "bars") {
      const best = p.best ? p.best[f * view.steps + s] : -1;
      view.cells[k].forEach(({ num, fill }, j) => {
        const v = frame[j];
        num.textContent = (v / 1000).toFixed(3);
        if (!p.signed) {
          fill.style.height = `${Math.max(0, Math.min(100, v / 10))}%`;
          fill.style.bottom = "0";
        } else {
          const h = Math.min(50, (Math.abs(v) / 1000 / p.scale) * 50);
          fill.style.height = `${h}%`;
          fill.style.bottom = v >= 0 ? "50%" : `${50 - h}%`;
        }
        fill.style.background = colour(v, p);
        fill.classList.toggle("best", j === best);
      });
    } else {
      view.cells[k].forEach((td, j) => {
        td.textContent = (frame[j] / 1000).toFixed(2);
        td.style.background = colour(frame[j], p);
        td.style.color = Math.abs(frame[j]) > (p.signed ? p.scale * 550 : 550) ? "white" : "black";
      });
    }
  });
  if (at !== null) {
    requestAnimationFrame(() => {
      const stats = (window.__liveStats = window.__liveStats || { latencies: [], frames: 0 });
      stats.latencies.push(performance.now() - at);
    });
  }
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  const view = views.get(parentElement) || build(parentElement);
  view.setStateValue = setStateValue;
  if (data) render(view, data);
}
