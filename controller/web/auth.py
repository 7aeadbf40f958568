"""Who may look and who may act on the page.

Roles as IEC 62351-8 names the two the page needs: VIEWER reads, OPERATOR also confirms
and aborts agent steps. A token file has one line per person, `ROLE NAME TOKEN` (`#`
comments), and must be readable by its owner only: a token is a password. Without a token
file the page is read-only for everyone: the loopback port is open to every local user,
while the control socket admits only the controller's own user, so the page must not hand
the socket's power to whoever can connect.

A browser signs in once (POST /login with the token) and gets a random session cookie
(HttpOnly, SameSite=Strict, Secure under TLS) and a CSRF token the page sends back with
every action; scripts may send `Authorization: Bearer TOKEN` instead of the cookie.
"""

from __future__ import annotations

import hmac
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

ROLES = ("VIEWER", "OPERATOR")


class TokenFileError(Exception):
    """A token file that cannot be used, with the line and the reason."""


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    #: the per-session secret a POST must carry (X-CSRF-Token)
    csrf: str = ""

    @property
    def operator(self) -> bool:
        return self.role == "OPERATOR"

    def label(self) -> str:
        """How the journal names who asked: `web:alice/OPERATOR`."""
        return f"web:{self.name}/{self.role}"


#: who is there when no token file was given: read-only
ANONYMOUS = Identity("anonymous", "VIEWER")


def load_tokens(path: Path) -> dict[str, Identity]:
    """token -> identity, from a file only its owner can read."""
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as exc:
        raise TokenFileError(f"token file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenFileError(
            f"token file {path}: readable by others (mode {stat.S_IMODE(mode):o}); chmod 600 {path}"
        )
    tokens: dict[str, Identity] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or parts[0] not in ROLES:
            raise TokenFileError(
                f"token file {path}:{n}: expected `ROLE NAME TOKEN` with ROLE one of "
                f"{', '.join(ROLES)}"
            )
        role, name, token = parts
        if len(token) < 16:
            raise TokenFileError(f"token file {path}:{n}: the token is shorter than 16 characters")
        if token in tokens:
            raise TokenFileError(f"token file {path}:{n}: the same token as another line")
        tokens[token] = Identity(name, role)
    if not tokens:
        raise TokenFileError(f"token file {path}: no `ROLE NAME TOKEN` line")
    return tokens


class Sessions:
    """Signed-in browsers: cookie -> identity with its CSRF token. In memory: a restart of
    `goosectl web` signs everyone out, which is the safe side."""

    def __init__(self, tokens: dict[str, Identity] | None) -> None:
        self.tokens = tokens
        self._by_cookie: dict[str, Identity] = {}
        self._lock = threading.Lock()
        #: the one identity everybody has without a token file (read-only, one CSRF token)
        self.anonymous = Identity(ANONYMOUS.name, ANONYMOUS.role, secrets.token_urlsafe(24))

    @property
    def required(self) -> bool:
        return self.tokens is not None

    def by_token(self, token: str) -> Identity | None:
        if self.tokens is None:
            return None
        for known, who in self.tokens.items():  # compared in constant time, each
            if hmac.compare_digest(known.encode(), token.encode()):
                return who
        return None

    def sign_in(self, token: str) -> tuple[str, Identity] | None:
        """A new cookie for the person the token names, or None."""
        who = self.by_token(token)
        if who is None:
            return None
        cookie = secrets.token_urlsafe(32)
        ident = Identity(who.name, who.role, secrets.token_urlsafe(24))
        with self._lock:
            self._by_cookie[cookie] = ident
        return cookie, ident

    def by_cookie(self, cookie: str | None) -> Identity | None:
        if not cookie:
            return None
        with self._lock:
            return self._by_cookie.get(cookie)

    def sign_out(self, cookie: str | None) -> None:
        with self._lock:
            self._by_cookie.pop(cookie or "", None)


def csrf_ok(ident: Identity, sent: str | None) -> bool:
    return bool(sent) and bool(ident.csrf) and hmac.compare_digest(ident.csrf, sent or "")
