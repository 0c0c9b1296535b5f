// Loads Streamlit's own chart and table code while the browser is idle, once a session, so that the first page
// that draws a Plotly chart or a dataframe does not wait for it (pages/_prefetch.py says why and which files).
// Compiling 6 MB of script holds the page for a moment: it waits for the page to settle (3 s), for an idle
// period, and for no pointer to be down (a drag on a live slider must not stall).
export default function (component) {
  const { data } = component;
  if (!data || window.__aePrefetched) return;
  window.__aePrefetched = true;
  let down = false;
  window.addEventListener("pointerdown", () => { down = true; }, true);
  window.addEventListener("pointerup", () => { down = false; }, true);
  const load = () => Promise.all(data.urls.map((url) => import(new URL(url, document.baseURI).href).catch(() => {})))
    .then(() => { window.__aePrefetchDone = true; }); // benchmarks/browser.py waits for it before timing a loop
  const idle = window.requestIdleCallback || ((f) => setTimeout(() => f({ timeRemaining: () => 50 }), 200));
  const attempt = () => idle((deadline) => (!down && deadline.timeRemaining() >= 20 ? load()
                                                                                  : setTimeout(attempt, 1000)));
  setTimeout(attempt, 3000);
}
