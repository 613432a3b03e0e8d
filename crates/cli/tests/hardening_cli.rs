//! Issue 18 (hardening), run on the built binary: resource limits (items 3),
//! output errors (4), duplicate `--arg`/`--out` (5), and the layout table panic.
//! Each test is a reproducer from the issue; each used to crash, hang, blow up
//! or be silently accepted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    took: Duration,
}

/// Runs `tirx args` with `stdout`/`stderr` as given (captured when `None`);
/// kills it and fails the test when it runs over `limit`.
fn run_with(args: &[&str], stdout: Option<Stdio>, stderr: Option<Stdio>, limit: Duration) -> Run {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tirx"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout.unwrap_or_else(Stdio::piped))
        .stderr(stderr.unwrap_or_else(Stdio::piped))
        .spawn()
        .expect("tirx runs");
    // Drain the pipes on threads so that a large output cannot block the child.
    let out = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = vec![];
            s.read_to_end(&mut v).ok();
            v
        })
    });
    let err = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = vec![];
            s.read_to_end(&mut v).ok();
            v
        })
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("`tirx {}` ran over {limit:?} (killed)", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t.elapsed();
    let stdout = out.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err.map(|h| h.join().unwrap_or_default()).unwrap_or_default()).into_owned();
    Run { code: status.code(), stdout, stderr, took }
}

fn run(args: &[&str]) -> Run {
    run_with(args, None, None, Duration::from_secs(60))
}

fn temp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirx-hardening-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write temp file");
    p
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

// ---------------------------------------------------------------- item 3: limits

#[test]
fn a_huge_constant_is_an_error_at_the_expression_not_an_abort() {
    let p = temp("huge_list.py", b"x = [[0] * 60000] * 60000\n");
    let r = run(&["check", s(&p)]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("error: value too large"), "{}", r.stderr);
    assert!(r.stderr.contains("huge_list.py:1:5"), "{}", r.stderr);
    assert!(r.stderr.contains("x = [[0] * 60000] * 60000") && r.stderr.contains("^^^^"), "{}", r.stderr);
    assert!(r.stderr.contains("help: keep compile-time values under 65536 items"), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(10), "took {:?}", r.took);
}

#[test]
fn special_files_are_refused_without_reading() {
    let r = run_with(&["check", "/dev/zero"], None, None, Duration::from_secs(20));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("`/dev/zero`") && r.stderr.contains("not a regular file"), "{}", r.stderr);
}

/// `--arg A=/dev/zero` would read without end: a `.npy` must be a regular file no
/// larger than its buffer's data plus a header.
#[test]
fn special_npy_files_are_refused_without_reading() {
    let p = temp("k.py", b"from tvm.script import tirx as T\n\n@T.prim_func\ndef k(A_ptr: T.handle):\n    A = T.match_buffer(A_ptr, (32,), \"float32\")\n    T.device_entry(); T.cta_id([1]); tid = T.thread_id([32])\n    A[tid] = A[tid] + 1.0\n");
    let r = run_with(&["sim", s(&p), "--arg", "A=/dev/zero"], None, None, Duration::from_secs(20));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("`/dev/zero`") && r.stderr.contains("not a regular file"), "{}", r.stderr);
    let big = temp("big.npy", &vec![0u8; 1 << 20]);
    let r = run(&["sim", s(&p), "--arg", &format!("A={}", s(&big))]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("is larger than"), "{}", r.stderr);
}

#[test]
fn scripts_over_the_size_cap_are_refused() {
    let big = vec![b'#'; (4 << 20) + 1];
    let p = temp("big.py", &big);
    let r = run(&["check", s(&p)]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("larger than 4 MiB"), "{}", r.stderr);
}

