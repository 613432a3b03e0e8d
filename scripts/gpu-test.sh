#!/usr/bin/env bash
# gpu-test.sh: the GPU acceptance run of tirx, on a machine with an NVIDIA GPU.
#
# Usage (from the repository root):
#   scripts/gpu-test.sh                      # uses $TIRX, else ./target/release/tirx
#   TIRX=/path/to/tirx scripts/gpu-test.sh
#   scripts/gpu-test.sh DIR...               # also every DIR/*.py (e.g. the ported reference
#                                            # matrix: `TIRX_DUMP_KERNELS=DIR cargo test -p tirx-lower`)
#   EXAMPLES=0 scripts/gpu-test.sh DIR...    # only the DIR kernels: no examples, sanitizers or bench
#                                            # (to split a large matrix over several runs)
#
# Needs only: the `tirx` binary, an NVIDIA driver, NVRTC + CUDA headers where tirx finds
# them (CUDA_HOME, /usr/local/cuda, or a pip nvidia/cu13 in $VIRTUAL_ENV or
# /opt/torch/.venv; TIRX_CUDA_LIB_DIR overrides), python3 with numpy (and ml_dtypes for
# bfloat16/fp8; $PYTHON, else python3, else /opt/torch/.venv/bin/python), and
# compute-sanitizer (PATH or /usr/local/cuda/bin).
#
# What it does:
#   1. for every examples/*.py: `tirx lower --emit cuda --meta` gives the parameters
#      (an example whose lowering fails with a user error, exit 1, is skipped and counted);
#      numpy writes one input .npy per parameter (uniform in [0.25, 4) for floats, small
#      integers otherwise); `tirx run --check-sim` runs it on the GPU and compares every
#      parameter with the CPU simulator; every --out file is read back and checked for
#      dtype and shape;
#      kernels in the DIR arguments get the same, in parallel ($JOBS, default 8), without
#      the sanitizers (there are hundreds);
#   2. compute-sanitizer --tool memcheck, racecheck and synccheck over each example's `tirx run`
#      with the same arguments (SANITIZE=REGEX: only the examples whose path matches);
#   3. `tirx bench --json` on examples/bench/*.py (kernel vs cuMemcpyDtoD, same traffic);
#   4. the prebuilt GPU test executables in $TIRX_TEST_BINS, if set (TIRX_REQUIRE_GPU=1 is
#      exported, so a test that finds no GPU fails rather than skipping);
#   5. a summary table. Exit status 1 on any failure or sanitizer finding, else 0.
# Logs stay in $WORK (default: a fresh temp dir, printed at the end). Budget: < 8 minutes
# (each step has a timeout; the bench uses 50 timed launches).
set -u -o pipefail

cd "$(dirname "$0")/.."
TIRX=${TIRX:-./target/release/tirx}
WORK=${WORK:-$(mktemp -d /tmp/tirx-gpu-test.XXXXXX)}
BENCH_ITERS=${BENCH_ITERS:-50}
mkdir -p "$WORK"
export TIRX_CACHE_DIR="$WORK/cubin-cache"
# Tests that skip without a GPU must fail here instead.
export TIRX_REQUIRE_GPU=1

die() { echo "gpu-test: $*" >&2; exit 1; }
[ -x "$TIRX" ] || die "no tirx binary at $TIRX (build it with 'cargo build --release -p tirx-cli' or set TIRX)"

PY=""
for cand in ${PYTHON:-} python3 /opt/torch/.venv/bin/python; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' 2>/dev/null; then PY=$cand; break; fi
done
[ -n "$PY" ] || die "no python with numpy (set PYTHON)"

SAN=$(command -v compute-sanitizer || true)
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
[ -n "$SAN" ] || die "compute-sanitizer not found (PATH or /usr/local/cuda/bin)"

echo "tirx: $TIRX   python: $PY   sanitizer: $SAN   work: $WORK"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# Writes one .npy per parameter of META into DIR and prints the --arg/--out options.
make_inputs() { # META DIR EXAMPLE
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, re, sys, numpy as np
meta, d, ex = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
# Scalar parameters take the values of the example's `# Run: ... --arg n=256 ...` line; run-time
# shapes and sizes are Python expressions of them (docs/lir.md §6).
vals = {}
for line in open(ex):
    if line.startswith("# Run:"):
        vals.update(a.split("=", 1) for a in re.findall(r"--arg (\w+=\S+)", line))
env = {k: int(v) if re.fullmatch(r"-?\d+", v) else float(v) for k, v in vals.items()}
json.dump(env, open(f"{d}/scalars.json", "w"))
def size(x):
    return x if isinstance(x, int) else eval(x, {"__builtins__": {}, "min": min, "max": max}, env)
rng = np.random.default_rng(0)
names = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
         "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
         "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
         "bool": np.bool_}
