#!/usr/bin/env bash
# Every figure of docs/performance.md, in order, into docs/perf/ (about an hour on an idle 2-core machine).
#   bash benchmarks/run_all.sh                 # all steps
#   bash benchmarks/run_all.sh pytest memory   # some: pytest | profile | scaling | memory | bounds | versus | summary
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when this machine sets them, slow a current NumPy: they are
# unset for these commands only (never for the tests or CI).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/perf
mkdir -p "$OUT" /tmp/assembler-bench
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@"; }
want() { [ $# -eq 0 ] || [[ " $* " == *" $STEP "* ]]; }
STEP=pytest; if want "$@"; then
  # The kernel, timed in CPU seconds of this process (all threads): steady when other work shares
  # the cores. (Wall time: the same command without --benchmark-timer.)
  run python -m pytest benchmarks/bench_neardup.py --benchmark-only -p no:cacheprovider \
    --benchmark-timer time.process_time --benchmark-columns=min,median,rounds --benchmark-sort=name \
    --ratios "$OUT/ratios-cpu" > "$OUT/pytest-benchmark-cpu.txt"
  # End to end (10,000 typical, 1,000 worst-case queries) and the committed lane dumps.
  run python -m pytest benchmarks/bench_batch.py benchmarks/bench_lanes.py -p no:cacheprovider \
    --benchmark-columns=min,median,rounds --benchmark-sort=name --ratios "$OUT/ratios" > "$OUT/pytest-benchmark.txt"
fi
STEP=profile; if want "$@"; then run python -m benchmarks.profile --out "$OUT/profile.md" > /dev/null; fi
STEP=scaling; if want "$@"; then
  run python -m benchmarks.scaling --queries 1000,10000,100000 --pool-sizes 10,50,200 --pool-queries 200 \
    --reference-max-queries 10000
fi
STEP=memory; if want "$@"; then
  run python -m benchmarks.memory --queries 100000,1000000 --chunk-sizes 2048 --keep-inputs
fi
STEP=bounds; if want "$@"; then run python -m benchmarks.bounds --typical 12000 --worst 100 --out "$OUT/bounds.md" > /dev/null; fi
STEP=versus; if want "$@"; then run python -m benchmarks.versus --rounds 5 --out "$OUT/versus.md" > /dev/null; fi
STEP=summary; if want "$@"; then run python -m benchmarks.summary > /dev/null; fi
