#!/usr/bin/env bash
# Side-by-side speed of the blocking client at two commits: this tree and
# OTHER (a checkout of another commit, e.g. `git worktree add ../old REV`).
# Builds benches/examples/ab_cycle.rs in both (copying it into OTHER), then
# runs them in turns, ROUNDS times each, CYCLES lock+unlock cycles per run
# (each run starts its own five redis-servers), and prints every run's line
# and the medians.
#
#   bash benches/ab.sh OTHER [ROUNDS] [CYCLES]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
other=$(cd "$1" && pwd)
rounds=${2:-5}
cycles=${3:-20000}
mkdir -p "$other/benches/examples"
cp "$here/benches/examples/ab_cycle.rs" "$other/benches/examples/ab_cycle.rs"
build() {
    (cd "$1" && cargo build --release -q -p redlock-benches --example ab_cycle >&2 &&
        cargo metadata --format-version 1 --no-deps |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
}
new_bin="$(build "$here")/release/examples/ab_cycle"
old_bin="$(build "$other")/release/examples/ab_cycle"
out=$(mktemp)
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
        if [ "$which" = old ]; then bin=$old_bin; else bin=$new_bin; fi
        "$bin" "$which" "$cycles" | tee -a "$out"
    done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append((float(f[2]), float(f[4]), float(f[6])))
med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in rows.items()}
for k, (a, r, c) in med.items():
    print(f"median {k}: acquire p50 {a:.1f} us, release p50 {r:.1f} us, CPU {c:.4f} s/1000 cycles")
if "old" in med and "new" in med:
    o, n = med["old"], med["new"]
    print(f"new/old: acquire p50 {n[0]/o[0]:.3f}x, release p50 {n[1]/o[1]:.3f}x, CPU {n[2]/o[2]:.3f}x")
PY
