// What the bay page and the fleet page share: building cells from text (never HTML), and
// one event stream with its connection word in the page's role="status" region.
//
// A status page stays open for hours beside a bay: it must cost the browser next to
// nothing. So a table is patched, not rebuilt (a cell whose text and class did not change
// is not touched, so the browser has nothing to lay out or paint again), and a hidden page
// closes its stream and stops its timer (it catches up, from its last row, when shown).
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
  return cell(row, shown(value), "num");
}

const shown = (value) => (value === null || value === undefined ? "-" : String(value));

// A cell as data, for `syncBody`: its text (or `draw`, a function making its content, and
// `key`, what that content depends on), class, `field` (its data-field) and column span.
export const txt = (text, cls, field) => ({ text: shown(text), cls: cls || "", field });
export const number = (value) => txt(value, "num");

export function setText(id, text, cls) {
  const e = $(id);
  if (e.textContent !== text) e.textContent = text;
  if (e.className !== (cls || "")) e.className = cls || "";
}

export function emptyRow(cols, text) {
  return { data: {}, cells: [{ ...txt(text, "note"), span: cols }] };
}

// The table's body made to show `specs` (one per row: `data` for its dataset, `cells`),
// changing only what differs from what it shows.
export function syncBody(table, specs) {
  const body = $(table).tBodies[0];
  while (body.rows.length > specs.length) body.lastElementChild.remove();
  specs.forEach((spec, i) => {
    let tr = body.rows[i];
    if (!tr) tr = body.appendChild(el("tr"));
    syncRow(tr, spec);
  });
}

function syncRow(tr, spec) {
  const data = spec.data || {};
  for (const k of Object.keys(tr.dataset)) if (!(k in data)) delete tr.dataset[k];
  for (const [k, v] of Object.entries(data)) if (tr.dataset[k] !== v) tr.dataset[k] = v;
  while (tr.cells.length > spec.cells.length) tr.lastElementChild.remove();
  spec.cells.forEach((c, i) => syncCell(tr.cells[i] || tr.appendChild(el("td")), c));
}

function syncCell(td, c) {
  if (td.className !== c.cls) td.className = c.cls;
  if (td.colSpan !== (c.span || 1)) td.colSpan = c.span || 1;
  if (c.field !== undefined && td.dataset.field !== c.field) td.dataset.field = c.field;
  const key = c.draw ? `draw\u0000${c.key}` : `text\u0000${c.text}`;
  if (td.shows === key) return;
  td.shows = key;
  if (c.draw) td.replaceChildren(c.draw());
  else td.textContent = c.text;
}

// One EventSource at a time on `path` (with `params`); `handlers` per event name.
// `journal` events carry a batch of rows, their id the last row's seq: on a reconnect the
// browser sends it as Last-Event-ID, and a stream the page opens itself says `after=` (a
// new EventSource sends no Last-Event-ID), so rows come once, in order.
export function openStream(path, params, handlers) {
  let source = null;
  let lastHeard = 0;
  let connected = null;
  let lastSeq = null;
  let watchdog = null;

  function setConn(word) {
    if (word === connected) return;
    connected = word;
    const c = $("conn");
    c.textContent = word;
    c.className = word === "disconnected" ? "conn alarm" : "conn";
  }

  function heard() {
    lastHeard = Date.now();
    setConn("connected");
  }

  function onRows(e) {
    heard();
    const rows = JSON.parse(e.data).filter((r) => lastSeq === null || r.seq > lastSeq);  // never twice
    if (!rows.length) return;
    lastSeq = rows[rows.length - 1].seq;
    if (handlers.journal) handlers.journal(rows);
  }

  function connect() {
    if (source) source.close();
    const q = new URLSearchParams(params);
    if (lastSeq !== null) q.set("after", String(lastSeq));
    const qs = q.toString();
    source = new EventSource(qs ? `${path}?${qs}` : path);
    source.addEventListener("open", heard);
    source.addEventListener("heartbeat", heard);
    source.addEventListener("journal", onRows);
    source.addEventListener("state", (e) => {
      heard();
      if (handlers.state) handlers.state(JSON.parse(e.data));
    });
    source.addEventListener("error", () => {
      setConn("disconnected");
      if (source.readyState === EventSource.CLOSED) setTimeout(() => source && connect(), 1000);
    });
    lastHeard = Date.now();
  }

  function check() {
    if (Date.now() - lastHeard > WATCHDOG_MS) {
      setConn("disconnected");
      connect();  // the browser may not notice a stream that went silent: start again
    }
  }

  // shown: a stream and its watchdog; hidden (another tab, a minimised window): neither,
  // so the server sends nothing and the page runs nothing
  function follow() {
    if (document.visibilityState === "hidden") {
      if (source) source.close();
      source = null;
      clearInterval(watchdog);
      watchdog = null;
      setConn("paused while the page is hidden");
    } else if (source === null) {
      connect();
      watchdog = setInterval(check, 1000);
    }
  }

  document.addEventListener("visibilitychange", follow);
  follow();
}
