//! Fuzzing the layout text parser and the operations `tirx layout` runs, with
//! mutated layout expressions (byte deletions, token insertions, swaps,
//! repeats) of a corpus of real ones. Properties, for every input:
//! * `parse_layout` returns (no panic, no hang: a watchdog fails the run when
//!   one input takes over 10 s); an error's offset lies inside the text;
//! * an accepted layout survives every operation `tirx layout` applies
//!   (size, scope, canonicalize, slice, apply, the first replicas of an
//!   element) without a panic, and its printed form parses back to itself.
//!
//! `fuzz_short` runs in `cargo test`; `fuzz_long` (ignored) is the long run:
//! `FUZZ_CASES=100000 cargo test -p tirx-layout --release --test fuzz -- --ignored`.

use proptest::prelude::*;
use proptest::sample::Index;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tirx_layout::{parse_layout, Fusion, Layout};

static ACCEPTED: AtomicUsize = AtomicUsize::new(0);

const CORPUS: &[&str] = &[
    "S[(32,8):(1@laneid,1)]",
    "S[(8,2,4,2):(4@laneid,1@warpid,1@laneid,1)] + R[2:4@warpid] + 5@warpid",
    "S[(32, 8)]",
    "S[8, 4]",
    "S[8:4]",
    "S[(4,):(\"laneid\",)]",
    "TileLayout(S[8:1] + 1@laneid + 2@laneid - 1@warpid)",
    "T.TileLayout(T.S[(4, 2):(1@Axis.laneid, 1)])",
    "TileLayout(R[32:1@laneid])",
    "ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))",
    "ComposeLayout(2, 1, 3, S[64:1], swizzle_inner=False)",
    "S[(128, 64):(64, 1)] + R[4:1@wid_in_wg] + 3",
    "S[(2, 64, 32):(1@wgid, 1@tid_in_wg, 1)]",
    "S[(4, 32, 2):(1@warpid, 1@laneid, 1)] + 64",
    "S[1] + R[10000:1@laneid]",
    "S[(16, 16):(1@TLane, 1@TCol)]",
    "S[(2, 4, 8):(1@cbx, 8@tx, 1)] + R[(2, 2):(1@cby, 2@m)]",
    "-3@tx",
    "S[()]",
    "S[64:1] - 5@warpid",
];

const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    ":",
    ",",
    "@",
    "+",
    "-",
    " ",
    "0",
    "1",
    "-1",
    "32",
    "4096",
    "65536",
    "1099511627776",
    "99999999999999999999",
    "laneid",
    "warpid",
    "tx",
    "m",
    "wgid",
    "Bank",
    "TLane",
    "P",
    "S[",
    "R[",
    "TileLayout(",
    "ComposeLayout(3, 3, 3, ",
    "swizzle_inner=",
    "True",
    "\"",
    "'",
    "Axis.",
    "T.",
    "((((((((((((((((",
    "]]]]]]]]",
    "1@laneid",
    "R[4096:1@laneid]",
    "+ 5@warpid",
    "\u{e9}",
    "\\",
    "=",
    ".",
    "*",
    "1e9",
];

#[derive(Clone, Debug)]
enum Mutation {
    Delete(Index, u8),
    Insert(Index, Index),
    Swap(Index, Index, u8),
    Repeat(Index, u8, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (any::<Index>(), 1u8..6).prop_map(|(a, n)| Mutation::Delete(a, n)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        1 => (any::<Index>(), any::<Index>(), 1u8..6).prop_map(|(a, b, n)| Mutation::Swap(a, b, n)),
        1 => (any::<Index>(), 1u8..12, 2u8..40).prop_map(|(a, n, k)| Mutation::Repeat(a, n, k)),
    ]
}

/// `text` with `muts` applied (on bytes; the result is made UTF-8 lossily).
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
            Mutation::Repeat(a, len, times) => {
                let at = a.index(n).min(b.len());
                let end = (at + *len as usize).min(b.len());
                let piece = b[at..end].to_vec();
                for _ in 1..*times {
                    b.splice(at..at, piece.iter().copied());
                }
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
                    eprintln!("fuzz: input took over {HANG:?} (a hang):\n{input:?}");
                    std::process::exit(3);
                }
            }
        });
    });
}

fn check(text: &str) -> Result<(), TestCaseError> {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), text.to_string()));
    let l = match parse_layout(text) {
        Ok(l) => l,
        Err(e) => {
            prop_assert!(e.offset <= text.len(), "offset {} out of {text:?}", e.offset);
            let _ = e.render(text);
            return Ok(());
        }
    };
    ACCEPTED.fetch_add(1, Ordering::Relaxed);
    let printed = l.to_string();
    match parse_layout(&printed) {
        Ok(again) => prop_assert_eq!(&again, &l, "{:?} printed as {:?}", text, printed),
        Err(e) => prop_assert!(false, "{text:?} printed as {printed:?}, which does not parse: {}", e.render(&printed)),
    }
    let _ = (l.scope(), l.span(None), l.has_thread_axis(), l.storage(), l.validate());
    for f in [Fusion::None, Fusion::Cuda] {
        let _ = l.canonicalize(f);
    }
    let Ok(size) = l.size(None) else { return Ok(()) };
    if !(1..=1 << 20).contains(&size) {
        return Ok(());
    }
    let shape = [size];
    let _ = l.check_admits(&shape);
    for x in [0, size / 2, size - 1] {
        let _ = l.apply(&[x], &shape);
        let first = l.apply_first(&[x], &shape, 4);
        if let Ok((set, count)) = &first {
            prop_assert!(set.len() as i64 == (*count).min(4), "{text:?}: {} of {count}", set.len());
        }
        let _ = l.slice(&shape, &[(x, (size - x).min(3))], Fusion::Cuda);
    }
    Ok(())
}

/// Mutated corpus entries, and now and then two of them joined by `+`.
fn input() -> impl Strategy<Value = String> {
    let one = || {
        (any::<Index>(), prop::collection::vec(mutation(), 0..5))
            .prop_map(|(pick, muts)| apply(CORPUS[pick.index(CORPUS.len())], &muts))
    };
    prop_oneof![6 => one(), 1 => (one(), one()).prop_map(|(a, b)| format!("{a} + {b}"))]
}

fn run(cases: u32) {
    watchdog();
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(text in input())| {
        check(&text)?;
    });
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

#[test]
fn fuzz_short() {
    run(2000);
}

#[test]
#[ignore = "long run: FUZZ_CASES=100000 cargo test -p tirx-layout --release --test fuzz -- --ignored"]
fn fuzz_long() {
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let start = Instant::now();
    run(cases);
    let ok = ACCEPTED.load(Ordering::Relaxed);
    eprintln!("fuzz_long (layouts): {cases} inputs in {:.1?}; {ok} parsed and exercised", start.elapsed());
}

/// The corpus itself parses (so mutations start from real expressions).
#[test]
fn corpus_parses() {
    for text in CORPUS {
        assert!(parse_layout(text).is_ok(), "{text}");
    }
    assert!(matches!(parse_layout(CORPUS[9]), Ok(Layout::Compose(_))));
}
