//! Black-box fuzzing of the `tirx` binary with mutated inputs of all three
//! kinds users hand it: kernel scripts (`check`, `print`, `lower`, `explain`),
//! layout expressions (`layout` with its views, `--table` included) and `.npy`
//! headers (`sim --arg`). Properties, for every run: exit 0 or 1 (never 2, a
//! signal or an abort), no "internal error" or panic message, and done within
//! 10 s (a run over that is killed and fails the test).
//!
//! The in-process fuzzers go deeper and faster (crates/script/tests/fuzz.rs,
//! crates/layout/tests/fuzz.rs, `npy_header::fuzz` in this crate); this one
//! checks the whole command: file reading, rendering, output.
//!
//! `fuzz_cli_short` runs in `cargo test`; the long run (`FUZZ_CASES` inputs in
//! all, `FUZZ_SEED` to vary them):
//! `FUZZ_CASES=3000 cargo test -p tirx-cli --release --test fuzz_cli -- --ignored`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const HANG: Duration = Duration::from_secs(10);

/// xorshift64*: deterministic, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const SCRIPT_TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    ":",
    ",",
    "\n",
    "    ",
    "=",
    ".",
    "*",
    "0",
    "1",
    "32",
    "-1",
    "99999999999999999999",
    "\"",
    "#",
    "T.",
    "Tx.warp.copy(",
    "A[0:32, 0:8]",
    "for i in range(4):\n",
    "if tid == 0:\n",
    "laneid",
    "S[",
    "TileLayout(",
    "R[4096:1@laneid]",
    "[[0] * 60000] * 60000",
    "((((((((((((((((((((((((((((((((",
    "undefined_name",
    "dispatch=",
    "\"float16\"",
    "T.alloc_local((4,))\n",
    "\u{e9}",
    "\t",
    "\\",
];

const LAYOUTS: &[&str] = &[
    "S[(32,8):(1@laneid,1)]",
    "S[(8,2,4,2):(4@laneid,1@warpid,1@laneid,1)] + R[2:4@warpid] + 5@warpid",
    "S[(128, 64):(64, 1)] + R[4:1@wid_in_wg] + 3",
    "ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))",
    "S[1] + R[10000:1@laneid]",
    "S[(16, 16):(1@TLane, 1@TCol)]",
    "TileLayout(S[8:1] + 1@laneid + 2@laneid - 1@warpid)",
    "S[(2,8,4,2):(2, 4@laneid, 1@laneid, 1)].tile_to([16,16],[16,8])",
    "mma_shared_layout(\"float16\", 3, (64, 256))",
    "tcgen05_atom_layout(\"16x256b\", (64, 64), \"float32\")",
    "TileLayout(S[(8, 8):(8, 1)]).group([4, 16])[0].slice((4, 16), [(0, 2), (0, 16)])",
];

const LAYOUT_TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    ":",
    ",",
    "@",
    "+",
    "-",
    "0",
    "1",
    "4096",
    "65536",
    "1099511627776",
    "laneid",
    "warpid",
    "tx",
    "m",
    "S[",
    "R[",
    "R[4096:1@laneid]",
    "TileLayout(",
    "ComposeLayout(3, 3, 3, ",
    "((((((((((((",
    "\"",
    "Axis.",
    ".tile_to(",
    ".group(",
    "[0]",
    "{m: 0}",
    "mma_shared_layout(",
    "(65536, 65536)",
];

const NPY_TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "'",
    " ",
    "0",
    "1",
    "-1",
    "L",
    "18446744073709551616",
    "True",
    "None",
    "[[[[[[[[[[[[[[[[[[[[[[[[",
    "]]]]]]]]]]]]]]]]]]]]]]]]",
    "((((((((((((",
    "'<f8'",
    "'|u1'",
    "(32, 8)",
    "(256,)",
];

/// `text` with 1 to 4 random edits: delete a run, insert a token, repeat a run, swap two runs.
fn mutate(rng: &mut Rng, text: &str, tokens: &[&str]) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let n = b.len();
        let at = rng.below(n + 1);
        match rng.below(5) {
            0 => {
                let end = (at + 1 + rng.below(10)).min(n);
                b.drain(at..end);
            }
            1 | 2 => {
                let t = rng.pick(tokens);
                b.splice(at..at, t.bytes());
            }
            3 => {
                let end = (at + 1 + rng.below(12)).min(n);
                let piece = b[at..end].to_vec();
                for _ in 0..1 + rng.below(30) {
                    b.splice(at..at, piece.iter().copied());
                }
            }
            _ => {
                let len = 1 + rng.below(8);
                if n > 2 * len {
                    let (i, j) = (rng.below(n - len), rng.below(n - len));
                    let (lo, hi) = (i.min(j), i.max(j));
                    if hi >= lo + len {
                        for k in 0..len {
                            b.swap(lo + k, hi + k);
                        }
                    }
                }
            }
        }
    }
    b
}

