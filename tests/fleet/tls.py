"""A test CA and a broker certificate for 127.0.0.1, made with the openssl command, and
a folder the broker's own user can read (mosquitto started as root drops to its user)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from tests.support.peers import require_binary


def open_dir() -> Path:
    """A temporary folder every user may read: pytest's own are private to root."""
    d = Path(tempfile.mkdtemp(prefix="goosectl-fleet-"))
    d.chmod(0o755)
    return d


def make_ca(root: Path, name: str = "ca") -> tuple[Path, Path]:
    """(certificate, key) of a new self-signed CA."""
    openssl = require_binary("openssl", "openssl")
    cert, key = root / f"{name}.crt", root / f"{name}.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN=goosectl test {name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def make_server_cert(root: Path, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1 and localhost, signed by `ca`."""
    openssl = require_binary("openssl", "openssl")
    cert, key, csr = root / "server.crt", root / "server.key", root / "server.csr"
    ext = root / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    subprocess.run(
        [openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(csr)],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
         "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    for p in root.iterdir():
        os.chmod(p, 0o644)
    return cert, key
