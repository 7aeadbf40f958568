"""`--keys PATH` and `--auth-profile` of run, decode, replay, listen and publish.

One place reads the key file for every command, so each names a bad file the same way
(the file, the field, the reason) and each refuses to start a configuration that signs or
requires signatures without keys (it would send nothing, or accept nothing).
"""

from __future__ import annotations

import argparse

from goosectl.controller.cli import CommandError
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import KeyFile, load_keys
from goosectl.controller.config.validate import ConfigError
from goosectl.protocols.goose.security import PROFILES


def add_keys_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keys",
        metavar="PATH",
        help="IEC 62351-6 key file (default: the config's goose.keys); frames are signed "
        "and verified with its keys (docs/security-62351-6.md)",
    )
    p.add_argument(
        "--auth-profile",
        choices=sorted(PROFILES),
        help="how Reserved1/Reserved2 announce the security extension "
        "(default: the config's goose.auth_profile, else length-crc)",
    )


def keys_for(args: argparse.Namespace, goose: GooseConfig | None) -> KeyFile | None:
    """The key file named by --keys or `goose.keys` (None if neither), or a CommandError."""
    path = getattr(args, "keys", None) or (goose.keys if goose is not None else None)
    if path is None:
        needs = []
        if goose is not None:
            needs += [s.label for s in goose.subscriptions if s.auth != "off"]
            needs += [p.name or p.gocb_ref for p in goose.publishers if p.auth == "sign"]
        if needs:
            raise CommandError(
                f"{', '.join(needs)}: auth is configured but no key file is given "
                "(goose.keys or --keys PATH)"
            )
        return None
    try:
        return load_keys(path)
    except ConfigError as exc:
        raise CommandError(f"key file: {exc}") from None


def with_profile(args: argparse.Namespace, goose: GooseConfig) -> GooseConfig:
    """The config with --auth-profile applied (the command line wins)."""
    profile = getattr(args, "auth_profile", None)
    if profile is None or profile == goose.auth_profile:
        return goose
    return goose.model_copy(update={"auth_profile": profile})
