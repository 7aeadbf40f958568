"""The agent layer, pure: procedures, the tool registry, sessions on the engine.

What lives here: procedure files and their loader (`procedure.py`, checked against the
tools on load), the planner that serves them (`planner.py`, hot reload), the declared tools
(`tools.py`: names, outcomes, argument models), the session table and its actions, and the
service that runs sessions, locks equipment and checkpoints them (`service.py`), each
session on the design's four layers (`layers.py`: phase, flow, workflow, host).

No clock and no sockets or serial ports: the time comes with every call, and the shell
(`controller/agent/tool_runs.py`, `agent_host.py`) runs the tools and feeds their
results back. The only files touched are the procedure folder (the planner reads it) and
the journal the service is handed. This package imports only the engine, pydantic and
the device link's command table; nothing here imports `controller.shell`.
"""
