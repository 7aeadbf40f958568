"""One way to make a paho-mqtt 2.x client for the uplink and the collector: broker URLs,
TLS with the CA verified, credentials from a file, MQTT 3.1.1 unless asked otherwise.

MQTT 3.1.1 because every broker speaks it (NATS speaks nothing else); a test or a tool that
wants MQTT 5 reason codes (mosquitto's 0x87 for a topic its ACL refuses) asks for it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import paho.mqtt.client as paho


class BrokerError(ValueError):
    """A broker URL or credentials file that cannot be used: what and why."""


@dataclass(frozen=True, slots=True)
class Broker:
    host: str
    port: int
    tls: bool

    def __str__(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"


def parse_broker(url: str) -> Broker:
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise BrokerError(f"{url!r}: a broker URL is mqtt://HOST:PORT or mqtts://HOST:PORT")
    tls = parts.scheme == "mqtts"
    return Broker(parts.hostname, parts.port or (8883 if tls else 1883), tls)


def read_credentials(path: Path) -> tuple[str, str]:
    """`username:password` from the file's first line: kept out of configs, command lines
    and the process list."""
    try:
        line = path.read_text().splitlines()[0].strip()
    except (OSError, IndexError) as exc:
        raise BrokerError(f"credentials file {path}: {exc or 'empty'}") from exc
    user, sep, password = line.partition(":")
    if not sep or not user:
        raise BrokerError(f"credentials file {path}: the first line is username:password")
    return user, password


def stop_loop(client: paho.Client) -> None:
    """`client.loop_stop()`, without a race paho-mqtt 2.x has (known upstream, not yet
    fixed there; docs/fleet.md): `loop_stop` sets the stop flag, then reads the network
    thread again to join it, and the thread clears that attribute as it ends. A thread
    that sees the flag at once and ends between the two reads made `loop_stop` raise
    AttributeError on None (seen as a failed probe of a NATS node; the uplink and the
    collector stop their loops the same way). Such a thread has ended: there is nothing
    left to stop or join."""
    try:
        client.loop_stop()
    except AttributeError:
        if getattr(client, "_thread", None) is not None:
            raise  # not the race: the thread is still there


def make_client(
    client_id: str,
    broker: Broker,
    *,
    credentials: Path | None = None,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    clean_session: bool = True,
    mqtt5: bool = False,
) -> paho.Client:
    """A client not yet connected. mqtts:// verifies the broker's certificate and host name
    against `ca_file` (or the system's CAs): a broker that cannot prove who it is is never
    sent the credentials."""
    if mqtt5:
        client = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5
        )
    else:
        client = paho.Client(
            paho.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=clean_session,
            protocol=paho.MQTTv311,
        )
    if credentials is not None:
        user, password = read_credentials(credentials)
        client.username_pw_set(user, password)
    if broker.tls:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if cert_file is not None:
            ctx.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
        client.tls_set_context(ctx)
    return client


def connect_error(broker: Broker, exc: BaseException, ca_file: Path | None) -> str:
    """What a failed connect means, for the log: a broker whose certificate the CA does
    not vouch for is named as such (and that no credential was sent), not as a bare
    OSError."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        against = f"the CA in {ca_file}" if ca_file else "the system's CAs"
        return (
            f"{broker}: refused: the broker's certificate is not trusted "
            f"({exc.verify_message}; verified against {against}); no credentials were sent"
        )
    if isinstance(exc, ssl.SSLError):
        return f"{broker}: refused: the TLS handshake failed ({exc.reason or exc})"
    return f"{broker}: cannot connect: {exc}"
