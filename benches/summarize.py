#!/usr/bin/env python3
"""Print the README's results table from criterion's saved estimates.

Usage: python3 benches/summarize.py [CRITERION_DIR]
(default: $CARGO_TARGET_DIR/criterion, else target/criterion at the workspace root)

Reads <group>/<function>/new/{benchmark,estimates}.json and prints, per group,
the median time per op of each implementation and the ratios peer / ours.
"""

import json
import os
import sys
from pathlib import Path

MAIN = ["ours", "redis-protocol", "redis-rs"]
EXTRA = ["redis-protocol-owned", "redis-rs-fn"]
GROUP_ORDER = [
    "encode/set_nx_px",
    "encode/evalsha_release",
    "parse/ok",
    "parse/nil",
    "parse/int",
    "parse/array3",
    "parse/bulk40",
]


def fmt(ns):
    return "—" if ns is None else f"{ns:.1f} ns"


def ratio(peer, ours):
    if peer is None or ours is None:
        return "—"
    return f"{peer / ours:.2f}×"


def main():
    if len(sys.argv) > 1:
        root = Path(sys.argv[1])
    else:
        target = os.environ.get("CARGO_TARGET_DIR") or Path(__file__).resolve().parent.parent / "target"
        root = Path(target) / "criterion"
    medians = {}
    for bench in root.glob("*/*/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        medians.setdefault(meta["group_id"], {})[meta["function_id"]] = est["median"]["point_estimate"]
    groups = [g for g in GROUP_ORDER if g in medians] + sorted(set(medians) - set(GROUP_ORDER))

    print("| benchmark | ours | redis-protocol | redis-rs | redis-protocol / ours | redis-rs / ours |")
    print("|---|---:|---:|---:|---:|---:|")
    for g in groups:
        m = medians[g]
        ours, rp, rs = (m.get(k) for k in MAIN)
        print(f"| {g} | {fmt(ours)} | {fmt(rp)} | {fmt(rs)} | {ratio(rp, ours)} | {ratio(rs, ours)} |")

    print()
    print("| benchmark | redis-protocol `decode` (owned) | redis-rs `parse_redis_value` | owned / ours | parse_redis_value / ours |")
    print("|---|---:|---:|---:|---:|")
    for g in groups:
        m = medians[g]
        if not any(k in m for k in EXTRA):
            continue
        ours = m.get("ours")
        rpo, rsf = (m.get(k) for k in EXTRA)
        print(f"| {g} | {fmt(rpo)} | {fmt(rsf)} | {ratio(rpo, ours)} | {ratio(rsf, ours)} |")


if __name__ == "__main__":
    main()
