// The bay page: one EventSource, every string placed with textContent (never as HTML),
// colour only on abnormal cells and always beside the word that says why.
import { $, el, emptyRow, number, openStream, POSITION, setText, syncBody, txt } from "./live.js";

const KEEP = 1000;            // timeline rows kept (the server sends at most as many)
const ACTIVE = new Set(["receiving_input", "planning", "waiting_for_tool", "tool_failed_retryable",
  "tool_failed_fatal", "awaiting_confirmation", "responding"]);

// a bay of the fleet (/bay/SITE/BAY, fed from the fleet's store) or the local controller
const BAY = location.pathname.startsWith("/bay/")
  ? location.pathname.slice(5).split("/").map(decodeURIComponent).join("/")
  : null;
let me = { role: "VIEWER", csrf: "", actions: false };
const machines = new Set();

// -- timeline -----------------------------------------------------------------------------

// rows arrive in batches (the server's, at most four a second), hundreds a second on a busy
// bay: they are put on the page together at most four times a second (what a person can
// follow). The page keeps the newest 1,000, newest first, and makes table rows only for
// those in and near the part scrolled to, with spacers of the others' height above and
// below (the table says how many rows it has, aria-rowcount, and each row its place):
// making and laying out 1,000 rows a second took most of a core per page.
const FLUSH_MS = 250;
const MARGIN = 20;            // rows made above and below the visible ones
let kept = [];                // the rows kept, newest first
let queued = [];
let flushTimer = null;
let rowHeight = 0;            // px, one row's (cells do not wrap), measured once shown

function addRows(rows) {
  queued.push(...rows);
  if (queued.length > KEEP) queued = queued.slice(-KEEP);  // older ones would be trimmed
  if (flushTimer === null) flushTimer = setTimeout(flushRows, FLUSH_MS);
}

// one row's cells, cloned from a template: cheaper than making seven elements each time
const TEMPLATE = el("tr");
for (let i = 0; i < 7; i++) TEMPLATE.append(el("td"));
TEMPLATE.cells[0].className = "num";
const ABNORMAL = /lost|mismatch|refused|withheld|failure|exceeded|io_error|rows_lost/;

// `tr` made to show row `r` (the `index`th of the timeline), unless it does already
function fill(tr, r, index) {
  const place = String(index + 2);  // the header is row 1
  if (tr.getAttribute("aria-rowindex") !== place) tr.setAttribute("aria-rowindex", place);
  if (tr.dataset.seq === String(r.seq)) return;
  tr.dataset.seq = String(r.seq);
  tr.dataset.machine = r.machine;
  const texts = [r.seq, r.utc || `t=${r.time_ns}`, r.machine, r.event, r.source, r.target, r.detail];
  for (let i = 0; i < 7; i++) tr.cells[i].textContent = texts[i] === null || texts[i] === undefined ? "" : String(texts[i]);
  tr.cells[6].title = r.detail ? String(r.detail) : "";  // the whole text, where it is cut
  tr.cells[5].className = ABNORMAL.test(`${r.event} ${r.target}`) ? "abnormal" : "";
}

// where the timeline is scrolled to, read before the page changes anything (a read after
// a write makes the browser lay the page out at once, then again for the frame)
function geometry() {
  const box = $("timeline-scroll");
  const first = $("timeline").tBodies[0].rows[0];
  if (!rowHeight && first) rowHeight = first.getBoundingClientRect().height;
  return { top: box.scrollTop, view: box.clientHeight, row: rowHeight || 24 };
}

function flushRows() {
  flushTimer = null;
  const at = geometry();
  const rows = queued;
  queued = [];
  kept = rows.reverse().concat(kept).slice(0, KEEP);
  for (const r of rows) addMachine(r.machine);
  display(at);
}

// table rows for the kept rows (of the machine chosen) around the visible part, the rows
// already there reused: a row that shows the same journal row is not touched
function display(at) {
  const filter = $("machine-filter").value;
  const rows = filter === "" ? kept : kept.filter((r) => r.machine === filter);
  const first = Math.max(0, Math.floor(at.top / at.row) - MARGIN);
  const last = Math.min(rows.length, Math.ceil((at.top + at.view) / at.row) + MARGIN);
  const body = $("timeline").tBodies[0];
  while (body.rows.length > last - first) body.lastElementChild.remove();
  for (let i = first; i < last; i++) {
    const tr = body.rows[i - first] || body.appendChild(TEMPLATE.cloneNode(true));
    fill(tr, rows[i], i);
  }
  const table = $("timeline");
  const count = String(rows.length + 1);  // and the header's
  if (table.getAttribute("aria-rowcount") !== count) table.setAttribute("aria-rowcount", count);
  spacer("timeline-before", first * at.row);
  spacer("timeline-after", (rows.length - last) * at.row);
}

function spacer(id, px) {
  const e = $(id);
  const h = `${px}px`;
  if (e.style.height !== h) e.style.height = h;
}

