#!/usr/bin/env bash
# Every figure of docs/performance.md, in order, into docs/perf/ (about 75 minutes on an idle 2-core machine).
#   bash benchmarks/run_all.sh            # all
#   bash benchmarks/run_all.sh pytest     # only the pytest-benchmark suite (also: profile, scaling, memory)
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when this machine sets them, slow a current NumPy: they are
# unset for these commands only (never for the tests or CI).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/perf
mkdir -p "$OUT"
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@"; }
want() { [ $# -eq 0 ] || [[ " $* " == *" $STEP "* ]]; }
STEP=pytest; if want "$@"; then
  run python -m pytest benchmarks/ --benchmark-only -p no:cacheprovider \
    --benchmark-columns=min,median,max,rounds --benchmark-sort=name \
    --benchmark-json /tmp/assembler-bench/pytest-benchmark.json --ratios "$OUT/ratios" \
    | tee "$OUT/pytest-benchmark.txt"
  # The kernel again, timed in CPU seconds of this process (all threads): steadier than wall time
  # when other work shares the two cores.
  run python -m pytest benchmarks/bench_neardup.py --benchmark-only -p no:cacheprovider \
    --benchmark-timer time.process_time --benchmark-columns=min,median,rounds --benchmark-sort=name \
    --ratios "$OUT/ratios-cpu" > "$OUT/pytest-benchmark-cpu.txt"
fi
STEP=profile; if want "$@"; then run python -m benchmarks.profile --out "$OUT/profile.md" > /dev/null; fi
STEP=scaling; if want "$@"; then run python -m benchmarks.scaling --reference-max-queries 30000; fi
STEP=memory; if want "$@"; then run python -m benchmarks.memory --chunk-sizes 512,8192 --keep-inputs; fi
STEP=summary; if want "$@"; then run python -m benchmarks.summary > /dev/null; fi
STEP=bounds; if want "$@"; then run python -m benchmarks.bounds --out "$OUT/bounds.md" > /dev/null; fi
