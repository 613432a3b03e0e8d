//! Resource and layout errors end to end: a user error is exit 1 with
//! `file:line:col`, the line, a caret and a fix, never an abort (SIGABRT) or
//! an internal error (exit 2).

use std::path::PathBuf;
use std::process::{Command, Output};

fn tirx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirx")).args(args).env("NO_COLOR", "1").output().expect("tirx runs")
}

fn script(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirx-resources-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = format!(
        "from tvm.script import tirx as T\n\
         from tvm.script.tirx import tile as Tx\n\
         from tvm.tirx.layout import S, TileLayout, laneid, warpid\n\
         \n\
         @T.prim_func\n\
         def k(A_ptr: T.handle, B_ptr: T.handle):\n\
         {body}"
    );
    let p = dir.join(name);
    std::fs::write(&p, src).expect("write script");
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const DEVICE: &str = "    T.device_entry(); T.cta_id([1]); T.warp_id([4]); T.lane_id([32]); T.thread_id([128])\n";

#[test]
fn simulating_a_4_tib_buffer_is_refused_with_its_size() {
    let p = script(
        "huge.py",
        &format!(
            "    A = T.match_buffer(A_ptr, (1048576, 1048576), \"float32\")\n    \
             B = T.match_buffer(B_ptr, (32,), \"float32\")\n{DEVICE}    B[0] = A[0, 0]\n"
        ),
    );
    let path = p.to_str().expect("utf-8");
    for args in [vec!["sim", path], vec!["sim", path, "--no-race-check"], vec!["explain", "--sim", path]] {
        let out = tirx(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("4398046511104 bytes (4.0 TiB) of data"), "{args:?}: {err}");
        assert!(err.contains("huge.py:7:9"), "at the match_buffer: {err}");
        assert!(err.contains("help: simulate a smaller shape"), "{err}");
    }
}

/// A 128×128 f32 tile in `scope="shared"` (64 KiB) and a copy through it.
fn smem_tile(name: &str, rows: i64) -> PathBuf {
    script(
        name,
        &format!(
            "    A = T.match_buffer(A_ptr, ({rows}, 128), \"float32\")\n    \
             B = T.match_buffer(B_ptr, ({rows}, 128), \"float32\")\n{DEVICE}    \
             A_smem = T.alloc_buffer(({rows}, 128), \"float32\", scope=\"shared\")\n    \
             Tx.cta.copy(A_smem[0:{rows}, 0:128], A[0:{rows}, 0:128])\n    \
             T.cuda.cta_sync()\n    \
             Tx.cta.copy(B[0:{rows}, 0:128], A_smem[0:{rows}, 0:128])\n"
        ),
    )
}

/// Static shared memory over 48 KiB is placed in dynamic shared memory, with a note at
/// the allocation (docs/tile-primitives.md §2.7); over the target's limit it is an error there.
#[test]
fn static_shared_memory_over_48_kib_becomes_dynamic_with_a_note_at_the_allocation() {
    let p = smem_tile("smem64.py", 128);
    let path = p.to_str().expect("utf-8");
    for args in [vec!["check", path], vec!["lower", path, "--emit", "cuda"], vec!["sim", path]] {
        let out = tirx(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("note: static shared memory over 48 KiB"), "{args:?}: {err}");
        assert!(err.contains("smem64.py:10:14"), "at the allocation: {err}");
        assert!(err.contains("A_smem = T.alloc_buffer((128, 128)") && err.contains("^^^"), "{err}");
        assert!(err.contains("placed in dynamic shared memory"), "{err}");
        if args[0] == "lower" {
            let cuda = String::from_utf8_lossy(&out.stdout);
            assert!(cuda.contains("extern __shared__") && !cuda.contains("__shared__ alignas"), "{cuda}");
        }
    }
    // 256 KiB is over what sm_90 allows a CTA: a user error at the allocation.
    let p = smem_tile("smem256.py", 512);
    let path = p.to_str().expect("utf-8");
    for args in [vec!["check", path], vec!["lower", path, "--emit", "cuda"], vec!["sim", path]] {
        let out = tirx(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("internal error"), "{err}");
        assert!(err.contains("error: shared memory over the sm_90a limit"), "{err}");
        assert!(err.contains("smem256.py:10:14"), "at the allocation: {err}");
    }
}

#[test]
fn a_non_injective_register_layout_is_a_check_error_at_the_layout() {
    let p = script(
        "noninj.py",
        &format!(
            "    A = T.match_buffer(A_ptr, (8, 4, 4, 8, 8), \"float32\")\n    \
             B = T.match_buffer(B_ptr, (8, 4, 4, 8, 8), \"float32\")\n{DEVICE}    \
             R = T.alloc_buffer((8, 4, 4, 8, 8), \"float32\", scope=\"local\", \
             layout=TileLayout(S[(8, 4, 4, 8, 8):(4, 1@warpid, 8@laneid, 1@laneid, 1)]))\n    \
             Tx.cta.copy(R[:, :, :, :, :], A[:, :, :, :, :])\n    \
             Tx.cta.copy(B[:, :, :, :, :], R[:, :, :, :, :])\n"
        ),
    );
    let path = p.to_str().expect("utf-8");
    for cmd in ["check", "sim"] {
        let out = tirx(&[cmd, path]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(err.contains("noninj.py:10:74"), "at the layout argument: {err}");
        assert!(
            err.contains(
                "elements (0, 0, 0, 0, 4) and (1, 0, 0, 0, 0) both map to register 4 of thread (warpid 0, laneid 0)"
            ),
            "{err}"
        );
        assert!(
            err.contains("help: on `m`, iter 0 (extent 8, stride 4) and iter 4 (extent 8, stride 1) overlap"),
            "{err}"
        );
    }
}
