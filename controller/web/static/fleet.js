// The fleet page: one row per bay from the collector's store, live over one event stream;
// every string from the store placed with textContent, links built from encoded names.
import { el, emptyRow, number, openStream, POSITION, setText, syncBody, txt } from "./live.js";

const LIVENESS = { online: "", stale: "abnormal", dead: "alarm" };

function apply(p) {
  const bays = p.fleet || [];
  setText("clock", p.polled || "none yet");
  setText("store", p.error ? p.error : "read", p.error ? "alarm" : "");
  setText("count", String(bays.length));
  const down = bays.filter((b) => b.liveness !== "online").length;
  setText("not-online", down ? String(down) : "none", down ? "abnormal" : "");
  const rows = bays.map((b) => {
    const word = POSITION[b.breaker] || "unknown";
    const failed = b.bay_state === "breaker_failure";
    const bad = b.lgos_total - b.lgos_valid;
    const href = `/bay/${encodeURIComponent(b.site)}/${encodeURIComponent(b.bay)}`;
    return {
      data: { bay: String(b.key) },
      cells: [
        { cls: "", key: `${href}\u0000${b.site}/${b.bay}`, draw: () => link(href, `${b.site}/${b.bay}`) },
        txt(b.liveness, LIVENESS[b.liveness] || "", "liveness"),
        txt(failed ? `${word} (breaker failure)` : word, word === "bad" || failed ? "alarm" : "", "breaker"),
        txt(b.mode || "unknown", b.mode && b.mode !== "on" ? "abnormal" : ""),
        txt(b.alarms ? `${b.alarms} active` : "none", b.alarms ? "alarm" : "", "alarms"),
        txt(`${b.lgos_valid}/${b.lgos_total} valid`, bad ? "alarm" : ""),
        number(b.last_seq),
        number(b.lag),
        txt(b.state_utc || "never"),
      ],
    };
  });
  syncBody("bays", rows.length ? rows : [emptyRow(9, "No bay in the store yet.")]);
}

function link(href, text) {
  const a = el("a", text);
  a.href = href;
  return a;
}

openStream("/events", {}, { state: apply });

