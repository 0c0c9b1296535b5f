// Loads Streamlit's own chart and table code while the browser is idle, once a session, so that the first page
// that draws a Plotly chart or a dataframe does not wait for it (pages/_prefetch.py says why and which files).
export default function (component) {
  const { data } = component;
  if (!data || window.__aePrefetched) return;
  window.__aePrefetched = true;
  const load = () => data.urls.forEach((url) => import(new URL(url, document.baseURI).href).catch(() => {}));
  if ("requestIdleCallback" in window) requestIdleCallback(load, { timeout: 5000 });
  else setTimeout(load, 2000);
}
