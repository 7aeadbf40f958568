"""The reference pages generated from the code: the CLI from argparse, the config from the
pydantic models, the journal's schema from the SQL that creates it.

`python -m tests.docs.reference` writes them into docs/reference/; the docs test checks
the committed pages equal what this produces, so a new option or field that is not in the
reference fails CI until the page is regenerated.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tests.support.peers import REPO

OUT = REPO / "docs" / "reference"
WIDTH = "100"


def _subcommands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, str]]:
    """(command line, help text) for `parser` and every subcommand below it."""
    out = [(prefix, parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                out += _subcommands(sub, f"{prefix} {name}")
    return out


def cli_md() -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        from goosectl.controller.cli import build_parser

        parser = build_parser()
        pages = _subcommands(parser, "goosectl")
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    # the control socket's default depends on who asks (root, $XDG_RUNTIME_DIR): named
    from goosectl.controller.shell.control_socket import default_path

    here = str(default_path())
    pages = [(cmd, text.replace(here, "<runtime dir>/control.sock")) for cmd, text in pages]
    lines = [
        "# Command reference",
        "",
        "Generated from the argument parser (`python -m tests.docs.reference`); every",
        "command's `--help` prints the same text (`<runtime dir>` is where the control socket",
        "lives for the user who asks: docs/security-model.md).",
        "",
    ]
    for cmd, text in pages:
        lines += [f"## `{cmd}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " / ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    t = prop.get("type", "any")
    if t == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if t == "object" and "additionalProperties" in prop:
        return f"map of {_type(prop['additionalProperties'])}"
    return str(t)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def config_md() -> str:
    import json

    import goosectl.controller as controller
    from goosectl.controller.config.bay import ControllerConfig

    # a packaged default is a path into the installed package: shown as such
    where = str(Path(controller.__file__).parent)
    schema = json.loads(
        json.dumps(ControllerConfig.model_json_schema()).replace(where, "<package controller>")
    )
    defs = schema.get("$defs", {})
    lines = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models (`python -m tests.docs.reference`): every section",
        "and field of the controller config, its type, its default and what it is for. The",
        "top level is `ControllerConfig`; a type in a cell is the model of that name below.",
        "",
    ]
    models = [("ControllerConfig", schema), *sorted(defs.items())]
    for name, model in models:
        props = model.get("properties")
        if not props:
            continue
        lines += [f"## {name}", ""]
        if model.get("description"):
            lines += [_cell(model["description"]), ""]
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        required = set(model.get("required", ()))
        for field, prop in props.items():
            default = "required" if field in required else f"`{prop.get('default')!r}`"
            if field not in required and "default" not in prop:
                default = "its model's defaults"
            desc = _cell(prop.get("description", ""))
            lines.append(f"| `{field}` | {_cell(_type(prop))} | {_cell(default)} | {desc} |")
        lines.append("")
    return "\n".join(lines)


def journal_md() -> str:
    from goosectl.controller.shell.journal_store import SCHEMA

    return "\n".join(
        [
            "# Journal schema",
            "",
            "Generated from the SQL that creates every journal file",
            "(`controller/shell/journal_store.py` `SCHEMA`; `python -m tests.docs.reference`).",
            "What the rows mean, durability and",
            "retention: [engine.md](../engine.md).",
            "",
            "```sql",
            SCHEMA.strip(),
            "```",
            "",
        ]
    )


PAGES = {"cli.md": cli_md, "config.md": config_md, "journal-schema.md": journal_md}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in PAGES.items():
        (OUT / name).write_text(make(), encoding="utf-8")
        print(OUT / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
