"""The journal's cost on the live loop: inline commits (before) against the writer thread.

A paced loop on the monotonic clock, as `goosectl run` has it: 3,000 transitions a second
(the rate behind the issue's 17 MB a minute) spread over 8 machines, a `group` journal on a
file flushed by `maybe_flush` every 5 ms, the garbage collector on (frozen after start-up,
as the live loop does). Timed on the loop, every iteration:

- `maybe_flush` (the append, and inline: the commit) — all iterations, and the flushing
  ones alone (>= 1,000 of them: 5 s of loop);
- how late the loop wakes after its sleep (a writer thread holding the GIL shows here);

and on the writer thread, every commit's duration. The same for `step` (the agent layer):
one commit per input, with its fsync inline (synchronous=FULL) or on the syncer thread.
Baseline and contender are measured in the same run; ratios are contender/baseline.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from benchmarks.percentiles import check_budget, ratio, summarise
from goosectl.controller.engine import Journal, Scheduler, Table
from goosectl.controller.shell.journal_store import open_journal
from goosectl.controller.shell.journal_writer import JournalWriter, WalSyncer, bound_gil_wait

GROUP = "journal-on-the-loop"
RATE_HZ = 3000
MACHINES = 8

WORKER = """
name: worker
initial: idle
states: [idle, busy]
events: [job, done]
context:
  jobs: sum
  last: replace
transitions:
  - {source: idle, event: job, target: busy, actions: [{name: incr, args: {field: jobs}}]}
  - {source: busy, event: done, target: idle}