let scrolled = false;
$("timeline-scroll").addEventListener("scroll", () => {
  if (scrolled) return;
  scrolled = true;
  requestAnimationFrame(() => {
    scrolled = false;
    display(geometry());
  });
}, { passive: true });

function addMachine(name) {
  if (machines.has(name)) return;
  machines.add(name);
  const sel = $("machine-filter");
  const names = [...machines].sort();
  const opt = el("option", name);
  opt.value = name;
  const before = names.indexOf(name) + 1;  // after "all machines"
  sel.insertBefore(opt, sel.options[before] || null);
}

$("machine-filter").addEventListener("change", () => {
  $("timeline-scroll").scrollTop = 0;
  display({ ...geometry(), top: 0 });
});

// -- state --------------------------------------------------------------------------------

let lastStatus = null;

function applyState(p) {
  const c = p.controller || {};
  lastStatus = c.ok ? c : null;
  setText("clock", p.polled || "none yet");
  setText("journal-note", p.journal_error || "", "note");
  if (!c.ok) {
    setText("controller", `unreachable: ${c.error || "no answer"}`, "alarm");
  } else {
    setText("controller", "answering");
    header(c);
  }
  streams(c.ok ? c.streams || [] : [], p.retransmission_ms || {});
  lgos(c.ok ? c.lgos || [] : []);
  alarms(p.alarms || []);
  sessions(p.sessions || []);
  histogram(p.trips || 0, p.histogram || 0);
}

function header(c) {
  const word = POSITION[c.position] || "unknown";
  setText("breaker", word, word === "bad" ? "alarm" : word === "intermediate" || word === "unknown" ? "abnormal" : "");
  const t = Number(c.position_utc_ns || 0);
  setText("position-time", t > 0 ? new Date(t / 1e6).toISOString() : "no report yet");
  const bay = c.breaker;
  setText("bay-state", bay, bay === "breaker_failure" ? "alarm" : "");
  setText("mode", c.mode, c.mode === "on" ? "" : "abnormal");
  setText("simulation", c.simulation ? "on" : "off", c.simulation ? "abnormal" : "");
  setText("link", c.link, c.link === "up" ? "" : "alarm");
  for (const side of ["A", "B"]) {
    const states = (c.streams || []).map((s) => (s.sides || {})[side]).filter((x) => x);
    const id = side === "A" ? "net-a" : "net-b";
    if (!states.length) setText(id, "no stream");
    else if (states.includes("lost")) setText(id, "lost", "alarm");
    else if (states.every((x) => x === "valid")) setText(id, "ok");
    else setText(id, states.includes("valid") ? "ok" : "waiting");
  }
}

const STREAM_ABNORMAL = { lost: "alarm", config_mismatch: "alarm", suspect: "abnormal", simulated: "abnormal" };
const lastCounts = new Map();

function streams(list, retrans) {
  const rows = list.map((s) => {
    // a test set's stream the controller does not take is abnormal, never an alarm
    const taken = !s.simulated || (lastStatus && lastStatus.simulation);
    const cls = STREAM_ABNORMAL[s.state] === "alarm" && !taken ? "abnormal" : STREAM_ABNORMAL[s.state];
    const before = lastCounts.get(s.id) || {};
    const now = s.counts || {};
    const moved = Object.keys(now).filter((k) => now[k] !== (before[k] || 0));
    lastCounts.set(s.id, now);
    const iv = retrans[s.id] || [];
    const sides = Object.entries(s.sides || {}).sort();
    const words = sides.map(([k, v]) => `${k} ${v}`).join(", ");
    return {
      data: { stream: String(s.stream) },
      cells: [
        txt(s.simulated ? `${s.stream} (simulated)` : s.stream),
        txt(s.gocbRef),
        txt(`0x${Number(s.appid).toString(16).padStart(4, "0")}`),
        txt(s.state, cls, "state"),
        txt(moved.join(", ") || "none", moved.some((k) => k.startsWith("refused_") || /out_of_order|missed|rollback/.test(k)) ? "abnormal" : ""),
        number(s.stNum),
        number(s.sqNum),
        number(s.tal_ms),
        number(s.tal_left_ms),
        number(iv.length ? iv[iv.length - 1] : null),
        { cls: "", key: iv.join(","), draw: () => spark(iv) },  // redrawn when its data changed
        number(s.confRev),
        txt(words || s.side, sides.some(([, v]) => v === "lost") ? "alarm" : "", "sides"),
      ],
    };
  });
  syncBody("streams", rows.length ? rows : [emptyRow(13, "No GOOSE stream received yet.")]);
}

