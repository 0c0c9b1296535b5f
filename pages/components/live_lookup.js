// Live lookup: sliders and a query plane that redraw the weights on every frame of a drag.
//
// No attention math happens here. Python (attention/toy/live.py) sends the weights, outputs and winners at
// every slider step; this file decodes them, looks up the step under the pointer and draws it. On release
// the new query goes back to Python (setStateValue), which updates its tables and sends new arrays.
// Every user-supplied string (item and feature names) is written with textContent, never as HTML.
// unpackUint16, unpackInt32, blues, el, releaser and watchKeys come from common.js (pages/_live.py puts it first).

const STEPS = 101; // slider positions 0.00 ... 1.00

const fmt = (k) => (k / 1000).toFixed(3); // thousandths -> "0.123", as the server tables print them

const views = new WeakMap(); // parentElement -> the view built for it (the function runs on every rerun)

function build(parent, setStateValue) {
  const root = el("div", "live", parent);
  const view = { root, setStateValue, data: null, steps: [0, 0, 0], dragging: false };
  view.release = releaser((steps) => view.setStateValue("query_steps", steps)); // Python recomputes its tables
  view.sliders = el("div", "sliders", root);
  const charts = el("div", "charts", root);
  const left = el("div", "panel", charts);
  el("div", "title", left, "Softmax weights (live)");
  view.bars = el("div", "bars", left);
  view.heat = el("div", "heat", left);
  const right = el("div", "panel", charts);
  el("div", "title", right, "Query plane: drag the point");
  const pick = el("label", "pick", right, "features ");
  view.pairSelect = el("select", "", pick);
  view.plane = el("div", "plane", right);
  view.plane.tabIndex = 0;
  view.plane.setAttribute("role", "slider");
  view.planeDot = el("div", "dot", view.plane);
  view.output = el("div", "output", root);
  view.winner = el("div", "winner", root);
  view.winner.setAttribute("aria-live", "polite");
  views.set(parent, view);
  wirePlane(view);
  return view;
}

function render(view, data) {
  const fresh = view.data === null || view.data.signature !== data.signature;
  view.data = data;
  // Python's query, unless the reader is dragging or has pressed keys Python has not heard yet (releaser).
  if (!view.dragging && !view.release.pending()) view.steps = data.query_steps.slice();
  if (fresh) {
    view.sweepWeights = unpackUint16(data.sweeps.weights);
    view.sweepOutputs = unpackInt32(data.sweeps.outputs);
    view.planeWeights = unpackUint16(data.plane.weights);
    view.planeWinners = Uint8Array.from(atob(data.plane.winners), (c) => c.charCodeAt(0));
    buildPairs(view);
    buildPlaneKeys(view);
  }
  buildSliders(view); // built once per set of features and updated in place: a focused slider keeps its focus
  syncInputs(view);
  draw(view, view.moved === undefined || !view.release.pending() ? null : { feature: view.moved });
}

function buildSliders(view) {
  const shape = JSON.stringify(view.data.features);
  if (view.shape === shape) return;
  view.shape = shape;
  view.sliders.replaceChildren();
  view.inputs = view.data.features.map((name, f) => {
    const box = el("div", "slider", view.sliders);
    const id = `live-${view.data.key}-${f}`;
    const label = el("label", "", box, name);
    label.htmlFor = id;
    const input = el("input", "", box);
    Object.assign(input, { type: "range", min: 0, max: STEPS - 1, step: 1, id, value: view.steps[f] });
    const shown = el("span", "value", box, (view.steps[f] / 100).toFixed(2));
    input.setAttribute("aria-valuetext", shown.textContent);
    input.addEventListener("input", (e) => {
      view.dragging = true;
      view.moved = f;
      view.steps[f] = Number(input.value);
      shown.textContent = (view.steps[f] / 100).toFixed(2);
      input.setAttribute("aria-valuetext", shown.textContent);
      draw(view, { feature: f, at: e.timeStamp });
    });
    input.addEventListener("change", () => release(view)); // mouse up, or a key press
    watchKeys(input, view.release);
    return { input, shown };
  });
}

function buildPairs(view) {
  const names = view.data.features;
  view.pairSelect.replaceChildren();
  view.data.pairs.forEach(([fx, fy], i) => {
    const option = el("option", "", view.pairSelect, `${names[fx]} × ${names[fy]}`);
    option.value = String(i);
    if (fx === view.data.plane.features[0] && fy === view.data.plane.features[1]) option.selected = true;
  });
  view.pairSelect.onchange = () => {
    view.setStateValue("plane_pair", Number(view.pairSelect.value)); // Python precomputes that plane
  };
}

function buildPlaneKeys(view) {
  view.plane.querySelectorAll(".key, .axis").forEach((k) => k.remove());
  const [fx, fy] = view.data.plane.features;
  el("div", "axis x", view.plane, `${view.data.features[fx]} →`);
  el("div", "axis y", view.plane, `↑ ${view.data.features[fy]}`);
  view.data.keys.forEach((key, j) => {
    const mark = el("div", "key", view.plane);
    mark.style.left = `${key[fx] * 100}%`;
    mark.style.bottom = `${key[fy] * 100}%`;
    el("span", "", mark, view.data.labels[j]);
  });
  view.plane.setAttribute("aria-label", `query plane: ${view.data.features[fx]} across, ${view.data.features[fy]} up`);
}

