// Numbers only where a cell can hold them, titles no wider than their chart, tick labels that do not overlap
// (pages/_screen.py). Plotly writes a heatmap's value in every cell and,
// on a narrow screen, draws it shrunk or spilling into its neighbours: "0.45" drawn 4 px tall in a 13 px cell
// at 390 px. After every draw of every Plotly chart, each heatmap panel's numbers are measured against its cells
// at READABLE_PX (tests/chart_checks.py's rule); a panel whose cells cannot hold them hides them, and its hover
// keeps every value. Layout only: no number is computed here.
const READABLE_PX = 10;
const PAD_PX = 2; // room on each side of a number inside its cell

function fitHeatmaps(gd) {
  const layout = gd._fullLayout;
  if (!layout || !layout._plots) return;
  gd.querySelectorAll(".cartesianlayer .subplot").forEach((panel) => {
    const id = [...panel.classList].find((c) => c !== "subplot");
    const plot = layout._plots[id];
    const groups = panel.querySelectorAll(".heatmap-label");
    if (!plot || !groups.length) return;
    const xa = plot.xaxis;
    const cell = xa._length / Math.abs(xa.range[1] - xa.range[0]);
    groups.forEach((g) => { g.style.display = ""; }); // measured as Plotly drew them
    const fits = [...panel.querySelectorAll(".heatmap-label text")].every((t) => {
      const font = parseFloat(getComputedStyle(t).fontSize);
      return !font || t.getBBox().width * Math.max(1, READABLE_PX / font) + 2 * PAD_PX <= cell + 0.5;
    });
    groups.forEach((g) => { g.style.display = fits ? "" : "none"; });
  });
}

// A chart's title wider than its chart (a phone: "L24H4: where the last token (␣to) looks" at 17 px in 358 px) is
// drawn smaller, down to SMALLEST_TITLE_PX, rather than cut at the chart's edge.
const SMALLEST_TITLE_PX = 11;
function fitTitles(gd) {
  const room = gd.getBoundingClientRect().width - 8;
  gd.querySelectorAll(".infolayer .gtitle").forEach((t) => {
    t.style.fontSize = ""; // as Plotly drew it
    const font = parseFloat(getComputedStyle(t).fontSize), wide = t.getBBox().width;
    if (font && wide > room) t.style.fontSize = `${Math.max(SMALLEST_TITLE_PX, Math.floor((font * room) / wide))}px`;
  });
}

// Tick labels that would overlap (a phone: three panels of 55 px, each with its keys upright) are thinned, keeping
// the first and every label with room after the last one kept; hover still names every row and column. A label
// Plotly turned (-45 or -90 degrees) clashes only where its neighbour is nearer along the axis than a line of text
// across its slant: their upright boxes overlap long before their letters do.
function clash(a, b, turned, font) {
  if (!turned) {
    return a.left < b.right + 1 && a.right > b.left - 1 && a.top < b.bottom + 1 && a.bottom > b.top - 1;
  }
  const across = Math.abs(Math.sin((turned * Math.PI) / 180)) || 1;
  return Math.abs((a.left + a.right) / 2 - (b.left + b.right) / 2) * across < font;
}

function thinTicks(gd) {
  gd.querySelectorAll(".xaxislayer-above, .yaxislayer-above").forEach((axis) => {
    const labels = [...axis.querySelectorAll("text")];
    labels.forEach((t) => { t.style.display = ""; });
    const along = axis.classList.contains("xaxislayer-above");
    let last = null;
    labels.forEach((t) => {
      const box = t.getBoundingClientRect();
      if (!box.width) return;
      const angle = /rotate\((-?[\d.]+)/.exec(t.getAttribute("transform") || "");
      const turned = along && angle ? parseFloat(angle[1]) : 0;
      if (last && clash(box, last, turned, parseFloat(getComputedStyle(t).fontSize) || 12)) t.style.display = "none";
      else last = box;
    });
  });
}

// A bar's value is written at one size, never shrunk (attention/figures/toy.py): where bars are narrower than a
// line of text, values that would overlap their neighbour's are hidden (hover has every one).
function thinBarValues(gd) {
  gd.querySelectorAll(".barlayer .trace").forEach((trace) => {
    let last = null;
    trace.querySelectorAll("text.bartext").forEach((t) => {
      t.style.display = "";
      const box = t.getBoundingClientRect();
      if (!box.width) return;
      if (last && clash(box, last, 0, 0)) t.style.display = "none";
      else last = box;
    });
  });
}

function fit(gd) {
  fitHeatmaps(gd);
  fitTitles(gd);
  thinTicks(gd);
  thinBarValues(gd);
}

function watch(gd) {
  if (gd.__aeFit || typeof gd.on !== "function") return;
  gd.__aeFit = true;
  gd.on("plotly_afterplot", () => fit(gd));
  fit(gd);
}

export default function () {
  if (window.__aeFit) return; // once a browser session: the observer sees every chart drawn after
  window.__aeFit = true;
  const scan = () => document.querySelectorAll(".js-plotly-plot").forEach(watch);
  new MutationObserver(scan).observe(document.body, { childList: true, subtree: true });
  scan();
}
