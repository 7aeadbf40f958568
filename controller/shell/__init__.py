"""The live shell: the only code that touches the world while the controller runs.

Raw Ethernet sockets and their receive rings (`goose_live`), the serial port
(`serial_link`), the control socket and its journal (`control*`), locks on the state folder
and the device (`locks`), the journal's writer thread (`journal_writer`), real-time
scheduling (`realtime`), the host clock's quality (`hostclock`), the one `selectors` loop
that drives the pure machines with them (`goose_live.LiveGoose.run`, served for a bay by
`live_bay.BayLive`), and the one composition of a live controller from a config and the
run's options (`assemble`).

May import: `protocols`, `controller.engine`, `controller.goose`, `controller.link`,
`controller.logic`, `controller.agent`, `controller.report`, `controller.config` modules.
Imported by: `controller.commands`, `controller.demo`, `lab`, tests. Never imports
`firmware_sim` (the device is whatever answers on the port).
"""
