"""A second `goosectl run` on what the first one owns (its state folder,
its control socket, its serial device) exits 2 naming the first one's pid, and the first
one goes on untouched: same socket, same journal, same device."""

from __future__ import annotations

import os


def refused(controllers, name: str, line: str, **kw) -> None:
    """A second controller (`kw`: what it shares with the first) exits 2 saying `line`."""
    second = controllers(name=name, expect_running=False, **kw)
    assert second.proc.wait(60) == 2, name
    second.err.wait_for(lambda x: x == line, f"{name}: {line}")


def still_owns_it_all(first) -> None:
    assert first.sock.exists() and first.alive()
    done = first.request({"op": "run", "procedure": "hello", "params": {"n": 2}})
    assert done["ok"] and done["session"] == "s2"  # its journal was not written by another
    for sid in ("s1", "s2"):
        history = first.request({"op": "history", "session": sid})["history"]
        assert history[0]["event"] == "request" and history[-1]["target"] == "completed"
    assert first.stop()["journal"]["bay"]["errors"] == 0


def test_row7_a_second_run_on_the_same_state_or_socket_exits_2_naming_the_first(controllers):
    first = controllers(name="first")
    assert first.request({"op": "run", "procedure": "hello", "params": {"n": 1}})["ok"]
    refused(
        controllers,
        "same-state",
        f"goosectl: state folder {first.state}: in use by pid {first.pid} "
        f"({first.state / 'lock'} is locked)",
        state=first.state,
    )
    refused(
        controllers,
        "same-socket",
        f"goosectl: control socket {first.sock}: in use by pid {first.pid} "
        f"({first.sock}.lock is locked)",
        control=first.sock,
    )
    still_owns_it_all(first)


def test_row7_a_second_run_on_the_same_serial_device_exits_2_naming_the_first(controllers, sim):
    first = controllers(name="first")
    assert first.request({"op": "run", "procedure": "hello", "params": {"n": 1}})["ok"]
    second = controllers(name="same-device", expect_running=False)  # own state and socket
    assert second.proc.wait(60) == 2
    second.err.wait_for(
        lambda x: (
            x.startswith(f"goosectl: device port {sim.port}: ")
            and x.endswith(f"in use by process {first.pid}")
        ),
        "the device refusal naming the first controller",
    )
    still_owns_it_all(first)


def test_a_journal_is_held_by_its_file_whichever_name_or_link_reaches_it(controllers, tmp_path):
    """A second controller given the first one's journal by another name (`--journal
    S1/bay.sqlite` while the first runs on state folder S1, or a hard link to that file) is
    refused naming the first one's pid: the lock is on the file, not on the option."""
    first = controllers(name="first")
    assert first.request({"op": "run", "procedure": "hello", "params": {"n": 1}})["ok"]
    journal = first.state / "bay.sqlite"
    link = tmp_path / "elsewhere.sqlite"
    os.link(journal, link)
    for name, path in (("by-name", journal), ("by-link", link)):
        second = controllers(name=name, journal=path, expect_running=False)
        assert second.proc.wait(60) == 2, name
        second.err.wait_for(
            lambda x, p=path: x.startswith(f"goosectl: journal {p}: in use by pid {first.pid}"),
            f"{name}: the refusal naming pid {first.pid}",
        )
    still_owns_it_all(first)


def test_a_regular_file_at_the_lock_path_is_never_truncated_or_deleted(controllers, tmp_path):
    """A file that happens to sit where a lock file would go (`control.sock.lock`) is not
    goosectl's: the controller refuses it (exit 2, naming it) and leaves its bytes alone."""
    sock = tmp_path / "ctl.sock"
    precious = sock.with_name(sock.name + ".lock")
    precious.write_text("someone's notes, not a pid\n")
    second = controllers(name="planted", control=sock, expect_running=False)
    assert second.proc.wait(60) == 2
    second.err.wait_for(
        lambda x: x.startswith(f"goosectl: control socket {sock}: ") and str(precious) in x,
        "the refusal naming the file",
    )
    assert precious.read_text() == "someone's notes, not a pid\n"
