"""Mutation fuzzing of the GOOSE codec, seeded with the real captures.

Every input goes through `decode_frame` and `parse_header` (and, when it decodes,
encode -> decode again, which must give the same frame). The only exceptions allowed out
of the codec are `GooseError`s; anything else is a finding, printed with the input.
Inputs: bit flips, byte overwrites, truncation, appended junk, lying BER lengths and
Length fields, splices of two frames, deep nesting and huge element counts.

Short mode runs inside the test suite (tests/codec/test_fuzz_short.py); long mode:

    python tests/fuzz_codec.py --inputs 1000000 [--seed 1]

prints a JSON summary (inputs, outcomes by error kind, slowest input, peak RSS) and exits
1 if anything escaped the error family.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from goosectl.protocols.ethernet.pcap import read_capture  # noqa: E402
from goosectl.protocols.goose import (  # noqa: E402
    GooseError,
    decode_frame,
    encode_frame,
    is_goose,
    parse_header,
)
from goosectl.protocols.goose.ber import encode_length  # noqa: E402
from tests.support.peers import CAPTURES  # noqa: E402  (tests/data/captures)


def seeds() -> list[bytes]:
    """Every GOOSE frame of the real captures plus our every-Data-choice corpus."""
    out = []
    for path in sorted(CAPTURES.glob("*.pcap*")):
        out += [c.data for c in read_capture(path) if is_goose(c.data)]
    if not out:
        raise SystemExit(f"fuzz_codec: no GOOSE frames in {CAPTURES}: the real seeds are missing")
    from tests.codec.corpus import corpus_frames

    out += [encode_frame(f) for f in corpus_frames()]
    # dedupe but keep order, so a seed number means the same frame on every run
    return list(dict.fromkeys(out))


def _tlv_length_positions(buf: bytes) -> list[int]:
    """Offsets of BER length octets in the goosePdu, found by a tolerant walk."""
    off = 18 if buf[12:14] == b"\x81\x00" else 14
    out = []
    stack = [(off + 8, len(buf))]
    while stack and len(out) < 200:
        pos, end = stack.pop()
        while pos + 1 < end:
            tag, ln = buf[pos], buf[pos + 1]
            out.append(pos + 1)
            if ln & 0x80:
                break
            if tag & 0x20:
                stack.append((pos + 2, min(end, pos + 2 + ln)))
            pos += 2 + ln
    return out


def _with_alldata(seed: bytes, content: bytes) -> bytes:
    """Replace allData of ``seed`` by ``content`` with every enclosing length fixed up."""
    h = parse_header(seed)
    start = h.all_data_offset
    # walk back to the 0xab tag: its length octets sit between tag and content
    tag_pos = seed.rfind(b"\xab", 0, start)
    pdu_tag = seed.index(b"\x61", 14)
    pdu_body_start = (
        pdu_tag + 1 + (1 if seed[pdu_tag + 1] < 0x80 else 1 + (seed[pdu_tag + 1] & 0x7F))
    )
    before = seed[pdu_body_start:tag_pos]
    after = seed[start + len(h.all_data) : len(seed) - len(h.trailer) - len(h.security)]
    body = before + b"\xab" + encode_length(len(content)) + content + after
    pdu = b"\x61" + encode_length(len(body)) + body + h.security
    off = 18 if seed[12:14] == b"\x81\x00" else 14
    length = 8 + len(pdu)
    if length > 0xFFFF:
        length = 0xFFFF  # a lying Length is a fine input too
    return seed[: off + 2] + length.to_bytes(2, "big") + seed[off + 4 : off + 8] + pdu


def mutate(rng: random.Random, pool: list[bytes]) -> bytes:
    seed = rng.choice(pool)
    op = rng.randrange(10)
    b = bytearray(seed)
    if op == 0:  # bit flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif op == 1:  # byte overwrites
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == 2:  # truncation
        del b[rng.randrange(len(b)) :]
    elif op == 3:  # appended junk
        b += rng.randbytes(rng.randint(1, 64))
    elif op == 4:  # lying BER length
        pos = _tlv_length_positions(seed)
        if pos:
            i = rng.choice(pos)
            lie = rng.choice(
                [b"\x80", b"\x81\xff", b"\x82\xff\xff", b"\x84\xff\xff\xff\xff", b"\x85" + bytes(5),
                 bytes((rng.randrange(128),)), b"\x81" + bytes((rng.randrange(256),)), b"\xff"]
            )  # fmt: skip
            b[i : i + 1] = lie
    elif op == 5:  # lying Length field
        off = 18 if seed[12:14] == b"\x81\x00" else 14
        b[off + 2 : off + 4] = rng.choice(
            [0, 1, 7, 8, 9, len(b), 0xFFFF, rng.randrange(65536)]
        ).to_bytes(2, "big")
    elif op == 6:  # splice two frames
        other = rng.choice(pool)
        cut = rng.randrange(len(b))
        b = b[:cut] + other[rng.randrange(len(other)) :]
    elif op == 7:  # deep nesting
        depth = rng.choice([15, 16, 17, 50, 1000])
        inner = b"\x83\x01\x01"
        for _ in range(depth):
            inner = (b"\xa2" if rng.random() < 0.5 else b"\xa1") + encode_length(len(inner)) + inner
        return _with_alldata(seed, inner)[:70000]
    elif op == 8:  # huge counts
        n = rng.choice([4095, 4096, 4097, 20000])
        elem = rng.choice([b"\x83\x01\x01", b"\x85\x01\x07", b"\xa2\x00"])
        content = elem * n
        if rng.random() < 0.5:
            content = b"\xa2" + encode_length(len(content)) + content
        return _with_alldata(seed, content)
    else:  # mutate inside allData only, keeping the framing valid
        h = parse_header(seed)
        ad = bytearray(h.all_data)
        if ad:
            for _ in range(rng.randint(1, 3)):
                ad[rng.randrange(len(ad))] = rng.randrange(256)
        return _with_alldata(seed, bytes(ad))
    return bytes(b)


@dataclass
class Stats:
    inputs: int = 0
    decoded: int = 0
    outcomes: Counter = field(default_factory=Counter)
    escaped: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    slowest_len: int = 0

    def as_dict(self) -> dict:
        return {
            "inputs": self.inputs,
            "decoded_ok": self.decoded,
            "outcomes": dict(self.outcomes.most_common()),
            "escaped": self.escaped[:20],
            "escaped_count": len(self.escaped),
            "slowest_input_ms": round(self.slowest_s * 1e3, 3),
            "slowest_input_len": self.slowest_len,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }


def check_one(buf: bytes, stats: Stats) -> None:
    """Run one input through the codec; record the outcome or the escape."""
    t0 = time.perf_counter()
    try:
        try:
            parse_header(buf)
            frame = decode_frame(buf)
        except GooseError as exc:
            stats.outcomes[exc.kind] += 1
            assert isinstance(exc.offset, int) and 0 <= exc.offset <= len(buf), exc
            assert str(exc)
            return
        stats.decoded += 1
        stats.outcomes["ok"] += 1
        again = decode_frame(encode_frame(frame))
        if again != frame:
            stats.escaped.append(f"round trip differs for {buf.hex()}")
    except Exception as exc:
        stats.escaped.append(f"{type(exc).__name__}: {exc} for {buf.hex()}")
    finally:
        dt = time.perf_counter() - t0
        if dt > stats.slowest_s:
            stats.slowest_s, stats.slowest_len = dt, len(buf)
        stats.inputs += 1


def run(inputs: int, seed: int = 1, pool: list[bytes] | None = None) -> Stats:
    rng = random.Random(seed)
    pool = pool or seeds()
    stats = Stats()
    for buf in pool:
        check_one(buf, stats)
    while stats.inputs < inputs:
        check_one(mutate(rng, pool), stats)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    stats = run(args.inputs, args.seed)
    summary = stats.as_dict() | {"seconds": round(time.monotonic() - t0, 1), "seed": args.seed}
    print(json.dumps(summary, indent=2))
    return 1 if stats.escaped else 0


if __name__ == "__main__":
    sys.exit(main())
