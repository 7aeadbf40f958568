// The bay page: one EventSource, every string placed with textContent (never as HTML),
// colour only on abnormal cells and always beside the word that says why.
import { $, cell, el, emptyRow, num, openStream, POSITION, replaceBody, setText } from "./live.js";

const KEEP = 1000;            // timeline rows kept (the server sends at most as many)
const ACTIVE = new Set(["receiving_input", "planning", "waiting_for_tool", "tool_failed_retryable",
  "tool_failed_fatal", "awaiting_confirmation", "responding"]);

// a bay of the fleet (/bay/SITE/BAY, fed from the fleet's store) or the local controller
const BAY = location.pathname.startsWith("/bay/")
  ? location.pathname.slice(5).split("/").map(decodeURIComponent).join("/")
  : null;
let me = { role: "VIEWER", csrf: "", actions: false };
let trips = 0;
const machines = new Set();

// -- timeline -----------------------------------------------------------------------------

// rows arrive one event each, hundreds a second on a busy bay: they are put on the page
// together, at most ten times a second, so the browser lays the table out once per batch
let queued = [];
let flushTimer = null;

function addRow(r) {
  queued.push(r);
  if (queued.length > KEEP) queued = queued.slice(-KEEP);  // older ones would be trimmed
  if (flushTimer === null) flushTimer = setTimeout(flushRows, 100);
}

function rowOf(r, filter) {
  const tr = el("tr");
  tr.dataset.seq = String(r.seq);
  tr.dataset.machine = r.machine;
  num(tr, r.seq);
  cell(tr, r.utc || `t=${r.time_ns}`);
  cell(tr, r.machine);
  cell(tr, r.event);
  cell(tr, r.source);
  const abnormal = /lost|mismatch|refused|withheld|failure|exceeded|io_error|rows_lost/;
  cell(tr, r.target, abnormal.test(`${r.event} ${r.target}`) ? "abnormal" : "");
  cell(tr, r.detail);
  tr.hidden = filter !== "" && filter !== r.machine;
  return tr;
}

function flushRows() {
  flushTimer = null;
  const rows = queued;
  queued = [];
  const filter = $("machine-filter").value;
  const batch = document.createDocumentFragment();
  for (let i = rows.length - 1; i >= 0; i--) batch.append(rowOf(rows[i], filter));  // newest first
  const body = $("timeline").tBodies[0];
  body.prepend(batch);
  let n = body.rows.length;
  while (n-- > KEEP) body.lastElementChild.remove();
  for (const r of rows) addMachine(r.machine);
}

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
  const f = $("machine-filter").value;
  for (const tr of $("timeline").tBodies[0].rows) tr.hidden = f !== "" && f !== tr.dataset.machine;
});

// -- state --------------------------------------------------------------------------------

let lastStatus = null;