try:
    import ml_dtypes
    names.update(bfloat16=ml_dtypes.bfloat16, float8_e4m3fn=ml_dtypes.float8_e4m3fn,
                 float8_e5m2=ml_dtypes.float8_e5m2)
except ImportError:
    pass
opts = []
for p in meta["params"]:
    if p.get("kind") == "tensormap":  # built by the launcher from its buffer (docs/lir.md §6.1)
        continue
    if p.get("kind") == "scalar":
        if p["name"] not in vals:
            sys.exit(f"scalar `{p['name']}` has no value: add `--arg {p['name']}=...` to the example's `# Run:` line")
        opts += ["--arg", f"{p['name']}={vals[p['name']]}"]
        continue
    dt = names.get(p["dtype"])
    if dt is None:
        sys.exit(f"no numpy dtype for {p['dtype']} (install ml_dtypes)")
    shape = tuple(size(x) for x in p["shape"])
    if int(np.prod(shape)) != size(p["elems"]):  # a padded layout: the file holds the flat storage
        shape = (size(p["elems"]),)
    if p.get("zeroed"):  # a grid group barrier's words: their count starts at 0
        a = np.zeros(shape, dt)
    elif np.issubdtype(np.dtype(dt), np.integer):
        a = rng.integers(0, 100, size=shape).astype(dt)
    elif dt is np.bool_:
        a = rng.integers(0, 2, size=shape).astype(dt)
    else:
        a = rng.uniform(0.25, 4.0, size=shape).astype(np.float32).astype(dt)
    np.save(f"{d}/in_{p['name']}.npy", a)
    opts += ["--arg", f"{p['name']}={d}/in_{p['name']}.npy", "--out", f"{p['name']}={d}/out_{p['name']}.npy"]
print(" ".join(opts))
EOF
}

# Reads every out_*.npy back and checks it against the metadata's dtype and shape.
check_outputs() { # META DIR
    "$PY" - "$1" "$2" <<'EOF'
import json, sys, numpy as np
meta, d = json.load(open(sys.argv[1])), sys.argv[2]
env = json.load(open(f"{d}/scalars.json"))
def size(x):
    return x if isinstance(x, int) else eval(x, {"__builtins__": {}, "min": min, "max": max}, env)
try:
    import ml_dtypes  # registers bfloat16/fp8 names
except ImportError:
    pass
bad = 0
for p in meta["params"]:
    if p.get("kind") in ("scalar", "tensormap"):
        continue
    a = np.load(f"{d}/out_{p['name']}.npy")
    shape, elems = [size(x) for x in p["shape"]], size(p["elems"])
    want = shape if int(np.prod(shape)) == elems else [elems]
    if list(a.shape) != want or a.dtype.itemsize * a.size != size(p["bytes"]):
        print(f"  {p['name']}: out file has shape {a.shape} dtype {a.dtype}, expected {p['shape']} {p['dtype']}")
        bad += 1
sys.exit(1 if bad else 0)
EOF
}

# Findings in a compute-sanitizer log: "ERROR SUMMARY: N errors" / "RACECHECK SUMMARY: N hazards".
san_findings() { # LOG
    local n
    n=$(grep -Eo '(ERROR SUMMARY|RACECHECK SUMMARY): [0-9]+' "$1" | grep -Eo '[0-9]+$' | awk '{s+=$1} END {print s+0}')
    # No summary line at all means the tool itself failed: count it as a finding.
    grep -Eq '(ERROR|RACECHECK) SUMMARY' "$1" || n=1
    echo "$n"
}

run_ok=0; run_fail=0; skipped=0; memcheck_total=0; racecheck_total=0; synccheck_total=0
ROWS=(); SKIPS=(); BROWS=()

