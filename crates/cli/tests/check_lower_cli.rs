//! `check` ok ⇒ `lower` ok, and `check` fails ⇒ every later command fails the
//! same way: each case is exit 1 from `check`, `lower --emit cuda` and `sim`
//! with the same diagnostic (`file:line:col`, the line, a caret, a fix) —
//! never `check` ok followed by a failure, and never an internal error (exit 2).
//! Also the region bounds of tile calls (`docs/tile-primitives.md` §3.1): a
//! region that provably leaves its buffer is a `check` error at the region,
//! and `sim --defer-bounds` reports its first out-of-bounds access.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tirx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirx")).args(args).env("NO_COLOR", "1").output().expect("tirx runs")
}

/// A kernel with `A`, `B` (32, 32) float32, one warp, a 32×32 staging buffer `S_`
/// allocated by `alloc`, and the copy `A → S_` with `extra` after its operands.
fn script(name: &str, alloc: &str, extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirx-check-lower-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = format!(
        "from tvm.script import tirx as T\n\
         from tvm.script.tirx import tile as Tx\n\
         \n\
         @T.prim_func\n\
         def k(A_ptr: T.handle, B_ptr: T.handle):\n    \
             A = T.match_buffer(A_ptr, (32, 32), \"float32\")\n    \
             B = T.match_buffer(B_ptr, (32, 32), \"float32\")\n    \
             T.device_entry(); T.cta_id([1]); T.lane_id([32]); T.thread_id([32])\n    \
             S_ = {alloc}\n    \
             Tx.warp.copy(S_[0:32, 0:32], A[0:32, 0:32]{extra})\n    \
             T.cuda.cta_sync()\n    \
             Tx.warp.copy(B[0:32, 0:32], S_[0:32, 0:32])\n"
    );
    let p = dir.join(name);
    std::fs::write(&p, src).expect("write script");
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `check`, `lower --emit cuda` and `sim` all exit 1 with every piece of `want` on stderr.
fn fails_everywhere(p: &Path, want: &[&str]) {
    let path = p.to_str().expect("utf-8");
    for args in [vec!["check", path], vec!["lower", path, "--emit", "cuda"], vec!["sim", path]] {
        let out = tirx(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("internal error"), "{args:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{args:?}: missing `{w}` in\n{err}");
        }
    }
}

const SHARED: &str = "T.alloc_buffer((32, 32), \"float32\", scope=\"shared\")";

#[test]
fn an_unknown_dispatch_name_lists_the_registered_ones() {
    let p = script("fastest.py", SHARED, ", dispatch=\"fastest\"");
    fails_everywhere(
        &p,
        &[
            "error: no variant named 'fastest' is registered for `copy`",
            "fastest.py:10:5",
            "^^^^",
            "help: registered variants: gmem_smem_peel, gmem_smem, ldstmatrix, reg, gmem_smem_predicated, fallback",
        ],
    );
}

#[test]
fn a_forced_variant_that_cannot_apply_says_why() {
    let p = script("forced.py", SHARED, ", dispatch=\"ldstmatrix\"");
    fails_everywhere(
        &p,
        &[
            "error: the forced variant 'ldstmatrix' does not apply to this `copy`",
            "forced.py:10:5",
            "ldstmatrix (prio=10)          | unsupported memory scopes src=global dst=shared; allowed: local->shared, shared->local",
            "help: remove `dispatch=` to let the dispatcher pick a variant",
        ],
    );
}

/// Was: the allocation error, then an internal error (exit 2) from `fallback`
/// emitting a copy of the buffer that has no storage.
#[test]
fn a_global_allocation_is_one_error_at_the_allocation() {
    let p = script("global.py", "T.alloc_buffer((32, 32), \"float32\", scope=\"global\")", "");
    fails_everywhere(
        &p,
        &[
            "error: `S_`: global buffers cannot be allocated inside a kernel",
            "global.py:9:10",
            "^^^^ `scope=\"global\"` allocation",
            "help: pass it as a kernel parameter",
        ],
    );
    let err = stderr(&tirx(&["check", p.to_str().expect("utf-8")]));
    assert_eq!(err.matches("error:").count(), 1, "one error: {err}");
}

