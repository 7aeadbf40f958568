"""One config model for a bay controller, and the loaders that produce it.

Models (pure pydantic, no I/O), one module per thing configured:

- `goose.py`: GOOSE subscriptions, publishers, A/B, receive rings (`GooseConfig`)
- `link.py`: the device link's timing and limits (`LinkConfig`, `DeviceLimits`)
- `control.py`: the control socket's place, peers and limits (`ControlCfg`)
- `agent.py`: the agent's sessions (`AgentCfg`)
- `bay.py`: the top-level model, `ControllerConfig`: the above plus the device, the logic
  and the maps between GOOSE and the bay (inputs, publications); modes; the packaged
  default (`defaults/bay1.yaml`)

Loaders (they read files), every one producing the models above with errors that name the
file, the field and the reason:

- `load.py`: `load_config`, the entry every command uses (YAML/TOML/JSON, or SCL by suffix)
- `validate.py`: parsed data -> a model, `ConfigError` in the one error format
- `scl/`: one IED of an SCL file (with a YAML overlay) -> the same models; the `scl show`
  view and the wire checked against the SCL

Imports: protocols and controller.engine only. Everything that is configured (goose,
link, logic, agent, shell, commands) imports its model from here; nothing here imports them.
"""
