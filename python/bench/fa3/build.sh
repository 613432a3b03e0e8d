#!/usr/bin/env bash
# Build libfa3.so: FlashAttention-3 (Hopper, sm_90a) forward + C API (fa3_capi.cu).
#
# Env knobs:
#   FA3_KERNELS  space-separated subset of: e4m3_64 e4m3_128 e4m3_256 bf16_64 bf16_128 bf16_256 (default: all)
#   JOBS         parallel nvcc processes (default 2)
#   FORCE=1      rebuild all objects (default: rebuild only objects older than their sources)
#   CUDA_HOME, FA3_SRC (hopper dir), CUTLASS_DIR
#   FA3_ENABLE_CLUSTER=1  drop -DFLASHATTENTION_DISABLE_CLUSTER (stock FA3 uses 2-CTA clusters for
#                         bf16 hdim>=128 non-causal; adds kernels; NOT compile-tested by default)
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
HERE=$(pwd)

# (default: the CUDA 13 toolchain .ci/run installs at the repository root)
CUDA_HOME=${CUDA_HOME:-$HERE/../../../.venv-cuda/lib/python3.11/site-packages/nvidia/cu13}
NVCC=$CUDA_HOME/bin/nvcc
: "${FA3_SRC:?the hopper/ directory of a Dao-AILab/flash-attention checkout}"
: "${CUTLASS_DIR:?a NVIDIA/cutlass checkout}"
FA3_KERNELS=${FA3_KERNELS:-"e4m3_64 e4m3_128 e4m3_256 bf16_64 bf16_128 bf16_256"}
JOBS=${JOBS:-2}
BUILD=$HERE/build
mkdir -p "$BUILD"

FLAGS=(
  -gencode arch=compute_90a,code=sm_90a
  -std=c++17 -O3 --expt-relaxed-constexpr --expt-extended-lambda --use_fast_math
  -DNDEBUG -DCUTLASS_ENABLE_GDC_FOR_SM90 -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_DEBUG_TRACE_LEVEL=0
  -DFLASHATTENTION_DISABLE_BACKWARD -DFLASHATTENTION_DISABLE_SPLIT -DFLASHATTENTION_DISABLE_PAGEDKV
  -DFLASHATTENTION_DISABLE_APPENDKV -DFLASHATTENTION_DISABLE_LOCAL -DFLASHATTENTION_DISABLE_SOFTCAP
  -DFLASHATTENTION_DISABLE_PACKGQA -DFLASHATTENTION_DISABLE_VARLEN -DFLASHATTENTION_DISABLE_SM8x
  -I"$HERE" -I"$FA3_SRC" -I"$CUTLASS_DIR/include" -I"$CUTLASS_DIR/tools/util/include"
  -Xcompiler -fPIC -Xcompiler -fvisibility=hidden
)
if [[ "${FA3_ENABLE_CLUSTER:-0}" != 1 ]]; then FLAGS+=(-DFLASHATTENTION_DISABLE_CLUSTER); fi
# Record flags so a flag change forces a rebuild.
printf '%s\n' "${FLAGS[@]}" > "$BUILD/flags.new"
if ! cmp -s "$BUILD/flags.new" "$BUILD/flags.txt" 2>/dev/null; then FORCE=1; mv "$BUILD/flags.new" "$BUILD/flags.txt"; else rm -f "$BUILD/flags.new"; fi

need_build() {  # $1 = object, rest = sources
  local obj=$1; shift
  [[ "${FORCE:-0}" == 1 || ! -f "$obj" ]] && return 0
  local s; for s in "$@"; do [[ "$s" -nt "$obj" ]] && return 0; done
  return 1
}

compile_kernel() {  # $1 = e.g. bf16_128
  local kname=$1 dt=${1%_*} hd=${1#*_} def
  case $dt in e4m3) def=-DFA3_INST_E4M3;; bf16) def=-DFA3_INST_BF16;; *) echo "bad kernel $kname"; return 1;; esac
  local obj=$BUILD/inst_$kname.o log=$BUILD/inst_$kname.log
  if ! need_build "$obj" fa3_inst.cu fa3_common.h; then echo "[skip] $kname up to date"; return 0; fi
  local t0=$SECONDS
  if "$NVCC" "${FLAGS[@]}" -Xptxas -v "$def" -DFA3_INST_HDIM="$hd" -c fa3_inst.cu -o "$obj.tmp" >"$log" 2>&1; then
    mv "$obj.tmp" "$obj"; echo "[ok]   $kname  $((SECONDS - t0))s"
  else
    rm -f "$obj.tmp" "$obj"; echo "[FAIL] $kname (see $log)"; tail -20 "$log"; return 1
  fi
}

T0=$SECONDS
echo "== compiling instantiations ($FA3_KERNELS) with $JOBS parallel jobs"
fail=0
pids=()
for kn in $FA3_KERNELS; do
  while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n || fail=1; done
  compile_kernel "$kn" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if need_build "$BUILD/capi.o" fa3_capi.cu fa3_common.h; then
  "$NVCC" "${FLAGS[@]}" -Xcompiler -Wall -c fa3_capi.cu -o "$BUILD/capi.o"
fi
(( fail == 0 )) || { echo "some instantiations failed"; exit 1; }

OBJS=("$BUILD/capi.o")
for kn in $FA3_KERNELS; do OBJS+=("$BUILD/inst_$kn.o"); done
# Only link objects that were asked for (stale objects of other kernels are not linked).
echo "== linking libfa3.so"
# -cudart static : libcudart_static.a goes into the .so (libcuda.so.1 is dlopen'ed at runtime)
# --exclude-libs,ALL : do not export cudart's cuda* symbols, so they cannot interpose with /
#                      be interposed by torch's libcudart in the same process
# -Bsymbolic, --no-undefined : bind our own references locally; fail the link on missing symbols
"$NVCC" -shared -cudart static -gencode arch=compute_90a,code=sm_90a \
  -L"$CUDA_HOME/lib" \
  -Xlinker --exclude-libs,ALL -Xlinker -Bsymbolic -Xlinker --no-undefined \
  "${OBJS[@]}" -o "$BUILD/libfa3.so.tmp" -lpthread -ldl -lrt
mv "$BUILD/libfa3.so.tmp" "$HERE/libfa3.so"

echo "== ptxas register / spill summary"
for kn in $FA3_KERNELS; do
  log=$BUILD/inst_$kn.log
  [[ -f $log ]] || continue
  awk -v k="$kn" '
    /Compiling entry function/ { c = ($0 ~ /DynamicPersistentTileScheduler/) ? "causal" : "non-causal" }
    /bytes spill stores/ { sp=$0; sub(/^ +/,"",sp) }
    /Used [0-9]+ registers/ { match($0,/Used [0-9]+ registers/); r=substr($0,RSTART,RLENGTH); printf "  %-9s %-10s %s | %s\n", k, c, r, sp; sp="" }' "$log"
done
echo "== exported fa3_ symbols"
nm -D --defined-only "$HERE/libfa3.so" | grep ' fa3_' || true
echo "== done in $((SECONDS - T0))s: $HERE/libfa3.so"
