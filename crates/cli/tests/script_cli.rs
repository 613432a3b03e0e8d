//! `tirx check` / `tirx print` end to end: exit codes and what users see.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tirx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirx")).args(args).output().expect("tirx runs")
}

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    v.sort();
    v
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirx-script-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write temp file");
    p
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn check_accepts_every_example() {
    let files = examples();
    let args: Vec<&str> = files.iter().map(|p| p.to_str().expect("utf-8 path")).collect();
    let mut all = vec!["check"];
    all.extend(&args);
    let out = tirx(&all);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for f in &args {
        assert!(stdout.contains(&format!("ok: {f}")), "{stdout}");
    }
}

#[test]
fn bad_file_exits_1_with_file_line_col_and_help() {
    let src = "from tvm.script import tirx as T\n\
               from tvm.script.tirx import tile as Tx\n\
               @T.prim_func\n\
               def k(A_ptr: T.handle):\n    \
               A = T.match_buffer(A_ptr, (32, 8), \"float32\")\n    \
               T.device_entry(); T.lane_id([32]); tid = T.thread_id([32])\n    \
               A[tid, 0] = AA\n    \
               Tx.warp.copy(A[0:32, 0:8], A[0:16, 0:8])\n";
    let p = temp_file("bad.py", src.as_bytes());
    let out = tirx(&["check", p.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let name = p.display().to_string();
    assert!(err.contains(&format!("{name}:7:17")), "{err}");
    assert!(err.contains(&format!("{name}:8:32")), "{err}");
    assert!(err.contains("unknown name `AA`") && err.contains("help: did you mean `A`?"), "{err}");
    assert!(err.contains("has 2 errors"), "{err}");
    assert!(!text(&out.stdout).contains("ok:"));
}

#[test]
fn garbage_exits_1_not_2() {
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    for (name, bytes) in [
        ("binary.py", garbage.as_slice()),
        ("text.py", b"\x01\x02 def ((( :: @@ \"unterminated\n\tx = [1, 2\n" as &[u8]),
        ("empty.py", b""),
    ] {
        let p = temp_file(name, bytes);
        let out = tirx(&["check", p.to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).contains("internal error"), "{name}");
    }
}

#[test]
fn check_reports_each_file_and_fails_if_any_fails() {
    let good = examples().into_iter().next().expect("an example");
    let bad = temp_file("also_bad.py", b"x = (\n");
    let out = tirx(&["check", good.to_str().expect("utf-8"), bad.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("ok: "));
    assert!(text(&out.stderr).contains("unclosed `(`"));
}

#[test]
fn missing_file_is_a_user_error() {
    let out = tirx(&["check", "/nonexistent/k.py"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read"));
}

#[test]
fn print_output_is_a_script_that_checks_and_prints_the_same() {
    for f in examples() {
        let out = tirx(&["print", f.to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let printed = text(&out.stdout);
        let p = temp_file(
            &format!("printed_{}", f.file_name().and_then(|n| n.to_str()).unwrap_or("k.py")),
            printed.as_bytes(),
        );
        let again = tirx(&["print", p.to_str().expect("utf-8")]);
        assert_eq!(text(&again.stdout), printed, "{}", Path::new(&f).display());
    }
}
