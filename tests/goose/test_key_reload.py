"""Reloading the key file (SIGHUP's path and the control request's): a good file takes
effect from the next frame, a bad one is refused with the keys alarm and the old keys stay."""

from __future__ import annotations

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.control_log import ControlLog
from goosectl.controller.shell.keys import KeyService
from goosectl.protocols.goose.security import ALGORITHMS, PROFILES, MacKey, sign
from tests.goose.helpers import DST, GOCB, raw_frame, verdicts
from tests.goose.keyfiles import S, write_keys

SECRET = bytes(range(32))
NOW = 1_750_000_000 * S


def entry(key_id: int) -> dict:
    return {"key_id": key_id, "algorithm": "hmac-sha256-128", "secret": SECRET,
            "not_before": 0, "not_after": NOW + 10 * 365 * 86400 * S}  # fmt: skip


def signed(st: int, key_id: int) -> bytes:
    key = MacKey(key_id, ALGORITHMS["hmac-sha256-128"], SECRET)
    return sign(raw_frame(st, 0), key, PROFILES["length-crc"])


def test_reload_good_then_bad_file(tmp_path) -> None:
    from goosectl.controller.config.keys import load_keys

    path = write_keys(tmp_path, [entry(7)])
    cfg = GooseConfig.model_validate(
        {"subscriptions": [{"gocb_ref": GOCB, "appid": 0x1010, "dst": DST, "auth": "required"}]}
    )
    hub = GooseHub(cfg, keys=load_keys(path))
    log = ControlLog(None, 0)
    service = KeyService(hub, str(path), log)
    service.start()
    now = 0  # the hub's clock; UTC is the offset the service read from the host
    assert verdicts(hub.frame(signed(1, 7), "A", now))[0].deliver

    write_keys(tmp_path, [entry(8)])  # key 7 retired, key 8 in
    service.request()  # what SIGHUP's handler does
    service.tick(1)
    assert service.reloads == 1
    assert [v.refused for v in verdicts(hub.frame(signed(2, 7), "A", 2))] == ["auth_unknown_key"]
    assert verdicts(hub.frame(signed(3, 8), "A", 3))[0].deliver

    (tmp_path / "k8.hex").chmod(0o644)  # a bad file: refused, the keys in force stay
    reply = service.reload(4, "control socket")
    assert not reply["ok"] and "k8.hex" in reply["error"] and "0644" in reply["error"]
    assert "keys" in log.active()
    assert verdicts(hub.frame(signed(4, 8), "A", 5))[0].deliver
    assert log.counts()["requests.answered"] == 1  # the SIGHUP reload, journaled as a request