// Which precomputed weights to show: a slider being dragged reads its sweep, the plane reads the grid,
// otherwise the query as Python last computed it (any sweep at its own step).
function current(view, moved) {
  const m = view.data.labels.length, dv = view.data.value_features.length;
  if (moved && moved.plane) {
    const [i, j] = moved.plane;
    const at = (i * STEPS + j) * m;
    return { weights: view.planeWeights.subarray(at, at + m), output: null, winner: view.planeWinners[i * STEPS + j] };
  }
  const f = moved ? moved.feature : 0;
  const s = view.steps[f];
  const at = (f * STEPS + s) * m;
  const out = (f * STEPS + s) * dv;
  return { weights: view.sweepWeights.subarray(at, at + m), output: view.sweepOutputs.subarray(out, out + dv),
           winner: view.data.sweeps.winners[f * STEPS + s] };
}

function draw(view, moved) {
  const { weights, output, winner } = current(view, moved); // the winner as Python chose it
  const labels = view.data.labels;
  if (view.bars.children.length !== labels.length) {
    view.bars.replaceChildren();
    view.heat.replaceChildren();
    labels.forEach((name) => {
      const col = el("div", "bar", view.bars);
      el("span", "num", col);
      el("div", "fill", col);
      el("span", "name", col, name);
      el("div", "cell", view.heat).title = name;
    });
  }
  const best = winner;
  labels.forEach((name, j) => {
    const col = view.bars.children[j];
    col.children[0].textContent = fmt(weights[j]);
    col.children[1].style.height = `${weights[j] / 10}%`;
    view.heat.children[j].style.background = blues(weights[j]);
    view.heat.children[j].textContent = fmt(weights[j]);
    view.heat.children[j].style.color = weights[j] > 500 ? "white" : "black";
  });
  [...view.bars.children].forEach((c, j) => c.classList.toggle("best", j === best));
  if (output) {
    view.output.replaceChildren();
    el("span", "title", view.output, "Output blend: ");
    view.data.value_features.forEach((name, d) => el("span", "pair", view.output, `${name} ${fmt(output[d])}`));
  }
  view.winner.textContent = best < labels.length // Python sends one past the last item for a tie
    ? `${labels[best]} wins with ${(weights[best] / 10).toFixed(1)}% of the attention`
    : `No item wins: the largest weights are equal (${(Math.max(...weights) / 10).toFixed(1)}% each)`;
  const [fx, fy] = view.data.plane.features;
  const px = moved && moved.plane ? moved.plane[0] : view.steps[fx];
  const py = moved && moved.plane ? moved.plane[1] : view.steps[fy];
  view.planeDot.style.left = `${px}%`;
  view.planeDot.style.bottom = `${py}%`;
  view.plane.setAttribute("aria-valuetext", `${(px / 100).toFixed(2)}, ${(py / 100).toFixed(2)}`);
  if (moved && moved.at !== undefined) {
    // input event -> painted: the frame after this one has been laid out and painted
    requestAnimationFrame(() => {
      const stats = (window.__liveStats = window.__liveStats || { latencies: [], frames: 0 });
      stats.latencies.push(performance.now() - moved.at);
      stats.frames += 1;
    });
  }
}

function wirePlane(view) {
  const stepAt = (event) => {
    const box = view.plane.getBoundingClientRect();
    const x = Math.round(((event.clientX - box.left) / box.width) * (STEPS - 1));
    const y = Math.round(((box.bottom - event.clientY) / box.height) * (STEPS - 1));
    return [Math.max(0, Math.min(STEPS - 1, x)), Math.max(0, Math.min(STEPS - 1, y))];
  };
  const move = (event, at) => {
    const [i, j] = stepAt(event);
    const [fx, fy] = view.data.plane.features;
    view.steps[fx] = i;
    view.steps[fy] = j;
    syncInputs(view);
    draw(view, { plane: [i, j], at });
  };
  view.plane.addEventListener("pointerdown", (e) => {
    view.dragging = true;
    view.plane.setPointerCapture(e.pointerId);
    move(e, e.timeStamp);
  });
  view.plane.addEventListener("pointermove", (e) => {
    if (view.dragging && view.plane.hasPointerCapture(e.pointerId)) move(e, e.timeStamp);
  });
  view.plane.addEventListener("pointerup", () => release(view));
  watchKeys(view.plane, view.release); // first: its keydown marks the release below as the keyboard's
  view.plane.addEventListener("keydown", (e) => {
    const [fx, fy] = view.data.plane.features;
    const delta = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowDown: [0, -1], ArrowUp: [0, 1] }[e.key];
    if (!delta && e.key !== "Home" && e.key !== "End") return;
    e.preventDefault();
    const i = e.key === "Home" ? 0 : e.key === "End" ? STEPS - 1 : Math.max(0, Math.min(STEPS - 1, view.steps[fx] + delta[0]));
    const j = e.key === "Home" ? 0 : e.key === "End" ? STEPS - 1 : Math.max(0, Math.min(STEPS - 1, view.steps[fy] + delta[1]));
    view.steps[fx] = i;
    view.steps[fy] = j;
    syncInputs(view);
    draw(view, { plane: [i, j], at: e.timeStamp });
    release(view);
  });
}

function syncInputs(view) {
  view.inputs.forEach(({ input, shown }, f) => {
    input.value = view.steps[f];
    shown.textContent = (view.steps[f] / 100).toFixed(2);
    input.setAttribute("aria-valuetext", shown.textContent);
  });
}

function release(view) {
  view.dragging = false;
  view.release.changed(view.steps.slice()); // at once for a pointer; for keys, once they are quiet
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  const view = views.get(parentElement) || build(parentElement, setStateValue);
  view.setStateValue = setStateValue;
  if (data) render(view, data);
}
