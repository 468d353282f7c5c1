// Numbers, times and durations as the page writes them, and URL components.

export const fmt = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'));
export const enc = encodeURIComponent;

export function short(n) {
  if (n >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return String(Math.round(n));
}

export function clock(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const now = new Date();
  const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return d.toDateString() === now.toDateString() ? t : `${d.toLocaleDateString()} ${t}`;
}

export const plural = (n, word) => `${fmt(n)} ${word}${n === 1 ? '' : 's'}`;

export function wall(ms) {
  if (ms === null || ms === undefined) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