# One kernel: lower (+ launch metadata), numpy inputs, `tirx run --check-sim`, outputs read back.
# Writes its verdict to $WORK/<name>/status: pass | FAIL | inputs | outputs | LOWER(rc) | skipped.
check_one() { # EX
    local ex=$1 name d rc status t0=$SECONDS
    name=$(echo "${ex%.py}" | tr '/' '_')
    d="$WORK/$name"; mkdir -p "$d"
    timeout 60 "$TIRX" lower "$ex" --emit cuda -o "$d/kernel.cu" --meta "$d/meta.json" >"$d/lower.log" 2>&1
    rc=$?
    if [ $rc -eq 1 ]; then echo skipped >"$d/status"; return; fi
    if [ $rc -ne 0 ]; then echo "LOWER($rc)" >"$d/status"; return; fi
    status=pass
    if ! opts=$(make_inputs "$d/meta.json" "$d" "$ex" 2>"$d/inputs.log"); then
        status=inputs
        opts=''
    # 300 s: the i64-index kernels check 16 GiB of parameters against the simulator (93 s alone on an H100 host).
    elif ! timeout 300 "$TIRX" run "$ex" $opts --check-sim --timing >"$d/run.log" 2>&1; then
        status=FAIL
    elif ! check_outputs "$d/meta.json" "$d" >>"$d/run.log" 2>&1; then
        status=outputs
    fi
    echo "$opts" >"$d/opts"
    echo "$((SECONDS - t0))" >"$d/seconds"
    echo "$status" >"$d/status"
}

