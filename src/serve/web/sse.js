// Server-sent events read from a fetch response: a turn's events are the answer to the POST
// that starts it, which EventSource cannot send, and a broken stream is resumed with a
// Last-Event-ID header (live.js).

export async function readSse(resp, onEvent) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let data = [];
  let id = null;
  const line = (l) => {
    if (l === '') {
      if (data.length) {
        let ev = null;
        try { ev = JSON.parse(data.join('\n')); } catch (_) { /* not an event */ }
        if (ev) onEvent(ev, id);
      }
      data = [];
      return;
    }
    if (l.startsWith(':')) return; // keep-alive comment
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    for (;;) {
      const m = /\r\n|\n|\r/.exec(buf);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (!m || (m[0] === '\r' && m.index === buf.length - 1)) break;
      line(buf.slice(0, m.index));
      buf = buf.slice(m.index + m[0].length);
    }
  }
  if (buf) line(buf);
  line('');
}
