"""`goosectl demo`: the README's main job (see controller/demo/offline.py)."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

from goosectl.controller.cli import CommandError
from goosectl.controller.config.bay import DEFAULT_CONFIG
from goosectl.controller.config.validate import ConfigError

log = logging.getLogger(__package__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="build a scenario, replay it through the controller and "
        "the simulated breaker, report (no root needed)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the pcaps, journal and report (default: ./goosectl-demo-<UTC time>)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_CONFIG,
        help="the controller's config: YAML/TOML/JSON, or SCL with --ied "
        "(examples/scl/bay1.scd --ied GCTL1 describes the demo's substation)",
    )
    p.add_argument("--ied", help="with an SCL --config: the IED the controller is")
    p.add_argument(
        "--in-memory",
        action="store_true",
        help="connect the simulator in memory instead of over a real pty",
    )
    p.add_argument(
        "--serve",
        type=float,
        metavar="SECONDS",
        help="after the scenario keep the controller running and serve `goosectl agent` "
        "for SECONDS (0: until Ctrl-C)",
    )
    p.add_argument("--control", type=Path, help="control socket path (with --serve)")
    p.add_argument(
        "--web",
        nargs="?",
        const="127.0.0.1:8061",
        metavar="HOST:PORT",
        help="play the scenario at real speed with `goosectl web` live on it (default "
        "127.0.0.1:8061; port 0: any free one), print its URL, serve until Ctrl-C",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="on veth pairs in namespaces with libiec61850 as the protection IED (root)",
    )
    p.set_defaults(func=run)


def claim_folder(out: Path | None, prefix: str) -> Path:
    """A folder this demo alone writes to: `--out` if it is new or empty, else a new
    `<prefix>-<UTC time>` (with -2, -3 ... when another demo took that name in the same
    second). Two demos never share a journal."""
    if out is not None:
        if out.exists() and not out.is_dir():
            raise CommandError(f"--out {out}: exists and is not a folder (give a new folder)")
        if out.is_dir():
            why = not_private(out)
            if why is not None:
                raise CommandError(f"--out {out}: {why}: give a folder of your own, or a new one")
            try:
                taken = sorted(p.name for p in out.iterdir())
            except OSError as exc:
                raise CommandError(f"--out {out}: {exc.strerror}") from None
            if taken:
                raise CommandError(
                    f"--out {out}: already holds {', '.join(taken[:3])}"
                    f"{' ...' if len(taken) > 3 else ''}: each demo needs a new or empty folder"
                )
            return out
        if not out.parent.is_dir():  # a typo in the path must not grow a tree of folders
            raise CommandError(
                f"--out {out}: its parent folder {out.parent} does not exist (create it first)"
            )
        candidates = [out]
    else:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
        base = f"{prefix}-{stamp}"
        candidates = [Path(base)] + [Path(f"{base}-{n}") for n in range(2, 100)]
    for folder in candidates:
        try:
            # private: nobody else can plant a link at a name the demo is about to write
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            where = "" if out is not None else " (--out DIR writes elsewhere)"
            raise CommandError(
                f"cannot create the demo's folder {folder.resolve()}: {exc.strerror}{where}"
            ) from None
        return folder
    raise CommandError(f"--out {out}: another demo took it first" if out else "no free folder name")


def not_private(folder: Path) -> str | None:
    """Why an existing folder is not one only we can write into (so that nobody can plant
    a link in it at a name we are about to create), or None."""
    st = folder.lstat()
    if not stat.S_ISDIR(st.st_mode):
        return "is a symbolic link, not a folder"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _progress(fraction: float, text: str) -> None:
    """The scenario's steps as they run: a diagnostic on stderr (-q hides it); the report
    is stdout's."""
    log.info("[%5.1f%%] %s", fraction * 100, text)


def run(args: argparse.Namespace) -> int:
    from goosectl.controller.config.bay import ControllerConfig
    from goosectl.controller.config.load import load_config

    try:  # a bad config is reported before any folder is made
        load_config(args.config, ControllerConfig, args.ied)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    if args.live:
        from goosectl.controller.demo.live import run_live_demo

        args.out = claim_folder(args.out, "goosectl-demo-live")
        return run_live_demo(args)
    from goosectl.controller.demo.offline import report_lines, run_demo

    folder = claim_folder(args.out, "goosectl-demo")
    print(f"goosectl demo: writing to {folder}/")
    web = WebPage(args.web, folder / "journal.sqlite") if args.web else None
    try:
        result = run_demo(
            folder,
            args.config,
            pty=not args.in_memory,
            ied=args.ied,
            progress=_progress,
            serve_s=0 if web is not None and args.serve is None else args.serve,
            control=args.control,
            real_speed=web is not None,
            on_serving=web.start if web is not None else None,
        )
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    finally:
        if web is not None:
            web.stop()
    print("\n".join(report_lines(result)))
    return 0


class WebPage:
    """`goosectl web` beside the demo, as its own process: the demo is the controller, and
    the controller never imports the web code (a page that fails cannot stop it)."""

    def __init__(self, bind: str, journal: Path) -> None:
        self.bind, self.journal = bind, journal
        self.proc: subprocess.Popen[str] | None = None

    def start(self, control: Path) -> None:
        argv = [sys.executable, "-m", "goosectl", "web", "--control", str(control)]
        argv += ["--journal", str(self.journal), "--bind", self.bind]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None  # piped above
        line = self.proc.stdout.readline().strip()
        if not line.startswith("goosectl web: "):
            self.stop()
            raise CommandError(f"goosectl web did not start (--web {self.bind}): see above")
        url = line.removeprefix("goosectl web: ")
        print(f"goosectl demo: the page is live at {url} (Ctrl-C ends the demo)", flush=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
