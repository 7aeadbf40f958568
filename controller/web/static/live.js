// What the bay page and the fleet page share: building cells from text (never HTML), and
// one event stream with its connection word in the page's role="status" region.
const WATCHDOG_MS = 4500;     // nothing heard this long (heartbeats come every 2 s): dropped

export const $ = (id) => document.getElementById(id);

// the device's position (Dbpos) as the word a person says
export const POSITION = { off: "open", on: "closed", intermediate: "intermediate", bad: "bad" };

export function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

export function cell(row, text, cls) {
  const td = el("td", text, cls);
  row.append(td);
  return td;
}

export function num(row, value) {
  return cell(row, value === null || value === undefined ? "-" : value, "num");
}

export function setText(id, text, cls) {
  const e = $(id);
  e.textContent = text;
  e.className = cls || "";
}

export function emptyRow(cols, text) {
  const tr = el("tr");
  const td = cell(tr, text, "note");
  td.colSpan = cols;
  return tr;
}

export function replaceBody(table, rows) {
  $(table).tBodies[0].replaceChildren(...rows);
}

// One EventSource at a time on `path` (with `params`); `handlers` per event name.
// `journal` events carry the row's seq as id: on a reconnect the browser sends it as
// Last-Event-ID, and a stream the page opens itself says `after=` (a new EventSource
// sends no Last-Event-ID), so rows come once, in order.
export function openStream(path, params, handlers) {
  let source = null;
  let lastHeard = 0;
  let connected = null;
  let lastSeq = null;

  function setConn(ok) {
    if (ok === connected) return;
    connected = ok;
    const c = $("conn");
    c.textContent = ok ? "connected" : "disconnected";
    c.className = ok ? "conn" : "conn alarm";
  }

  function heard() {
    lastHeard = Date.now();
    setConn(true);
  }

  function connect() {
    if (source) source.close();
    const q = new URLSearchParams(params);
    if (lastSeq !== null) q.set("after", String(lastSeq));
    const qs = q.toString();
    source = new EventSource(qs ? `${path}?${qs}` : path);
    source.addEventListener("open", heard);
    source.addEventListener("heartbeat", heard);
    source.addEventListener("journal", (e) => {
      heard();
      const row = JSON.parse(e.data);
      if (lastSeq !== null && row.seq <= lastSeq) return;  // never twice
      lastSeq = row.seq;
      if (handlers.journal) handlers.journal(row);
    });
    source.addEventListener("state", (e) => {
      heard();
      if (handlers.state) handlers.state(JSON.parse(e.data));
    });
    source.addEventListener("error", () => {
      setConn(false);
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    });
    lastHeard = Date.now();
  }

  setInterval(() => {
    if (Date.now() - lastHeard > WATCHDOG_MS) {
      setConn(false);
      connect();  // the browser may not notice a stream that went silent: start again
    }
  }, 1000);
  connect();
}