examples=(examples/*.py)
[ "${EXAMPLES:-1}" = 0 ] && examples=()
extra=()
for dir in "$@"; do
    [ -d "$dir" ] || die "$dir is not a directory"
    extra+=("$dir"/*.py)
done

# Examples one by one, each also under compute-sanitizer memcheck, racecheck and synccheck.
declare -A MC RC SC
for ex in "${examples[@]}"; do
    check_one "$ex"
    d="$WORK/$(echo "${ex%.py}" | tr '/' '_')"
    MC[$ex]=-; RC[$ex]=-; SC[$ex]=-
    [ "$(cat "$d/status")" = skipped ] && continue
    [[ $ex =~ ${SANITIZE:-.} ]] || continue
    read -r -a opts <"$d/opts"
    timeout 180 "$SAN" --tool memcheck "$TIRX" run "$ex" "${opts[@]}" >"$d/memcheck.log" 2>&1
    MC[$ex]=$(san_findings "$d/memcheck.log")
    timeout 180 "$SAN" --tool racecheck "$TIRX" run "$ex" "${opts[@]}" >"$d/racecheck.log" 2>&1
    RC[$ex]=$(san_findings "$d/racecheck.log")
    timeout 180 "$SAN" --tool synccheck "$TIRX" run "$ex" "${opts[@]}" >"$d/synccheck.log" 2>&1
    SC[$ex]=$(san_findings "$d/synccheck.log")
    memcheck_total=$((memcheck_total + MC[$ex])); racecheck_total=$((racecheck_total + RC[$ex]))
    synccheck_total=$((synccheck_total + SC[$ex]))
done

# Kernels from DIR arguments (hundreds): in parallel, without the sanitizers.
if [ ${#extra[@]} -gt 0 ]; then
    export TIRX PY WORK
    export -f check_one make_inputs check_outputs
    printf '%s\0' "${extra[@]}" | xargs -0 -n 1 -P "${JOBS:-8}" bash -c 'check_one "$1"' _
fi

for ex in "${examples[@]}" "${extra[@]}"; do
    d="$WORK/$(echo "${ex%.py}" | tr '/' '_')"
    status=$(cat "$d/status" 2>/dev/null || echo missing)
    case $status in
        skipped) skipped=$((skipped + 1)); SKIPS+=("$ex: $(grep -m1 -E 'error' "$d/lower.log" || head -n1 "$d/lower.log")"); continue ;;
        pass) run_ok=$((run_ok + 1)) ;;
        *) run_fail=$((run_fail + 1)); echo "--- $ex ($status):"; tail -n 20 "$d/lower.log" "$d/run.log" "$d/inputs.log" 2>/dev/null ;;
    esac
    # Every example gets a row; kernels from DIR arguments only when they fail.
    if [[ $ex == examples/* ]] || [ "$status" != pass ]; then
        ROWS+=("$(printf '%-40s %-10s %-9s %-9s %-9s' "$ex" "$status" "${MC[$ex]:--}" "${RC[$ex]:--}" "${SC[$ex]:--}")")
    fi
done

bench_fail=0
benches=(examples/bench/*.py)
[ "${EXAMPLES:-1}" = 0 ] && benches=()
for ex in "${benches[@]}"; do
    name=bench_$(basename "$ex" .py)
    if timeout 150 "$TIRX" bench "$ex" --json --iters "$BENCH_ITERS" --warmup 5 >"$WORK/$name.json" 2>"$WORK/$name.log"; then
        BROWS+=("$("$PY" - "$WORK/$name.json" "$ex" <<'EOF'
import json, sys
r, ex = json.load(open(sys.argv[1])), sys.argv[2]
f = lambda v, fmt: format(v, fmt) if v is not None else "-"
m = r.get("memcpy") or {}
print(f"{ex:<40} {r['kernel_ms']['median']:>9.4f} {f(r.get('kernel_gbps'), '9.1f'):>9} "
      f"{f(m.get('gbps'), '9.1f'):>11} {f(r.get('ratio_to_memcpy'), '6.3f'):>6}")
EOF
)")
    else
        rc=$?
        if [ $rc -eq 1 ] && grep -q '^error' "$WORK/$name.log"; then
            BROWS+=("$(printf '%-40s skipped: lowering user error (%s)' "$ex" "$(grep -m1 '^error' "$WORK/$name.log")")")
            skipped=$((skipped + 1))
        else
            bench_fail=$((bench_fail + 1))
            BROWS+=("$(printf '%-40s FAILED (exit %s): %s' "$ex" "$rc" "$(tail -n1 "$WORK/$name.log")")")
        fi
    fi
done

# Prebuilt Rust test executables that need the GPU (no Rust toolchain on GPU machines):
# build them with `cargo test --release -p tirx-runtime --no-run` and copy the binaries into
# $TIRX_TEST_BINS. With TIRX_REQUIRE_GPU=1 a test that finds no GPU fails instead of skipping.
test_bin_fail=0; test_bin_ok=0
for t in ${TIRX_TEST_BINS:+"$TIRX_TEST_BINS"/*}; do
    [ -x "$t" ] || continue
    if timeout 300 "$t" >"$WORK/testbin_$(basename "$t").log" 2>&1; then
        test_bin_ok=$((test_bin_ok + 1))
    else
        test_bin_fail=$((test_bin_fail + 1))
        echo "FAILED: $t (log: $WORK/testbin_$(basename "$t").log)"
    fi
done

echo
echo "== examples: GPU vs simulator, compute-sanitizer findings =="
printf '%-40s %-10s %-9s %-9s %-9s\n' example check-sim memcheck racecheck synccheck
for r in "${ROWS[@]}"; do echo "$r"; done
if [ ${#SKIPS[@]} -gt 0 ]; then
    echo "skipped (lowering reports a user error):"
    for s in "${SKIPS[@]}"; do echo "  $s"; done
fi
echo
echo "== slowest kernels (seconds for lowering, inputs, run --check-sim and outputs) =="
for ex in "${examples[@]}" "${extra[@]}"; do
    d="$WORK/$(echo "${ex%.py}" | tr '/' '_')"
    [ -f "$d/seconds" ] && printf '%6s  %s\n' "$(cat "$d/seconds")" "$ex"
done | sort -rn | head -n 5
echo
echo "== bench: median of $BENCH_ITERS launches; traffic = bytes read + written =="
printf '%-40s %9s %9s %11s %6s\n' kernel ms GB/s memcpyGB/s ratio
for r in "${BROWS[@]}"; do echo "$r"; done
echo
echo "cases run: $((run_ok + run_fail)), passed: $run_ok, failed: $run_fail, skipped: $skipped; bench failures: $bench_fail"
echo "sanitizer findings: memcheck $memcheck_total, racecheck $racecheck_total, synccheck $synccheck_total"
[ -n "${TIRX_TEST_BINS:-}" ] && echo "GPU test executables: $test_bin_ok passed, $test_bin_fail failed"
echo "logs: $WORK"
if [ $run_fail -gt 0 ] || [ $bench_fail -gt 0 ] || [ $test_bin_fail -gt 0 ] || [ $memcheck_total -gt 0 ] || [ $racecheck_total -gt 0 ] || [ $synccheck_total -gt 0 ]; then
    exit 1
fi
exit 0