#[test]
fn static_shared_memory_over_48_kib_is_dynamic_and_over_the_target_limit_a_check_error() {
    // 50 KiB of `shared`: placed in dynamic shared memory, with a note at the allocation.
    let p = script("smem.py", "T.alloc_buffer((32, 400), \"float32\", scope=\"shared\")", "");
    let path = p.to_str().expect("utf-8");
    for args in [vec!["check", path], vec!["lower", path, "--emit", "cuda"], vec!["explain", path]] {
        let out = tirx(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        for w in [
            "note: static shared memory over 48 KiB: `S_` (32 × 400 float32, 51200 bytes)",
            "smem.py:9:10",
            "^^^^ crosses the 48 KiB of static `__shared__` arrays CUDA allows",
        ] {
            assert!(err.contains(w), "{args:?}: missing `{w}` in\n{err}");
        }
    }
    // 250 KiB: over the 227 KiB a CTA may use on sm_90.
    let p = script("smem_big.py", "T.alloc_buffer((32, 2000), \"float32\", scope=\"shared\")", "");
    fails_everywhere(
        &p,
        &[
            "error: shared memory over the sm_90a limit: `S_` (32 × 2000 float32, 256000 bytes)",
            "smem_big.py:9:10",
            "^^^^ crosses the 227 KiB per-CTA limit of sm_90a",
            "help: use smaller tiles",
        ],
    );
}

/// The reproducer: on a (16, 32) `A`, CTA `bx` of 2 reads columns
/// `bx * 16 .. bx * 16 + 32` — for bx = 1 the next row. `check` fails at the
/// region; `sim` without `--defer-bounds` fails the same way; with it, the
/// simulator reports the first out-of-bounds element, not a race or success.
#[test]
fn a_symbolic_out_of_bounds_region_is_a_check_error_and_a_simulator_out_of_bounds_access() {
    let dir = std::env::temp_dir().join(format!("tirx-check-lower-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join("oob.py");
    std::fs::write(
        &p,
        "from tvm.script import tirx as T\n\
         from tvm.script.tirx import tile as Tx\n\
         \n\
         @T.prim_func\n\
         def oob(A_ptr: T.handle, B_ptr: T.handle):\n    \
             A = T.match_buffer(A_ptr, (16, 32), \"float32\")\n    \
             B = T.match_buffer(B_ptr, (8, 32), \"float32\")\n    \
             T.device_entry()\n    \
             bx = T.cta_id([2]); T.lane_id([32]); T.thread_id([32])\n    \
             S_ = T.alloc_buffer((8, 32), \"float32\", scope=\"shared\")\n    \
             Tx.warp.copy(S_[0:8, 0:32], A[0:8, bx * 16 : bx * 16 + 32])\n    \
             T.cuda.cta_sync()\n    \
             Tx.warp.copy(B[0:8, 0:32], S_[0:8, 0:32])\n",
    )
    .expect("write script");
    fails_everywhere(
        &p,
        &[
            "error: `A[0:8, bx * 16:bx * 16 + 32]` is out of bounds of `A` (shape (16, 32)): bx = 1 reads columns [16, 48) of 32",
            "oob.py:11:33",
            "^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ bx = 1 reads columns [16, 48) of 32",
            "help: every value of bx must keep the columns inside [0, 32)",
        ],
    );
    let out = tirx(&["sim", p.to_str().expect("utf-8"), "--defer-bounds"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("warning: `A[0:8, bx * 16:bx * 16 + 32]` is out of bounds"), "{err}");
    assert!(
        err.contains(
            "error: out-of-bounds access: read of element (0, 32) of `A` (global, shape (16, 32)) by thread 0 (warp 0, lane 0) of CTA (1, 0, 0)"
        ),
        "{err}"
    );
    assert!(err.contains("oob.py:11:33"), "at the region: {err}");
    assert!(!err.contains("data race") && !err.contains("internal error"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).is_empty(), "no success line");
}
