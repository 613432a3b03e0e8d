//! Fuzzing the front end with mutated examples (byte / line deletions, token
//! insertions, swaps) and token soup. Properties, for every input:
//! * `parse_kernel` returns (no panic, no hang);
//! * an error result has at least one error, every span lies inside the text,
//!   and rendering the diagnostics works;
//! * an accepted input prints to a script that parses back to the same HIR.
//!
//! * no input takes over 10 s (a watchdog fails the whole run, naming it).
//!
//! `fuzz_short` runs in `cargo test`; `fuzz_long` (ignored) is the long run:
//! `FUZZ_CASES=100000 cargo test -p tirx-script --release -- --ignored fuzz`
//! (docs/fuzzing.md lists the other fuzz targets: layouts, `.npy` headers, the CLI).

use proptest::prelude::*;
use proptest::sample::Index;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Inputs that parsed (and so were round-tripped), for the long run's report.
static ACCEPTED: AtomicUsize = AtomicUsize::new(0);

const TOKENS: &[&str] = &[
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
    "@",
    "*",
    "-",
    "//",
    "%",
    "T.",
    "Tx.",
    "Tx.warp.copy(",
    "A[0:32, 0:8]",
    "for i in range(4):\n",
    "if tid == 0:\n",
    "else:\n",
    "laneid",
    "S[",
    "TileLayout(",
    "ComposeLayout(3, 3, 3, ",
    "0",
    "1",
    "32",
    "-1",
    "99999999999999999999",
    "1e400",
    "\"",
    "'",
    "#",
    "\\",
    ";",
    "T.device_entry()",
    // Scalar parameters, run-time sizes and grids, assumptions.
    "n: T.int32, ",
    "(n, 128)",
    "T.cta_id([(n + 63) // 64])",
    "T.assume(n % 64 == 0)\n",
    "A[n - 1, 0]",
    "A[n : n + 8, 0:8]",
    "T.lane_id()",
    "T.thread_id([64])",
    "dispatch=",
    "\"float16\"",
    "slice(0, 8)",
    "tuple(",
    "**",
    "not ",
    " and ",
    "1@laneid",
    "{",
    "}",
    "{m: 0}",
    ".tile_to((64, 64), (8, 64))",
    ".group([8, 8])",
    ".slice((8, 8), [(0, 4), (0, 8)])",
    "mma_shared_layout(\"float16\", 3, (64, 1 << 20))",
    "tcgen05_atom_layout(\"16x256b\", (64, 64), \"float32\")",
    "R.local()",
    ".view(",
    "\t",
    "\u{e9}",
    "x = (x, x)\n",
    "range(10**6)",
    "T.grid(",
    "T.cast(",
    "T.if_then_else(",
    "bias=",
    "lambda",
    "*fs",
    "(1,) * 70000",
    "[d for d in shape]",
    "T.int64(3)",
    "T.float16(1.5)",
    "T.bool(True)",
    "T.min(tid, 3)",
    "T.max(",
    "T.sqrt(",
    "tid",
    "kk",
    " if tid > 1 else ",
    "~",
    "T.if_then_else(tid > 0, 1, 2)",
    "-T.int32(4)",
    "A[tid, 0]",
    "x = tid * 2\n",
    " < ",
    " == ",
    "T.serial(2, 6)",
    "T.unroll(",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "2.5e-3",
    "T.uint8(7)",
    "T.float64(0.1)",
    ".local(",
    "T.alloc_local((4,))\n",
    // Views, T.evaluate, forced-width copies with cache hints.
    ".sub[",
    "V = A.sub[0, 0:4]\n",
    "T.evaluate(",
    "dispatch=\"vec_128b\", cache=\"nc\", l1_evict=\"L1::no_allocate\", prefetch_size=\"L2::256B\"",
    "dispatch=\"vec_auto\"",
    // Resource limits (issue 18): huge values, deep nesting, many unknown names.
    "[[0] * 60000] * 60000",
    "[[0] * 60000 for i in range(60000)]",
    "x = [0] * 60000\ny = [len(x) for i in range(60000)]\n",
    "((((((((((((((((((((((((((((((((((((((((((((((((((",
    "))))))))))))))))))))))))))))))))))))))))))))))))))",
    "undefined_name",
    "tuple('abcdefghijklmnop' * 4096)",
];

#[derive(Clone, Debug)]
enum Mutation {
    Delete(Index, u8),
    Insert(Index, Index),
    Swap(Index, Index, u8),
    DupLine(Index),
    DeleteLine(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1u8..12).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        (any::<Index>(), any::<Index>(), 1u8..16).prop_map(|(a, b, n)| Mutation::Swap(a, b, n)),
        any::<Index>().prop_map(Mutation::DupLine),
        any::<Index>().prop_map(Mutation::DeleteLine),
    ]
}

