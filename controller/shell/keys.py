"""The shell's side of IEC 62351-6 keys: UTC for the keys' windows, the GMAC IV prefix, and
reloading the key file on SIGHUP or a control request.

The core never reads a clock: it is told UTC minus the loop's monotonic clock now and then
(`GooseHub.set_utc_offset`), and six random octets per process that start every GMAC IV
(`GooseHub.set_iv_prefix`). A reload reads the whole file first: a bad file changes
nothing (the old keys stay in force), raises the `keys` alarm and is journaled with its
reason; a good one replaces the keys from the next frame on and is journaled too.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from goosectl.controller import logs
from goosectl.controller.config.keys import load_keys
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.goose.hub import GooseHub

log = logging.getLogger(__package__)
#: how often the UTC offset is read again (NTP slews the realtime clock slowly)
SYNC_EVERY_NS = 1_000_000_000


class KeyService:
    def __init__(self, hub: GooseHub, path: str | None, control_log: Any = None) -> None:
        self.hub = hub
        self.path = path
        self.control_log = control_log
        self.pending = False
        self.next_sync = 0
        self.reloads = 0
        self.failed = 0
        self.last_error: str | None = None

    def start(self) -> None:
        self.hub.set_iv_prefix(os.urandom(6))
        self.sync(time.monotonic_ns())

    def sync(self, now_ns: int) -> None:
        self.hub.set_utc_offset(time.time_ns() - time.monotonic_ns())
        self.next_sync = now_ns + SYNC_EVERY_NS

    def request(self) -> None:
        """From a signal handler: the reload happens in the loop's next round."""
        self.pending = True

    def tick(self, now_ns: int) -> None:
        if now_ns >= self.next_sync:
            self.sync(now_ns)
        if self.pending:
            self.pending = False
            reply = self.reload(now_ns, "SIGHUP")
            if self.control_log is not None:  # a control request is journaled by the socket
                self.control_log.request("SIGHUP", "reload_keys", reply, now_ns)

    def reload(self, now_ns: int, who: str) -> dict[str, Any]:
        """Read the key file again; the reply of the control request (and its journal row)."""
        if self.path is None:
            reply: dict[str, Any] = {"ok": False, "error": "no key file (goose.keys, --keys)"}
        else:
            try:
                keys = load_keys(self.path)
            except ConfigError as exc:
                self.failed += 1
                self.last_error = str(exc)
                reply = {"ok": False, "error": f"key file kept as it was: {exc}"}
                logs.event(
                    log, logging.WARNING, "keys", "key file %s not reloaded: %s", self.path, exc,
                    path=self.path, ok=False, detail=str(exc),
                )  # fmt: skip
                if self.control_log is not None:
                    self.control_log.crossed("keys", f"{self.path}: {exc}", now_ns)
            else:
                self.hub.set_keys(keys)
                self.reloads += 1
                self.last_error = None
                reply = {"ok": True, "keys": sorted(keys.keys), "path": self.path}
                logs.event(
                    log, logging.INFO, "keys", "key file %s reloaded: key ids %s", self.path,
                    sorted(keys.keys), path=self.path, ok=True,
                )  # fmt: skip
        return reply

    def ops(self, fallback: Any) -> Any:
        """A control socket handler: `{"op": "reload_keys"}` here, the rest to `fallback`."""

        def handle(req: dict[str, Any], now_ns: int) -> dict[str, Any]:
            if req.get("op") == "reload_keys":
                return self.reload(now_ns, "control socket")
            result: dict[str, Any] = fallback(req, now_ns)
            return result

        return handle