function spark(values) {
  const NS = "http://www.w3.org/2000/svg";
  const w = 120, h = 24;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", String(w));
  svg.setAttribute("height", String(h));
  svg.setAttribute("role", "img");
  const title = document.createElementNS(NS, "title");
  if (values.length < 2) {
    title.textContent = "not enough retransmissions measured yet";
  } else {
    const lo = Math.min(...values), hi = Math.max(...values);
    title.textContent = `retransmission intervals, last ${values.length}: ${lo} to ${hi} ms`;
    const pts = values.map((v, i) => {
      const x = (i * (w - 2)) / (values.length - 1) + 1;
      const y = hi === lo ? h / 2 : h - 2 - ((v - lo) * (h - 4)) / (hi - lo);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", pts.join(" "));
    svg.append(line);
  }
  svg.setAttribute("aria-label", title.textContent);
  svg.prepend(title);
  return svg;
}

const bool = (on, cls) => txt(on ? "true" : "false", cls);

function lgos(list) {
  const rows = list.map((v) => ({
    data: {},
    cells: [
      txt(v.stream),
      bool(v.St, v.St ? "" : "alarm"),
      bool(v.SimSt, v.SimSt ? "abnormal" : ""),
      number(v.LastStNum),
      number(v.ConfRevNum),
      number(v.RxConfRevNum),
      bool(v.NdsCom, v.NdsCom ? "alarm" : ""),
      txt(v.ErrSt || "none", v.St ? "" : "alarm"),
    ],
  }));
  syncBody("lgos", rows.length ? rows : [emptyRow(8, "No subscription seen yet.")]);
}

function alarms(list) {
  const rows = list.map((a) => ({
    data: {},
    cells: [
      txt(a.priority),
      txt(a.state === "active" ? "active, unacknowledged" : "returned to normal, unacknowledged",
        a.state === "active" ? "alarm" : ""),
      txt(a.text),
      txt(a.since),
    ],
  }));
  syncBody("alarms", rows.length ? rows : [emptyRow(4, "No alarm.")]);
}

function sessions(list) {
  const order = (s) => (s.state === "awaiting_confirmation" ? 0 : ACTIVE.has(s.state) ? 1 : 2);
  const sorted = [...list].sort((a, b) => order(a) - order(b) || a.session.localeCompare(b.session));
  const rows = sorted.map((s) => {
    const waiting = s.state === "awaiting_confirmation";
    const operator = me.actions && me.role === "OPERATOR";
    return {
      data: { session: String(s.session) },
      cells: [
        txt(s.session),
        txt(s.procedure),
        txt(waiting ? "awaiting confirmation" : s.state, waiting ? "abnormal" : ""),
        txt(s.step),
        // the buttons made again only when what they act on changed: a click in flight
        // keeps its button (disabled) while the snapshots go on
        { cls: "", key: JSON.stringify([operator, s.session, s.step, s.state]), draw: () => actions(s, operator) },
      ],
    };
  });
  syncBody("sessions", rows.length ? rows : [emptyRow(5, "No agent session.")]);
}

function actions(s, operator) {
  const out = document.createDocumentFragment();
  if (operator) {
    if (s.state === "awaiting_confirmation") out.append(button("Confirm", s, "confirm"));
    if (ACTIVE.has(s.state)) out.append(button("Abort", s, "abort"));
  }
  if (!out.childElementCount) out.append("-");
  return out;
}

const sent = new Set();   // (session, step, action) this page already sent

function button(label, s, action) {
  const b = el("button", label);
  b.type = "button";
  b.setAttribute("aria-label", `${label} step ${s.step} of session ${s.session}`);
  const key = `${s.session}/${s.step}/${action}`;
  b.disabled = sent.has(key);
  b.addEventListener("click", async () => {
    if (sent.has(key)) return;
    sent.add(key);
    b.disabled = true;
    const out = $("action-result");
    try {
      const r = await fetch(`/api/sessions/${encodeURIComponent(s.session)}/${action}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": me.csrf },
        body: JSON.stringify({ step: s.step }),
      });
      const reply = await r.json();
      out.textContent = reply.ok
        ? `${action} ${s.session} step ${s.step}: ${reply.state || "done"}`
        : `${action} ${s.session} step ${s.step} refused: ${reply.error}`;
    } catch (err) {
      sent.delete(key);
      b.disabled = false;
      out.textContent = `${action} ${s.session}: no answer (${err})`;
    }
  });
  return b;
}

// the histogram's image fetched again only when the server drew a new one
let drawn = -1;

function histogram(n, version) {
  if (n === 0 || version === drawn) return;
  drawn = version;
  const img = $("histogram");
  img.src = `/api/histogram.svg?v=${version}`;
  img.hidden = false;
  setText("latency-note", `The controller's last ${n} trips and closes: from the frame in to the command handed to the device.`, "note");
}

async function start() {
  try {
    const r = await fetch("/api/me");
    if (r.ok) me = await r.json();
  } catch (err) {
    // the stream below says disconnected; the page stays read-only
  }
  $("role").textContent = `signed in as ${me.name || "anonymous"}, role ${me.role}` +
    (me.actions ? "" : " (read-only: no actions)");
  if (BAY !== null) {
    document.title = `goosectl: bay ${BAY}`;
    $("title").textContent = `goosectl bay ${BAY}`;
    const back = $("fleet-link");
    back.hidden = false;
  }
  openStream("/events", BAY === null ? {} : { bay: BAY }, { journal: addRows, state: applyState });
}

start();
