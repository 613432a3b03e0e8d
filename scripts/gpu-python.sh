#!/usr/bin/env bash
# gpu-python.sh: the Python package on a GPU machine (docs/python.md §5.2).
#
# Usage (from the repository root):
#   TIRX_WHEEL=path/to/tirx-*.whl scripts/gpu-python.sh [STEP...]
# Steps (default: all, in this order):
#   pytest    python/tests on the GPU (TIRX_REQUIRE_GPU=1: a missing GPU fails, nothing skips)
#   bench     python/bench/kernels.py (softmax, RMSNorm, the mma.sync and Hopper wgmma GEMMs vs
#             PyTorch, the copy benches) and launch_overhead.py
#   ref       the reference's test files through `pytest --noconftest -p tirx.compat` on the GPU,
#             from $TIRX_REFTESTS (a copy of apache/tvm's tests/python/tirx/operator/tile_primitive/cuda);
#             pass/fail counts per file and failures by cause
#   sanitize  (not in the default) every design of the memory-bound tirx.ops under compute-sanitizer
#             (scripts/gpu-sanitize-ops.sh)
# Needs: python3 with PyTorch, numpy, pytest (ml_dtypes for bf16); the wheel is installed with
# --no-deps into that python (or unpacked onto PYTHONPATH when pip refuses its platform tag).
# Logs and JSON go to $OUT (default: a fresh temp dir).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d /tmp/tirx-gpu-python.XXXXXX)}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(pytest bench ref)
# The CUBIN cache: the caller's TIRX_CACHE_DIR if set (keep it out of $OUT where $OUT is shipped back).
export TIRX_REQUIRE_GPU=1 TIRX_CACHE_DIR="${TIRX_CACHE_DIR:-$OUT/cubin-cache}" PYTHONUNBUFFERED=1

if [ -n "${TIRX_WHEEL:-}" ]; then
    if ! "$PY" -m pip install -q --no-deps --force-reinstall "$TIRX_WHEEL" >"$OUT/pip.log" 2>&1; then
        mkdir -p "$OUT/site" && (cd "$OUT/site" && "$PY" -m zipfile -e "$OLDPWD/$TIRX_WHEEL" .)
        export PYTHONPATH="$OUT/site${PYTHONPATH:+:$PYTHONPATH}"
        echo "pip refused the wheel (see $OUT/pip.log); unpacked onto PYTHONPATH"
    fi
fi
"$PY" -c 'import tirx, torch; print("tirx", tirx.__version__, "torch", torch.__version__, torch.cuda.get_device_name())' || exit 1

status=0
for step in "${steps[@]}"; do
    case $step in
    pytest)
        echo "== pytest python/tests (GPU)"
        # -rfE --tb=short, wide: each failure's exception line survives in the summary.
        COLUMNS=250 timeout 600 "$PY" -m pytest -q -rfE --tb=short python/tests -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -n 15 || status=1
        ;;
    bench)
        echo "== flagship kernels vs PyTorch"
        timeout 600 "$PY" python/bench/kernels.py --json "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log" || status=1
        echo "== launch overhead"
        timeout 120 "$PY" python/bench/launch_overhead.py 2>&1 | tee "$OUT/launch.log" || status=1
        ;;
    ref)
        [ -d "${TIRX_REFTESTS:-}" ] || { echo "ref: set TIRX_REFTESTS to the reference's cuda test directory"; status=1; continue; }
        echo "== the reference's tests through tirx.compat (GPU)"
        files=${TIRX_REFTEST_FILES:-"copy elementwise reduction gemm"}
        (cd "$TIRX_REFTESTS" && timeout 900 "$PY" -m pytest --noconftest -p tirx.compat -p no:cacheprovider -q $files \
            --junitxml="$OUT/ref.xml" >"$OUT/ref.log" 2>&1)
        tail -n 3 "$OUT/ref.log"
        "$PY" python/bench/ref_summary.py "$OUT/ref.xml" | tee "$OUT/ref_summary.txt"
        ;;
    sanitize)
        echo "== tirx.ops designs under compute-sanitizer"
        PYTHON="$PY" timeout 600 scripts/gpu-sanitize-ops.sh 2>&1 | tee "$OUT/sanitize.log" | grep -v "^ok " || status=1
        ;;
    *) echo "unknown step $step"; status=1 ;;
    esac
done
echo "logs: $OUT"
exit $status