/// 10,000 nested parentheses: 17 s and 593 MB of diagnostics before; now one error.
#[test]
fn deep_nesting_is_one_error_not_one_per_bracket() {
    let src = format!("x = {}1{}\n", "(".repeat(10_000), ")".repeat(10_000));
    let p = temp("deep.py", src.as_bytes());
    let r = run(&["check", s(&p)]);
    assert_eq!(r.code, Some(1));
    assert_eq!(r.stderr.matches("brackets nested too deeply").count(), 1, "{}", &r.stderr[..r.stderr.len().min(2000)]);
    assert!(r.stderr.len() < 200_000, "{} bytes of diagnostics", r.stderr.len());
    assert!(r.took < Duration::from_secs(10), "took {:?}", r.took);
}

/// 4,000 lines `xN = undefined_N`: 10.5 s in "did you mean" before; and 4,000
/// rendered errors. Now the first 50 are shown, then a count.
#[test]
fn many_errors_are_capped_and_suggestions_bounded() {
    let src: String = (0..4000).map(|i| format!("x{i} = undefined_{i}\n")).collect();
    let p = temp("typos.py", src.as_bytes());
    let r = run(&["check", s(&p)]);
    assert_eq!(r.code, Some(1));
    assert_eq!(r.stderr.matches("error: unknown name").count(), 50, "{}", r.stderr);
    assert!(r.stderr.contains("error: and 951 more errors (not shown"), "{}", r.stderr);
    assert!(r.stderr.contains("typos.py` has at least 1000 errors (checking stopped there)"), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(5), "took {:?}", r.took);
}

/// A one-line file of 4 MiB of `$`: 4 million diagnostics, each rendered with
/// the whole line, before. Now the lexer stops after 1,000 and the 50 shown
/// leave out a line that long.
#[test]
fn a_huge_line_of_errors_is_quick_and_short() {
    let p = temp("dollars.py", &vec![b'$'; 4 << 20]);
    let r = run(&["check", s(&p)]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("dollars.py:1:1 (the line is 4194304 bytes long: not shown)"), "{}", &r.stderr[..2000]);
    assert!(
        r.stderr.contains("dollars.py` has at least 1000 errors (checking stopped there)"),
        "{}",
        &r.stderr[..2000]
    );
    assert!(r.stderr.len() < 100_000, "{} bytes of diagnostics", r.stderr.len());
    assert!(r.took < Duration::from_secs(10), "took {:?}", r.took);
}

/// A 128-byte `.npy` header with 24 nested sequences hung `sim` (npyz's parser
/// is exponential in the nesting of `[[[...]]]`).
#[test]
fn a_deeply_nested_npy_header_is_refused_at_once() {
    let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {}{}}}", "[".repeat(24), "]".repeat(24));
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    assert_eq!(bytes.len(), 128);
    let p = temp("deep.npy", &bytes);
    let spec = format!("A={}", s(&p));
    let r = run_with(&["sim", s(&example("copy_reg.py")), "--arg", &spec], None, None, Duration::from_secs(30));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("nested more than 8 levels deep"), "{}", r.stderr);
}