"""

#: writer mode, flushing iterations: the append must stay far below a frame's budget
BUDGET_FLUSH_P99_US = 200.0
#: step mode: how far the syncer's commit p50 may sit above the inline fsync's before it is a
#: defect rather than noise (both cost the same where the disk's fsync is nearly free)
SYNCER_NOISE_ROOM = 1.25
#: group mode, flushing iterations: how much cheaper handing rows to the writer is than
#: committing them on the loop, at p50 (asserted) and at p99 (a budget)
WRITER_P50_GAIN = 3
WRITER_P99_GAIN = 5


def paced_loop(journal: Journal, table: Table, seconds: float, enough=lambda: True):
    """Run the loop for `seconds`, and on until 1,000 flushes and `enough()` (a loaded
    machine falls behind the pace); returns (all maybe_flush times, flushing ones, wake
    lateness) in ns."""
    scheduler = Scheduler(journal)
    clock = time.monotonic_ns
    now = clock()
    for i in range(MACHINES):
        scheduler.start(table.new(f"m{i}"), now)
    gc.collect()
    gc.freeze()
    period = 1_000_000_000 // RATE_HZ
    end = now + int(seconds * 1e9)
    every, flushing, late = [], [], []
    events = ("job", "done")
    timer = time.perf_counter_ns
    target = clock()
    i = 0
    try:
        while True:
            now = clock()
            if now >= end and len(flushing) >= 1000 and enough():
                break
            late.append(max(0, now - target))
            scheduler.feed(f"m{i % MACHINES}", events[(i // MACHINES) % 2], now)
            before = journal.flushes
            a = timer()
            journal.maybe_flush(now)
            b = timer()
            every.append(b - a)
            if journal.flushes != before:
                flushing.append(b - a)
            i += 1
            target += period
            pause = target - clock()
            if pause > 0:
                time.sleep(pause / 1e9)
    finally:
        gc.unfreeze()
    return every, flushing, late


@pytest.fixture
def table(tmp_path: Path) -> Table:
    path = tmp_path / "worker.yaml"
    path.write_text(WORKER)
    return Table.load(path)


def test_group_journal_on_the_loop_inline_vs_writer(benchmark, tmp_path, short, table):
    seconds = 5.0 if short else 20.0
    inline = open_journal(tmp_path / "inline.sqlite", durability="group")
    every_i, flush_i, late_i = paced_loop(inline, table, seconds)
    inline.close()

    threaded = open_journal(tmp_path / "writer.sqlite", durability="group")
    writer = JournalWriter(threaded).start()
    bound_gil_wait()
    every_w, flush_w, late_w = paced_loop(threaded, table, seconds, lambda: writer.commits >= 1000)
    threaded.close()

    r = {
        "inline_all": summarise("inline commit: maybe_flush, every iteration", GROUP, every_i),
        "inline_flush": summarise("inline commit: maybe_flush, flushing", GROUP, flush_i),
        "inline_late": summarise("inline commit: loop wake-up lateness", GROUP, late_i),
        "writer_all": summarise("writer thread: maybe_flush, every iteration", GROUP, every_w),
        "writer_flush": summarise("writer thread: maybe_flush (append), flushing", GROUP, flush_w),
        "writer_late": summarise("writer thread: loop wake-up lateness", GROUP, late_w),
        "commit": summarise(
            "writer thread: one commit (its thread)", GROUP, list(writer.commit_ns)
        ),
    }
    ratio(r["writer_all"], r["inline_all"])
    ratio(r["writer_flush"], r["inline_flush"])
    ratio(r["writer_late"], r["inline_late"])
    benchmark.extra_info.update({k: v.as_dict() for k, v in r.items()})
    benchmark.extra_info["writer"] = {
        k: v for k, v in writer.status().items() if k not in ("commit_us", "path")
    }
    benchmark.pedantic(lambda: None, rounds=1)

    assert len(flush_i) >= 1000 and len(flush_w) >= 1000 and len(writer.commit_ns) >= 1000
    assert writer.status()["lost_rows"] == 0 and writer.committed_rows > 0
    writer_p99, inline_p99 = r["writer_flush"].p99, r["inline_flush"].p99
    numbers = (r["writer_flush"].as_dict(), r["inline_flush"].as_dict())
    # the hand-over against the commit at p50, where the commit's own cost shows: asserted.
    # The p99s are times the disk's fsync moves (a disk that flushes fast leaves the inline
    # commit's p99 less than 5x the writer's): budgets, an XFAIL with the numbers
    assert r["writer_flush"].p50 < r["inline_flush"].p50 / WRITER_P50_GAIN, numbers
    check_budget(
        writer_p99 < BUDGET_FLUSH_P99_US and writer_p99 < inline_p99 / WRITER_P99_GAIN,
        f"writer's flushing iteration p99 {writer_p99:.0f} us: budget {BUDGET_FLUSH_P99_US:g} "
        f"us and {WRITER_P99_GAIN}x below the inline commit's ({inline_p99:.0f} us); "
        f"(writer, inline): {numbers}",
    )


def test_step_journal_commit_on_the_loop_fsync_inline_vs_thread(benchmark, tmp_path, short, table):
    """Both journals open at once and fed in alternating blocks of 50 steps, so whatever
    else the disk is doing (a previous benchmark's files being flushed) falls on both."""
    n = 1000 if short else 3000
    names = {
        "inline": "step: commit + fsync before the effect (inline)",
        "thread": "step: commit before the effect, fsync on the syncer",
    }
    journals = {m: open_journal(tmp_path / f"{m}.sqlite", durability="step") for m in names}
    syncer = WalSyncer(journals["thread"]).start()
    schedulers = {}
    for mode, journal in journals.items():
        schedulers[mode] = Scheduler(journal)
        schedulers[mode].start(table.new("s"), 0)
        journal.flush(0)
    times: dict[str, list[int]] = {m: [] for m in names}
    timer = time.perf_counter_ns
    block = 50
    for first in range(0, n, block):
        for mode, journal in journals.items():
            for i in range(first, min(n, first + block)):
                now = (i + 1) * 1_000_000
                schedulers[mode].feed("s", ("job", "done")[i % 2], now, input_pos=i)
                a = timer()
                journal.flush(now)
                times[mode].append(timer() - a)
                time.sleep(0.001)  # an operator's procedure is not a flood
    for journal in journals.values():
        journal.close()
    syncer.close()
    out = {mode: summarise(names[mode], GROUP, times[mode]) for mode in names}
    out["lag"] = summarise("step: commit -> fsync done (syncer thread)", GROUP, list(syncer.lag_ns))
    ratio(out["thread"], out["inline"])
    benchmark.extra_info.update({k: v.as_dict() for k, v in out.items()})
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (out["thread"].as_dict(), out["inline"].as_dict(), out["lag"].as_dict())
    # the syncer must never cost the loop: asserted with room for the host's noise, since
    # where the disk's fsync is nearly free (a write cache, an overlay) both commits cost
    # the same and their p50s fall either side of each other
    assert out["thread"].p50 < out["inline"].p50 * SYNCER_NOISE_ROOM, numbers
    # the gain, which only a disk whose fsync costs something can show: a budget
    check_budget(
        out["thread"].p50 < out["inline"].p50,
        f"the syncer's commit p50 not below the inline fsync's (thread, inline, lag): {numbers}",
    )
