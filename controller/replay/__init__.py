"""Virtual time: the pure machines driven from a capture or an in-memory wire, no sockets.

`virtual_wire` joins two sans-IO endpoints (the controller's link and a device) on one
virtual clock; `goose_replay` and `bay_replay` feed a pcap's frames at their capture times
(`capture_clock` repairs what real captures get wrong about time). Reproducible: the same
inputs give the same bytes, at any speed.

May import: `protocols`, `controller.engine`, `controller.goose`, `controller.link`,
`controller.logic`. Imported by: `controller.demo`, `controller.commands`, `lab`, tests.
The device of a bay replay is passed in (anything with the endpoint interface), so this
package never imports `firmware_sim`.
"""
