// Keeps the learner's anonymous id in a cookie (pages/_learner.py): the next visit's first request carries it, so
// a reload, a new tab or a return next day reads the same progress. A browser that already has one (another tab
// set it first) reports it back, and the page adopts it. The id is random: nothing about the person.
export default function (component) {
  const { data, setStateValue } = component;
  if (!data || !data.token) return;
  const kept = document.cookie.split("; ").find((c) => c.startsWith(`${data.name}=`));
  const value = kept ? kept.slice(data.name.length + 1) : null;
  if (value === null) {
    document.cookie = `${data.name}=${data.token}; path=/; max-age=${data.max_age}; SameSite=Strict`;
  } else if (value !== data.token && setStateValue) {
    setStateValue("token", value);
  }
}