/// `S[1] + R[10000:1@laneid] --table` panicked ("Formatting argument out of range").
#[test]
fn a_table_cell_with_many_replicas_lists_a_few_and_counts_the_rest() {
    let r = run(&["layout", "S[1] + R[10000:1@laneid]", "--table"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("T0:0|T1:0|T2:0|T3:0|+9996"), "{text}");
    assert!(text.contains("note: elements have up to 10000 replicas; cells list the first 4"), "{text}");
}

/// `S[16384] + R[4096:1@laneid] --svg`: 35 s, 1.46 GB and a 745 MB file before.
#[test]
fn a_large_svg_stays_small_and_fast() {
    let dir = std::env::temp_dir().join(format!("tirx-hardening-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let svg = dir.join("t.svg");
    let r = run_with(&["layout", "S[16384] + R[4096:1@laneid]", "--svg", s(&svg)], None, None, Duration::from_secs(60));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let size = std::fs::metadata(&svg).expect("svg written").len();
    assert!(size < 16 << 20, "{size} bytes");
    assert!(r.stderr.contains("note: elements have up to 4096 replicas"), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(20), "took {:?}", r.took);
}

// ---------------------------------------------------------------- item 4: output errors

/// `tirx layout 'S[(128,128)]' --table | head -1` panicked (exit 2); now it stops quietly.
#[test]
fn a_closed_stdout_pipe_ends_quietly_with_exit_0() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tirx"))
        .args(["layout", "S[(128,128)]", "--shape", "128,128", "--table"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tirx runs");
    // The reader goes away before reading anything: every write gets EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn dev_full() -> Stdio {
    Stdio::from(std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full"))
}

/// `tirx print F >/dev/full` exited 2 (panic); now exit 1 with a message.
#[test]
fn a_full_stdout_is_exit_1_with_a_message() {
    let ex = example("copy_reg.py");
    let r = run_with(&["print", s(&ex)], Some(dev_full()), None, Duration::from_secs(60));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("error: cannot write to stdout"), "{}", r.stderr);
    assert!(!r.stderr.contains("internal error"), "{}", r.stderr);
    let r = run_with(&["layout", "S[(4,2):(1@laneid,1)]", "--table"], Some(dev_full()), None, Duration::from_secs(60));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
}

/// `tirx check BAD 2>/dev/full` aborted; now exit 1 (no one can be told more).
/// A command that succeeds but cannot write its warnings is exit 1 too.
#[test]
fn a_full_stderr_is_exit_1_not_an_abort() {
    let bad = temp("bad_for_stderr.py", b"x = (\n");
    let r = run_with(&["check", s(&bad)], None, Some(dev_full()), Duration::from_secs(60));
    assert_eq!(r.code, Some(1));
    let r = run_with(&["layout", "S[8:1@laneid"], None, Some(dev_full()), Duration::from_secs(60));
    assert_eq!(r.code, Some(1));
    // Success with a note on stderr that could not be written.
    let svg = temp("note.svg", b"");
    let r = run_with(
        &["layout", "S[1] + R[10:1@laneid]", "--svg", s(&svg)],
        None,
        Some(dev_full()),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(1));
    let ok = run_with(&["check", s(&example("copy_reg.py"))], None, Some(dev_full()), Duration::from_secs(60));
    assert_eq!(ok.code, Some(0), "nothing was written to stderr, so nothing failed");
}

// ---------------------------------------------------------------- item 5: duplicate names

#[test]
fn the_same_arg_or_out_twice_is_a_user_error_naming_both() {
    let ex = example("copy_reg.py");
    let dir = std::env::temp_dir().join(format!("tirx-hardening-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (a1, a2) = (dir.join("a1.npy"), dir.join("a2.npy"));
    // Two valid inputs for `A`: before, the second silently won.
    for p in [&a1, &a2] {
        let r = run(&["sim", s(&ex), "--out", &format!("B={}", s(p))]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }
    let (x, y) = (format!("A={}", s(&a1)), format!("A={}", s(&a2)));
    let r = run(&["sim", s(&ex), "--arg", &x, "--arg", &y]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("--arg `{x}` and --arg `{y}` both name parameter `A`")), "{}", r.stderr);
    let (o1, o2) = (format!("B={}", s(&dir.join("o1.npy"))), format!("B={}", s(&dir.join("o2.npy"))));
    let r = run(&["sim", s(&ex), "--out", &o1, "--out", &o2]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("--out `{o1}` and --out `{o2}` both name parameter `B`")), "{}", r.stderr);
    // `run` and `bench` use the same check (before they even open the GPU).
    for cmd in ["run", "bench"] {
        let r = run(&[cmd, s(&ex), "--arg", &x, "--arg", &y]);
        assert_eq!(r.code, Some(1), "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains("both name parameter `A`"), "{cmd}: {}", r.stderr);
    }
    // The same parameter as an input and an output is fine.
    let r = run(&["sim", s(&ex), "--arg", &x, "--out", &format!("A={}", s(&a2))]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}
