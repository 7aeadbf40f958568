"""The key file: every defect named with its file, field and reason; secrets only from
owner-only files."""

from __future__ import annotations

import pytest

from goosectl.controller.config.keys import load_keys
from goosectl.controller.config.validate import ConfigError
from tests.goose.keyfiles import S, write_keys

T = 1_750_000_000 * S


def entry(**kw):
    base = {
        "key_id": 7,
        "algorithm": "hmac-sha256-128",
        "secret": bytes(range(32)),
        "not_before": T,
        "not_after": T + 3600 * S,
    }
    return base | kw


def test_a_good_file_loads_with_windows_and_algorithms(tmp_path) -> None:
    kf = load_keys(
        write_keys(
            tmp_path,
            [entry(), entry(key_id=8, algorithm="aes-gmac-128", secret=bytes(16), chain="c")],
        )
    )
    assert sorted(kf.keys) == [7, 8]
    assert kf.keys[7].algorithm == "hmac-sha256-128"
    assert kf.keys[8].algorithm == "aes-gmac-128"
    assert (kf.keys[7].not_before_ns, kf.keys[7].not_after_ns) == (T, T + 3600 * S)
    assert kf.grace_ns == S


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_secret_others_can_read_is_refused_naming_the_file(tmp_path, mode) -> None:
    path = write_keys(tmp_path, [entry(mode=mode)])
    with pytest.raises(ConfigError) as err:
        load_keys(path)
    msg = str(err.value)
    assert str(tmp_path / "k7.hex") in msg
    assert "keys.0.secret" in msg
    assert f"{mode:04o}" in msg and "0600" in msg


def test_0400_is_accepted(tmp_path) -> None:
    assert 7 in load_keys(write_keys(tmp_path, [entry(mode=0o400)])).keys


def test_a_secret_that_is_not_hex(tmp_path) -> None:
    path = write_keys(tmp_path, [entry()])
    (tmp_path / "k7.hex").write_text("not hex at all")
    with pytest.raises(ConfigError, match=r"k7\.hex: the secret is not hex digits"):
        load_keys(path)


def test_a_gmac_secret_of_the_wrong_length(tmp_path) -> None:
    path = write_keys(tmp_path, [entry(algorithm="aes-gmac-128", secret=bytes(20))])
    with pytest.raises(ConfigError, match="16-octet secret"):
        load_keys(path)


def test_a_missing_secret_file(tmp_path) -> None:
    path = write_keys(tmp_path, [entry()])
    (tmp_path / "k7.hex").unlink()
    with pytest.raises(ConfigError, match=r"keys\.0\.secret.*k7\.hex"):
        load_keys(path)


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([entry(), entry()], "key_id 7 is listed twice"),
        ([entry(not_after=T)], "not_after must be later than not_before"),
        ([entry(algorithm="md5")], "algorithm"),
        ([entry(key_id=0)], "key_id"),
    ],
)
def test_model_errors_name_file_and_field(tmp_path, entries, reason) -> None:
    path = write_keys(tmp_path, entries)
    with pytest.raises(ConfigError, match=reason) as err:
        load_keys(path)
    assert str(path) in str(err.value)


def test_keys_check_lists_the_keys(tmp_path, capsys) -> None:
    import json

    from goosectl.controller.cli import main

    path = write_keys(tmp_path, [entry(), entry(key_id=8, chain="c")])
    assert main(["keys", "check", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(k["key_id"], k["algorithm"], k["chain"]) for k in out["keys"]] == [
        (7, "hmac-sha256-128", None),
        (8, "hmac-sha256-128", "c"),
    ]
    (tmp_path / "k8.hex").chmod(0o664)
    assert main(["keys", "check", str(path)]) == 2
    assert "k8.hex" in capsys.readouterr().err


def test_a_policy_on_a_gocbref_the_gate_cannot_key_is_refused() -> None:
    from pydantic import ValidationError

    from goosectl.controller.config.goose import SubscriptionCfg

    long = "L" * 60 + "/LLN0$GO$" + "g" * 60
    with pytest.raises(ValidationError, match="at most 127 octets"):
        SubscriptionCfg(gocb_ref=long, appid=1, dst="01:0c:cd:01:00:01", auth="required")
    assert SubscriptionCfg(gocb_ref=long, appid=1, dst="01:0c:cd:01:00:01").auth == "off"
