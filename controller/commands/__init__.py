"""Subcommands of `goosectl`.

Each module here is one subcommand (or one group of them) and exposes
``register(subparsers) -> None``; `controller.cli` discovers the modules, so adding a
command never means editing a shared list.
"""
