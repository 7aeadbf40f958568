"""Decide whether a test that needs a peer (tshark, libiec61850, root) runs or skips.

On a developer's machine a missing peer skips with the reason. In CI (`.ci/run` sets
GOOSECTL_REQUIRE_PEERS=1) the same absence is a failure, so a green CI never hides a peer
that was not installed. Every skip in tests/ and benchmarks/ goes through `_require`.

The one exception is a kernel built without a feature (`require_kernel_feature`): no
package CI can install adds it, so that stays a skip naming the kernel option and module.

The real-world corpora the tests read (captures, SCL) live in tests/data with their
PROVENANCE.md, so a plain clone runs the suite.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
CAPTURES = DATA / "captures"
SCL = DATA / "scl"


def _require(ok: bool, reason: str) -> None:
    if ok:
        return
    if os.environ.get("GOOSECTL_REQUIRE_PEERS") == "1":
        pytest.fail(f"required peer missing in CI: {reason}")
    pytest.skip(reason)


def require_tshark() -> str:
    path = shutil.which("tshark")
    _require(path is not None, "tshark is not installed (Debian package tshark)")
    return path or ""


#: where administration tools (tc, ip) live when a user's PATH leaves them out: a plain
#: user's PATH on Debian has no sbin, yet the tools are there and run (as root)
SYSTEM_BIN = ("/usr/sbin", "/sbin")


def find_binary(name: str) -> str | None:
    """`name` on PATH, or else in /usr/sbin or /sbin."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SYSTEM_BIN))


def require_binary(name: str, package: str) -> str:
    path = find_binary(name)
    _require(path is not None, f"{name} is not installed (Debian package {package})")
    return path or ""


def require_root() -> None:
    _require(os.geteuid() == 0, "needs root for network namespaces and raw sockets")
    _require(find_binary("ip") is not None, "needs iproute2 (`ip`) for namespaces")


def require_iec61850():
    try:
        import pyiec61850.pyiec61850 as iec
    except ImportError as exc:  # pragma: no cover - depends on the machine
        _require(False, f"libiec61850 bindings not importable (pip pyiec61850-ng): {exc}")
        raise
    return iec


def capture_files() -> list[Path]:
    files = sorted(CAPTURES.glob("*.pcap*"))
    _require(bool(files), f"no captures found in {CAPTURES}")
    return files


def _kernel_config() -> dict[str, str] | None:
    """The running kernel's build options (`CONFIG_X` -> y/m), or None when unpublished.

    Read from /proc/config.gz, else /boot/config-<release>; an option that is absent or
    `# ... is not set` is not built.
    """
    release = os.uname().release
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{release}")):
        try:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        pairs = (line.split("=", 1) for line in lines if line.startswith("CONFIG_"))
        return {key: value for key, value in pairs}
    return None


def require_kernel_feature(works: bool, *, what: str, option: str, module: str) -> None:
    """Skip or fail when the kernel cannot do `what` (built by `option`, module `module`).

    A kernel whose published config has neither `option` built in nor as a module is a
    kernel limit: no package CI installs can lift it, so it skips even in CI, naming the
    module. Anything else (module built but not loadable, config unpublished) is a
    missing peer under the usual rule: `modprobe` or the kernel's module package fixes it.
    """
    if works:
        return
    config = _kernel_config()
    release = os.uname().release
    if config is not None and config.get(option) not in ("y", "m"):
        no_modules = "" if config.get("CONFIG_MODULES") == "y" else " nor module loading"
        pytest.skip(
            f"{what} needs kernel module {module}; kernel {release} is built without "
            f"{option}{no_modules}: a kernel limit no package CI installs can lift"
        )
    _require(False, f"{what} needs kernel module {module} ({option}): `modprobe {module}`")
