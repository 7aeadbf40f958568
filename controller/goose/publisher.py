"""A publishing control block: the publisher machine plus the template that makes bytes."""

from __future__ import annotations

from functools import cache

from goosectl.controller.config.goose import PublisherCfg
from goosectl.controller.engine import Table
from goosectl.controller.engine.names import Fields
from goosectl.controller.engine.resources import shipped
from goosectl.controller.goose.effects import SendFrame, Transmit
from goosectl.protocols.goose import (
    FrameTemplate,
    GooseFrame,
    UtcTime,
    Vlan,
    all_data_from_json,
    time_quality,
)

TABLE_PATH = shipped("goosectl.controller.goose", "tables", "publisher.yaml")
S_BIT = 0x8000
#: Time quality of `t` until the shell says what the host clock is worth (`goosectl run`
#: reads adjtimex): in a replay or the demo, `t` is the capture's virtual time, which no
#: clock of this host vouches for: not synchronised, accuracy unspecified.
VIRTUAL_TIME_QUALITY = time_quality(clock_not_synchronized=True)
#: Source MAC of a publisher without `src` until the shell gives the interface's own:
#: locally administered (02:...), unicast, "goose" in ASCII, so replays and the demo's
#: output pcap are byte for byte reproducible and never carry 00:00:00:00:00:00.
REPLAY_SRC = bytes.fromhex("02676f6f7365")


class Publisher:
    __slots__ = ("cfg", "id", "src", "template", "time_quality")

    def __init__(self, cfg: PublisherCfg, time_quality: int = VIRTUAL_TIME_QUALITY) -> None:
        self.cfg = cfg
        self.id = f"pub:{cfg.name or cfg.gocb_ref}"
        self.time_quality = time_quality
        self.src = cfg.src if cfg.src is not None else REPLAY_SRC
        self.template = self._template()

    def set_source(self, mac: bytes) -> None:
        """The interface's MAC; a configured `src` wins."""
        if self.cfg.src is None and mac != self.src:
            self.src = mac
            self.template = self._template()

    def _template(self) -> FrameTemplate:
        cfg = self.cfg
        vlan = Vlan(cfg.vlan.id, cfg.vlan.priority) if cfg.vlan is not None else None
        return FrameTemplate(
            GooseFrame(
                gocb_ref=cfg.gocb_ref,
                dat_set=cfg.dat_set,
                go_id=cfg.go_id,
                conf_rev=cfg.conf_rev,
                simulation=cfg.simulation,
                nds_com=cfg.nds_com,
                num_dat_set_entries=len(cfg.members) if cfg.members else len(cfg.initial),
                dst=cfg.dst,
                src=self.src,
                vlan=vlan,
                appid=cfg.appid,
                reserved1=S_BIT if cfg.simulation else 0,
            )
        )

    def machine(self, table: Table, muted: bool = False):
        c = self.cfg
        return table.new(
            self.id,
            gocb_ref=c.gocb_ref,
            members=c.members or None,
            schedule=c.schedule,
            min_ms=c.min_time_ms,
            max_ms=c.max_time_ms,
            burst=c.burst_count,
            tal_factor=c.tal_factor,
            mode=c.sides,
            muted=muted,
            max_changes=c.max_changes,
            window_ms=c.change_window_ms,
        )

    def initial_values(self) -> tuple:
        return all_data_from_json(self.cfg.initial)

    def frame(self, tx: Transmit) -> SendFrame:
        t = UtcTime.from_ns(tx.t_ns)
        t = UtcTime(t.seconds, t.fraction, self.time_quality)
        data = self.template.build(tx.st_num, tx.sq_num, tx.tal_ms, t, tx.data)
        return SendFrame(self.cfg.gocb_ref, tx.sides, data)


class PublisherFields(Fields):
    """A publisher's context read from outside its table (the hub's status view)."""

    table = "goose-publisher"
    ST = "st"
    SQ = "sq"


#: what the hub's status shows of each publisher's context
STATUS_FIELDS = (PublisherFields.ST, PublisherFields.SQ)


@cache
def load_table() -> Table:
    """The publisher table, loaded once per process (a `Table` is immutable), checked
    against the names the code reads it by."""
    return Table.load(TABLE_PATH, names=(PublisherFields,))
