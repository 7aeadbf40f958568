"""A publishing control block: the publisher machine plus the template that makes bytes."""

from __future__ import annotations

from pathlib import Path

from controller.engine import Table
from controller.goose.config import PublisherCfg
from controller.goose.effects import SendFrame, Transmit
from protocols.goose import FrameTemplate, GooseFrame, UtcTime, Vlan, all_data_from_json

TABLE_PATH = Path(__file__).parent / "tables" / "publisher.yaml"
S_BIT = 0x8000
#: Time quality of `t`: leap seconds known, clock neither failed nor unsynchronised,
#: 10 bits of accuracy (~1 ms). The runtime's clock is what it is; this says so honestly
#: for a host synchronised by NTP.
DEFAULT_TIME_QUALITY = 0x8A


class Publisher:
    __slots__ = ("cfg", "id", "template", "time_quality")

    def __init__(self, cfg: PublisherCfg, time_quality: int = DEFAULT_TIME_QUALITY) -> None:
        self.cfg = cfg
        self.id = f"pub:{cfg.name or cfg.gocb_ref}"
        self.time_quality = time_quality
        vlan = Vlan(cfg.vlan.id, cfg.vlan.priority) if cfg.vlan is not None else None
        self.template = FrameTemplate(
            GooseFrame(
                gocb_ref=cfg.gocb_ref,
                dat_set=cfg.dat_set,
                go_id=cfg.go_id,
                conf_rev=cfg.conf_rev,
                simulation=cfg.simulation,
                nds_com=cfg.nds_com,
                num_dat_set_entries=len(cfg.members) if cfg.members else len(cfg.initial),
                dst=cfg.dst,
                src=cfg.src,
                vlan=vlan,
                appid=cfg.appid,
                reserved1=S_BIT if cfg.simulation else 0,
            )
        )

    def machine(self, table: Table):
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
        )

    def initial_values(self) -> tuple:
        return all_data_from_json(self.cfg.initial)

    def frame(self, tx: Transmit) -> SendFrame:
        t = UtcTime.from_ns(tx.t_ns)
        t = UtcTime(t.seconds, t.fraction, self.time_quality)
        data = self.template.build(tx.st_num, tx.sq_num, tx.tal_ms, t, tx.data)
        return SendFrame(self.cfg.gocb_ref, tx.sides, data)


def load_table() -> Table:
    return Table.load(TABLE_PATH)
