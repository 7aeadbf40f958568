"""The live shell: the only code that touches the world while the controller runs.

Raw Ethernet sockets and their receive rings (`goose_live`), the serial port
(`serial_link`), the control socket and its journal (`control*`), locks on the state folder
and the device (`locks`), the journal's writer thread (`journal_writer`), real-time
scheduling (`realtime`), the host clock's quality (`hostclock`), the one `selectors` loop
that drives the pure machines with them (`loop.Loop`: named sources served in a fixed order,
GOOSE sockets, serial port, control socket, then timers and idle work; `goose_live.LiveGoose`
is its GOOSE source and timers, R-GOOSE, PRP supervision, the serial port of
`live_bay.BayLive` and the control socket plug in as more sources), and the one
composition of a live controller from a config and the run's options (`assemble`).

May import: `protocols`, `controller.engine`, `controller.goose`, `controller.link`,
`controller.logic`, `controller.agent`, `controller.report`, `controller.config` modules.
Imported by: `controller.commands`, `controller.demo`, `lab`, tests. Never imports
`firmware_sim` (the device is whatever answers on the port).
"""
