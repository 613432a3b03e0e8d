#!/usr/bin/env bash
# CUDA compile check for generated kernels (CPU only, no GPU needed).
#
#   scripts/ci-cuda.sh DIR
#
# 1. Makes sure the pinned CUDA 13.0 toolchain is installed from PyPI wheels in
#    .venv-cuda/ at the repo root (created on first use; ignored by git).
# 2. Compiles every DIR/*.cu with `nvcc -arch=sm_90a -fmad=false -lineinfo -cubin` (the
#    runtime's options) and dumps its SASS
#    with `cuobjdump -sass` (into $TIRX_SASS_OUT, default a fresh temp dir);
#    also compiles it with NVRTC 13.0 (what tirx-runtime uses) to sm_90a CUBIN.
# 3. Checks scripts/sass-expect.txt: each line is `<file-glob> <regex>` (the
#    SASS must match) or `<file-glob> !<regex>` (the SASS must not match);
#    globs match file names in DIR, regexes are grep -E. Every file must also
#    compile without ptxas serializing its wgmmas (C7512), by nvcc and by NVRTC.
# Prints one table row per compile and per check; exits 1 on any failure,
# 2 on a usage or toolchain problem. It never skips: no toolchain, no .cu
# files or an unreadable expectation file are errors.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-cuda"
EXPECT="$ROOT/scripts/sass-expect.txt"
# nvcc 13.0 pulls nvidia-nvvm (cicc) unpinned, and a newer cicc writes PTX that
# ptxas 13.0 rejects ("Unsupported .version 9.5"): pin it to the same release.
PACKAGES=(
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
    nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-cuda-runtime==13.0.88
    nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37
)

die() { echo "ci-cuda: $*" >&2; exit 2; }

