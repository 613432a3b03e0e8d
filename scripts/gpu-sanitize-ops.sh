#!/usr/bin/env bash
# gpu-sanitize-ops.sh [--only rows,attention,gemm]: every kernel design of the memory-bound tirx.ops,
# attention's schedules and each GEMM kernel form once (python/bench/op_designs.py, its arguments
# passed on) under compute-sanitizer's memcheck, racecheck and synccheck; exit 1 on a finding or a
# wrong value. The plain run first: the autotuner's picks it caches are what the sanitized runs launch.
# Needs the tirx package importable (the wheel installed) and compute-sanitizer (PATH or /usr/local/cuda/bin).
# SANITIZE_TOOLS="racecheck synccheck": those tools only (racecheck of every design takes minutes).
set -u -o pipefail
cd "$(dirname "$0")/.."
SAN=$(command -v compute-sanitizer || true)
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
[ -n "$SAN" ] || { echo "compute-sanitizer not found (PATH or /usr/local/cuda/bin)"; exit 1; }
PY=${PYTHON:-python3}
status=0
"$PY" python/bench/op_designs.py "$@" || status=1
for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    log=$(mktemp)
    "$SAN" --tool "$tool" --target-processes all "$PY" python/bench/op_designs.py "$@" > "$log" 2>&1
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    echo "$tool: ${summary:-no summary (see $log)}"
    if ! grep -qE "(ERROR|RACECHECK) SUMMARY: 0 " "$log"; then
        status=1
        # Every kernel with a finding, by name (the references' kernels, PyTorch's, among them),
        # so that one kernel's many findings never hide another's; then the first of them.
        echo "$tool findings by kernel (lines naming it; the whole report in $log):"
        grep -E "^=========" "$log" | grep -oE " at [A-Za-z_][A-Za-z0-9_]*\+0x" | sed -E 's/^ at //; s/\+0x$//' | sort | uniq -c | sort -rn
        grep -E "^=========" "$log" | head -20
    fi
done
exit $status
