"""PRP's link redundancy entity (LRE) as a pure machine: duplicate discard, the node
table, the IEC 62439-3 MIB counters and alarms. The bytes are `protocols.prp`; the
sockets are the shell's (`controller.shell.prp_live`)."""

from goosectl.controller.prp.lre import (
    COUNTERS,
    Alarm,
    Lre,
    LreConfig,
    Node,
    RxVerdict,
)

__all__ = ["COUNTERS", "Alarm", "Lre", "LreConfig", "Node", "RxVerdict"]