function applyState(p) {
  const c = p.controller || {};
  lastStatus = c.ok ? c : null;
  setText("clock", p.polled || "none yet");
  $("journal-note").textContent = p.journal_error || "";
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
  histogram(p.trips || 0);
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

const STREAM_ABNORMAL = { lost: "alarm", config_mismatch: "alarm", questionable: "abnormal", simulated: "abnormal" };
const lastCounts = new Map();

function streams(list, retrans) {
  const rows = list.map((s) => {
    const tr = el("tr");
    tr.dataset.stream = s.stream;
    cell(tr, s.simulated ? `${s.stream} (simulated)` : s.stream);
    cell(tr, s.gocbRef);
    cell(tr, `0x${Number(s.appid).toString(16).padStart(4, "0")}`);
    // a test set's stream the controller does not take is abnormal, never an alarm
    const taken = !s.simulated || (lastStatus && lastStatus.simulation);
    const cls = STREAM_ABNORMAL[s.state] === "alarm" && !taken ? "abnormal" : STREAM_ABNORMAL[s.state];
    cell(tr, s.state, cls || "").dataset.field = "state";
    const before = lastCounts.get(s.id) || {};
    const now = s.counts || {};
    const moved = Object.keys(now).filter((k) => now[k] !== (before[k] || 0));
    lastCounts.set(s.id, now);
    cell(tr, moved.join(", ") || "none", moved.some((k) => k.startsWith("refused_") || /out_of_order|missed|rollback/.test(k)) ? "abnormal" : "");
    num(tr, s.stNum);
    num(tr, s.sqNum);
    num(tr, s.tal_ms);
    num(tr, s.tal_left_ms);
    const iv = retrans[s.id] || [];
    num(tr, iv.length ? iv[iv.length - 1] : null);
    cell(tr, "").append(spark(iv));
    num(tr, s.confRev);
    const sides = Object.entries(s.sides || {}).sort();
    const words = sides.map(([k, v]) => `${k} ${v}`).join(", ");
    cell(tr, words || s.side, sides.some(([, v]) => v === "lost") ? "alarm" : "").dataset.field = "sides";
    return tr;
  });
  replaceBody("streams", rows.length ? rows : [emptyRow(13, "No GOOSE stream received yet.")]);
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

function lgos(list) {
  const rows = list.map((v) => {
    const tr = el("tr");
    cell(tr, v.stream);
    cell(tr, v.St ? "true" : "false", v.St ? "" : "alarm");
    cell(tr, v.SimSt ? "true" : "false", v.SimSt ? "abnormal" : "");
    num(tr, v.LastStNum);
    num(tr, v.ConfRevNum);
    num(tr, v.RxConfRevNum);
    cell(tr, v.NdsCom ? "true" : "false", v.NdsCom ? "alarm" : "");
    cell(tr, v.ErrSt || "none", v.St ? "" : "alarm");
    return tr;
  });
  replaceBody("lgos", rows.length ? rows : [emptyRow(8, "No subscription seen yet.")]);
}

function alarms(list) {
  const rows = list.map((a) => {
    const tr = el("tr");
    cell(tr, a.priority);
    const word = a.state === "active" ? "active, unacknowledged" : "returned to normal, unacknowledged";
    cell(tr, word, a.state === "active" ? "alarm" : "");
    cell(tr, a.text);
    cell(tr, a.since);
    return tr;
  });
  replaceBody("alarms", rows.length ? rows : [emptyRow(4, "No alarm.")]);
}

function sessions(list) {
  const order = (s) => (s.state === "awaiting_confirmation" ? 0 : ACTIVE.has(s.state) ? 1 : 2);
  const sorted = [...list].sort((a, b) => order(a) - order(b) || a.session.localeCompare(b.session));
  const rows = sorted.map((s) => {
    const tr = el("tr");
    tr.dataset.session = s.session;
    cell(tr, s.session);
    cell(tr, s.procedure);
    cell(tr, s.state === "awaiting_confirmation" ? "awaiting confirmation" : s.state,
      s.state === "awaiting_confirmation" ? "abnormal" : "");
    cell(tr, s.step);
    const td = cell(tr, "");
    if (me.actions && me.role === "OPERATOR") {
      if (s.state === "awaiting_confirmation") td.append(button("Confirm", s, "confirm"));
      if (ACTIVE.has(s.state)) td.append(button("Abort", s, "abort"));
    }
    if (!td.childElementCount) td.textContent = "-";
    return tr;
  });
  replaceBody("sessions", rows.length ? rows : [emptyRow(5, "No agent session.")]);
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

function histogram(n) {
  if (n === trips) return;
  trips = n;
  const img = $("histogram");
  if (n > 0) {
    img.src = `/api/histogram.svg?n=${n}`;
    img.hidden = false;
    $("latency-note").textContent = `The controller's last ${n} trips and closes: from the frame in to the command handed to the device.`;
  }
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
  openStream("/events", BAY === null ? {} : { bay: BAY }, { journal: addRow, state: applyState });
}

start();