/// What one run did wrong, if anything.
fn verdict(args: &[String], dir: &Path) -> Option<String> {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tirx"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tirx runs");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut v = vec![];
        stderr.read_to_end(&mut v).ok();
        v
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t.elapsed() > HANG {
            child.kill().ok();
            child.wait().ok();
            return Some(format!("ran over {HANG:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let err = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    match status.code() {
        Some(0 | 1) if !err.contains("internal error") && !err.contains("panicked") => None,
        code => Some(format!("exit {code:?}:\n{}", &err[..err.len().min(4000)])),
    }
}

fn examples() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    v.sort();
    v.iter().map(|p| (p.display().to_string(), std::fs::read_to_string(p).expect("readable"))).collect()
}

/// A `.npy` file for `copy_reg.py`'s `A` (float32, (32, 8)) with a mutated header.
fn npy(rng: &mut Rng) -> Vec<u8> {
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (32, 8), }";
    let mut h = mutate(rng, dict, NPY_TOKENS);
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let len = if rng.below(20) == 0 { rng.next() as u16 } else { h.len().min(0xffff) as u16 };
    bytes.extend(len.to_le_bytes());
    bytes.extend(h);
    bytes.extend(std::iter::repeat_n(0x3fu8, 32 * 8 * 4));
    bytes
}

/// Runs `cases` inputs (a third of each kind) on `threads` threads; returns the failures.
fn fuzz(cases: usize, seed: u64, threads: usize) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("tirx-fuzz-cli-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let examples = examples();
    let copy_reg = examples.iter().find(|(p, _)| p.ends_with("copy_reg.py")).expect("copy_reg.py").0.clone();
    let rows =
        examples.iter().find(|(p, _)| p.ends_with("copy_rows_checked.py")).expect("copy_rows_checked.py").0.clone();
    let next = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(vec![]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cases {
                    break;
                }
                let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                let (args, input): (Vec<String>, Option<(PathBuf, Vec<u8>)>) = match i % 3 {
                    0 => {
                        let (_, text) = &examples[rng.below(examples.len())];
                        let file = dir.join(format!("s{i}.py"));
                        let cmd = ["check", "print", "lower", "explain"][rng.below(4)];
                        (
                            vec![cmd.into(), file.display().to_string()],
                            Some((file, mutate(&mut rng, text, SCRIPT_TOKENS))),
                        )
                    }
                    1 => {
                        let base = LAYOUTS[rng.below(LAYOUTS.len())];
                        let expr = String::from_utf8_lossy(&mutate(&mut rng, base, LAYOUT_TOKENS)).into_owned();
                        let mut args = vec!["layout".to_string(), expr];
                        let views: [&[&str]; 6] =
                            [&["--table"], &["--canonical"], &["--scope"], &["--apply", "0"], &["--slice", "0:2"], &[]];
                        args.extend(views[rng.below(views.len())].iter().map(|s| s.to_string()));
                        (args, None)
                    }
                    _ if rng.below(3) == 0 => {
                        // A scalar argument: a launch check, a grid or a size out of range, text that is no number.
                        let values = [
                            "-1",
                            "0",
                            "1",
                            "100",
                            "2147483647",
                            "-2147483648",
                            "99999999999999999999",
                            "1e3",
                            "0x40",
                            "",
                            "n",
                        ];
                        let v = match rng.below(2) {
                            0 => values[rng.below(values.len())].to_string(),
                            _ => (rng.below(400) as i64 - 100).to_string(),
                        };
                        let args = vec![
                            "sim".into(),
                            rows.clone(),
                            "--grid-limit".into(),
                            "2".into(),
                            "--arg".into(),
                            format!("n={v}"),
                        ];
                        (args, None)
                    }
                    _ => {
                        let file = dir.join(format!("a{i}.npy"));
                        let args =
                            vec!["sim".into(), copy_reg.clone(), "--arg".into(), format!("A={}", file.display())];
                        (args, Some((file, npy(&mut rng))))
                    }
                };
                if let Some((p, bytes)) = &input {
                    std::fs::write(p, bytes).expect("write input");
                }
                match verdict(&args, &dir) {
                    Some(why) => {
                        let kept = input.as_ref().map(|(p, _)| format!(" (input kept at {})", p.display()));
                        failures.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                            "#{i}: `tirx {}`{}: {why}",
                            args.join(" "),
                            kept.unwrap_or_default()
                        ));
                    }
                    None => {
                        if let Some((p, _)) = &input {
                            std::fs::remove_file(p).ok();
                        }
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap_or_default()
}

fn seed() -> u64 {
    std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_1234)
}

#[test]
fn fuzz_cli_short() {
    let failures = fuzz(60, seed(), 2);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
#[ignore = "long run: FUZZ_CASES=3000 cargo test -p tirx-cli --release --test fuzz_cli -- --ignored"]
fn fuzz_cli_long() {
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = Instant::now();
    let failures = fuzz(cases, seed(), threads);
    eprintln!(
        "fuzz_cli_long: {cases} runs of the binary (scripts, layouts, .npy headers; seed {}) in {:.1?}; {} failures",
        seed(),
        start.elapsed(),
        failures.len()
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
