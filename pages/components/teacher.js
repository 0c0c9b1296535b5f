// Keeps a class's teacher key in a cookie of the teacher's browser (pages/_teacher.py), never in the page's
// address: a photo of the projected screen, or the browser's history, gives nothing. An empty value forgets it.
// With `top`, the view is scrolled back to its top: after "Open the class" the page stayed scrolled down, the
// code and the board's link off screen.
export default function (component) {
  const { data } = component;
  if (!data || !data.name) return;
  const kept = data.value ? `${data.value}; max-age=${data.max_age}` : "; max-age=0";
  document.cookie = `${data.name}=${kept}; path=/; SameSite=Strict`;
  if (data.top) {
    const main = document.querySelector("[data-testid='stMain']");
    if (main) main.scrollTo({ top: 0 });
    window.scrollTo({ top: 0 });
  }
}
