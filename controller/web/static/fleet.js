// The fleet page: one row per bay from the collector's store, live over one event stream;
// every string from the store placed with textContent, links built from encoded names.
import { cell, el, emptyRow, num, openStream, POSITION, replaceBody, setText } from "./live.js";

const LIVENESS = { online: "", stale: "abnormal", dead: "alarm" };

function apply(p) {
  const bays = p.fleet || [];
  setText("clock", p.polled || "none yet");
  setText("store", p.error ? p.error : "read", p.error ? "alarm" : "");
  setText("count", String(bays.length));
  const down = bays.filter((b) => b.liveness !== "online").length;
  setText("not-online", down ? String(down) : "none", down ? "abnormal" : "");
  const rows = bays.map((b) => {
    const tr = el("tr");
    tr.dataset.bay = b.key;
    const a = el("a", `${b.site}/${b.bay}`);
    a.href = `/bay/${encodeURIComponent(b.site)}/${encodeURIComponent(b.bay)}`;
    cell(tr, "").append(a);
    cell(tr, b.liveness, LIVENESS[b.liveness] || "").dataset.field = "liveness";
    const word = POSITION[b.breaker] || "unknown";
    cell(tr, b.bay_state === "breaker_failure" ? `${word} (breaker failure)` : word,
      word === "bad" || b.bay_state === "breaker_failure" ? "alarm" : "").dataset.field = "breaker";
    cell(tr, b.mode || "unknown", b.mode && b.mode !== "on" ? "abnormal" : "");
    const alarms = cell(tr, b.alarms ? `${b.alarms} active` : "none", b.alarms ? "alarm" : "");
    alarms.dataset.field = "alarms";
    const bad = b.lgos_total - b.lgos_valid;
    cell(tr, `${b.lgos_valid}/${b.lgos_total} valid`, bad ? "alarm" : "");
    num(tr, b.last_seq);
    num(tr, b.lag);
    cell(tr, b.state_utc || "never");
    return tr;
  });
  replaceBody("bays", rows.length ? rows : [emptyRow(9, "No bay in the store yet.")]);
}

openStream("/events", {}, { state: apply });