fn examples() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    v.sort();
    v.iter().map(|p| std::fs::read_to_string(p).expect("readable")).collect()
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut b = text.as_bytes().to_vec();
    for m in muts {
        let n = b.len().max(1);
        match m {
            Mutation::Delete(a, len) => {
                let at = a.index(n).min(b.len());
                let end = (at + *len as usize).min(b.len());
                b.drain(at..end);
            }
            Mutation::Insert(a, t) => {
                let at = a.index(n + 1).min(b.len());
                let tok = TOKENS[t.index(TOKENS.len())].as_bytes();
                b.splice(at..at, tok.iter().copied());
            }
            Mutation::Swap(x, y, len) => {
                let len = *len as usize;
                if b.len() > 2 * len {
                    let (i, j) = (x.index(b.len() - len), y.index(b.len() - len));
                    let (lo, hi) = (i.min(j), i.max(j));
                    if hi >= lo + len {
                        for k in 0..len {
                            b.swap(lo + k, hi + k);
                        }
                    }
                }
            }
            Mutation::DupLine(l) | Mutation::DeleteLine(l) => {
                let s = String::from_utf8_lossy(&b).into_owned();
                let mut lines: Vec<&str> = s.split_inclusive('\n').collect();
                if !lines.is_empty() {
                    let i = l.index(lines.len());
                    if matches!(m, Mutation::DupLine(_)) {
                        lines.insert(i, lines[i]);
                    } else {
                        lines.remove(i);
                    }
                }
                b = lines.concat().into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// The input being checked and when it started, for the watchdog.
static CURRENT: Mutex<Option<(Instant, String)>> = Mutex::new(None);
const HANG: Duration = Duration::from_secs(10);

/// Starts (once) a thread that fails the whole run, naming the input, when one
/// input takes longer than [`HANG`]: a hang must be a failure, not a stuck test.
fn watchdog() {
    static START: std::sync::Once = std::sync::Once::new();
    START.call_once(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(500));
            if let Some((t, input)) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                if t.elapsed() > HANG {
                    eprintln!("fuzz: input took over {HANG:?} (a hang):\n{input}");
                    std::process::exit(3);
                }
            }
        });
    });
}

fn check(text: &str) -> Result<(), TestCaseError> {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), text.to_string()));
    match tirx_script::parse_kernel("fuzz.py", text) {
        Ok(k) => {
            ACCEPTED.fetch_add(1, Ordering::Relaxed);
            let printed = tirx_script::print_kernel(&k);
            match tirx_script::parse_kernel("printed.py", &printed) {
                Ok(k2) => {
                    prop_assert!(tirx_script::same_kernel(&k, &k2), "round trip differs:\n{text}\n---\n{printed}")
                }
                Err(d) => {
                    let r = tirx_ir::diag::render(&d, "printed.py", &printed, false);
                    prop_assert!(false, "printed form does not parse:\n{text}\n---\n{printed}\n{r}");
                }
            }
        }
        Err(diags) => {
            prop_assert!(diags.iter().any(|d| d.is_error()), "failed without an error");
            for d in &diags {
                for l in &d.labels {
                    prop_assert!(
                        l.span.lo <= l.span.hi && l.span.hi as usize <= text.len(),
                        "span out of the text: {d:?}"
                    );
                }
            }
            let _ = tirx_ir::diag::render(&diags, "fuzz.py", text, false);
        }
    }
    Ok(())
}

/// Three in four inputs are mutated examples; the rest are token soup
/// (a kernel header followed by random tokens).
fn input(corpus: Vec<String>) -> impl Strategy<Value = String> {
    let mutated = (any::<Index>(), prop::collection::vec(mutation(), 1..5))
        .prop_map(move |(pick, muts)| apply(&corpus[pick.index(corpus.len())], &muts));
    let soup = prop::collection::vec(any::<Index>(), 0..60).prop_map(|toks| {
        let mut s = String::from("from tvm.script import tirx as T\n@T.prim_func\ndef k(A_ptr: T.handle):\n    ");
        for t in toks {
            s.push_str(TOKENS[t.index(TOKENS.len())]);
            s.push(' ');
        }
        s
    });
    prop_oneof![3 => mutated, 1 => soup]
}

fn run(cases: u32) {
    watchdog();
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(text in input(examples()))| {
        check(&text)?;
    });
}

#[test]
fn fuzz_short() {
    run(2000);
}

#[test]
#[ignore = "long run: FUZZ_CASES=100000 cargo test -p tirx-script --release -- --ignored fuzz"]
fn fuzz_long() {
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let start = std::time::Instant::now();
    run(cases);
    let ok = ACCEPTED.load(Ordering::Relaxed);
    eprintln!("fuzz_long: {cases} inputs in {:.1?}; {ok} accepted and round-tripped", start.elapsed());
}

#[test]
fn pathological_inputs_are_rejected_quickly() {
    let deep = format!("x = {}1{}\n", "(".repeat(5000), ")".repeat(5000));
    let long_chain = format!("x = {}\n", vec!["1"; 20000].join(" + "));
    let doubling = "t = (1,)\n".to_string() + &"t = (t, t)\n".repeat(80);
    let nesting = "t = 1\n".to_string() + &"t = (t,)\n".repeat(5000);
    let strings = "s = 'ab'\n".to_string() + &"s = s + s\n".repeat(80);
    let blocks = {
        let mut s = String::from("from tvm.script import tirx as T\n@T.prim_func\ndef k():\n");
        for d in 1..400 {
            s.push_str(&"    ".repeat(d));
            s.push_str("if 1 < 2:\n");
        }
        s
    };
    for text in [deep, long_chain, doubling, nesting, strings, blocks, "\u{0}\u{ffff}".repeat(1000)] {
        let t = std::time::Instant::now();
        let r = tirx_script::parse_kernel("p.py", &text);
        assert!(r.is_err());
        assert!(t.elapsed().as_secs() < 5, "took {:?}", t.elapsed());
    }
}