[[ $# -eq 1 ]] || die "usage: scripts/ci-cuda.sh DIR   (compiles DIR/*.cu)"
DIR="$1"
[[ -d "$DIR" ]] || die "$DIR is not a directory"
[[ -r "$EXPECT" ]] || die "cannot read $EXPECT"

t0=$(date +%s.%N)

# ---- toolchain -------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "ci-cuda: creating $VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed"
fi
# `pip install` of already-satisfied pins is a no-op; it also repairs a partial venv.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" \
    || die "installing the CUDA toolchain wheels failed"
CU="$("$VENV/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')" \
    || die "the nvidia wheels are not importable from $VENV"
NVCC="$CU/bin/nvcc"
CUOBJDUMP="$CU/bin/cuobjdump"
for tool in "$NVCC" "$CUOBJDUMP" "$CU/bin/ptxas" "$CU/nvvm/bin/cicc"; do
    [[ -x "$tool" ]] || die "missing $tool after install"
done
"$NVCC" --version | grep -q "release 13.0" || die "$NVCC is not CUDA 13.0"

t1=$(date +%s.%N)

# ---- compile ---------------------------------------------------------------
shopt -s nullglob
sources=("$DIR"/*.cu)
[[ ${#sources[@]} -gt 0 ]] || die "no .cu files in $DIR"
OUT="${TIRX_SASS_OUT:-$(mktemp -d -t tirx-sass.XXXXXX)}"
mkdir -p "$OUT"

compile_one() {
    local src="$1" name
    name="$(basename "$src" .cu)"
    # (-fmad=false -lineinfo: the runtime's NVRTC options, crates/runtime/src/nvrtc.rs: the SASS a launch runs)
    if "$NVCC" -arch=sm_90a -fmad=false -lineinfo -cubin -o "$OUT/$name.cubin" "$src" >"$OUT/$name.log" 2>&1 \
        && "$CUOBJDUMP" -sass "$OUT/$name.cubin" >"$OUT/$name.sass" 2>>"$OUT/$name.log"; then
        echo ok >"$OUT/$name.status"
    else
        echo fail >"$OUT/$name.status"
    fi
}
export -f compile_one
export NVCC CUOBJDUMP OUT
printf '%s\0' "${sources[@]}" | xargs -0 -n 1 -P "$(nproc)" bash -c 'compile_one "$1"' _

# NVRTC, in-process through ctypes: writes OUT/<name>.nvrtc = ok|fail and OUT/<name>.nvrtc.log.
"$VENV/bin/python" - "$CU" "$OUT" "${sources[@]}" <<'PY' || die "the NVRTC check could not run"
import ctypes, os, sys
cu, out, sources = sys.argv[1], sys.argv[2], sys.argv[3:]
lib_dir = os.path.join(cu, "lib")
# The 13.0 libnvrtc has no RPATH: load its builtins first so its dlopen finds them.
ctypes.CDLL(os.path.join(lib_dir, "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
nvrtc = ctypes.CDLL(os.path.join(lib_dir, "libnvrtc.so.13"))
# (the runtime's options, crates/runtime/src/nvrtc.rs: the kernel a launch gets)
opts = [b"--gpu-architecture=sm_90a", b"-std=c++17", b"-lineinfo", b"--fmad=false",
        b"--include-path=" + os.path.join(cu, "include").encode(),
        b"--include-path=" + os.path.join(cu, "include", "cccl").encode()]
for path in sources:
    name = os.path.basename(path)[:-3]
    prog = ctypes.c_void_p()
    ok = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), open(path, "rb").read(), path.encode(), 0, None, None) == 0
    ok = ok and nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) == 0
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    cubin = ctypes.c_size_t()
    ok = ok and nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(cubin)) == 0 and cubin.value > 0
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    open(os.path.join(out, name + ".nvrtc.log"), "wb").write(log.value)
    open(os.path.join(out, name + ".nvrtc"), "w").write("ok\n" if ok else "fail\n")
PY

t2=$(date +%s.%N)

# ---- checks ----------------------------------------------------------------
fails=0
checks=0
row() { printf '%-6s %-32s %s\n' "$1" "$2" "$3"; }
row RESULT FILE CHECK
for src in "${sources[@]}"; do
    file="$(basename "$src")"
    name="${file%.cu}"
    if [[ "$(cat "$OUT/$name.status")" != ok ]]; then
        row FAIL "$file" "nvcc compile (log: $OUT/$name.log)"
        sed 's/^/       | /' "$OUT/$name.log" | head -20
        fails=$((fails + 1))
        continue
    fi
    row ok "$file" "nvcc compile + SASS ($(grep -c '^ *\/\*[0-9a-f]*\*\/' "$OUT/$name.sass") instructions)"
    # ptxas serializing wgmmas (C7512 and its kin: each waits for the one before; a register
    # shortage or a partial read across a loop's back edge) halves a tensor-core kernel's rate
    # with no error: by nvcc, or by NVRTC with the runtime's options (--fmad=false).
    checks=$((checks + 1))
    serial="wgmma.mma_async instructions are serialized"
    if grep -qh "$serial" "$OUT/$name.log" "$OUT/$name.nvrtc.log"; then
        row FAIL "$file" "ptxas serialized wgmmas: $(grep -h -m1 "$serial" "$OUT/$name.log" "$OUT/$name.nvrtc.log" | head -1 | sed 's/^ptxas info *: //')"
        fails=$((fails + 1))
    else
        row ok "$file" "wgmmas not serialized (ptxas, nvcc and NVRTC)"
    fi
    if [[ "$(cat "$OUT/$name.nvrtc")" == ok ]]; then
        row ok "$file" "nvrtc compile"
    else
        row FAIL "$file" "nvrtc compile (log: $OUT/$name.nvrtc.log)"
        sed 's/^/       | /' "$OUT/$name.nvrtc.log" | head -20
        fails=$((fails + 1))
    fi
    while read -r glob regex; do
        [[ -z "$glob" || "$glob" == \#* ]] && continue
        [[ -n "$regex" ]] || die "sass-expect.txt: line '$glob' has no regex"
        # shellcheck disable=SC2053  # the glob is meant to match
        [[ "$file" == $glob ]] || continue
        checks=$((checks + 1))
        if [[ "$regex" == !* ]]; then
            if grep -Eq -- "${regex:1}" "$OUT/$name.sass"; then
                row FAIL "$file" "forbidden /${regex:1}/ found: $(grep -Em1 -- "${regex:1}" "$OUT/$name.sass" | sed 's/^ *//; s/ *\/\*.*//; s/ *;.*//')"
                fails=$((fails + 1))
            else
                row ok "$file" "no /${regex:1}/"
            fi
        elif grep -Eq -- "$regex" "$OUT/$name.sass"; then
            row ok "$file" "has /$regex/"
        else
            row FAIL "$file" "missing /$regex/"
            fails=$((fails + 1))
        fi
    done <"$EXPECT"
done

t3=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
echo
echo "ci-cuda: ${#sources[@]} files, $checks SASS checks, $fails failures;" \
    "toolchain $(secs "$t0" "$t1") s, compile $(secs "$t1" "$t2") s, checks $(secs "$t2" "$t3") s; SASS in $OUT"
[[ $fails -eq 0 ]] || exit 1
