//! copy_async → ldgsts (docs/tile-primitives.md §3.17) and the kernel's own
//! asynchronous instructions (§8): the reference's test_ldgsts matrix as
//! simulated round trips (global → shared by cp.async, committed, waited, then
//! shared → global), every scope, swizzled and symbolic shared sides, the
//! config (predicate, fill_mode, prefetch_size, direct), each decline by its
//! rule, and the simulator's report of every synchronisation mistake, naming
//! both sites.

mod common;
use common::*;
use tirx_ir::{DType, Span};
use tirx_lower::{CommonRule, CopyAsyncRule, CopyRule};
use tirx_sim::{SimError, SimErrorKind, SimOptions};

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout
from tvm.tirx.lang.pipeline import MBarrier
";

/// A global → shared (copy_async) → global (copy) round trip of `A[g_region]`.
struct AsyncTrip<'a> {
    scope: &'a str,
    threads: i64,
    dtype: &'a str,
    g_shape: Vec<i64>,
    g_region: Vec<(i64, i64)>,
    s_shape: Vec<i64>,
    s_layout: Option<&'a str>,
    config: &'a str,
}

impl AsyncTrip<'_> {
    fn script(&self) -> String {
        let tup = |v: &[i64]| format!("({},)", v.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "));
        let g_reg = self.g_region.iter().map(|(b, e)| format!("{b}:{}", b + e)).collect::<Vec<_>>().join(", ");
        let s_reg = self.s_shape.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ");
        let layout = self.s_layout.map(|l| format!(", layout={l}")).unwrap_or_default();
        let ns = if self.scope == "thread" { "Tx".to_string() } else { format!("Tx.{}", self.scope) };
        format!(
            "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {g}, \"{dt}\")
    B = T.match_buffer(B_ptr, {g}, \"{dt}\")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{t}])
    A_smem = T.alloc_buffer({s}, \"{dt}\", scope=\"shared\"{layout})
    {ns}.copy_async(A_smem[{s_reg}], A[{g_reg}], dispatch=\"ldgsts\"{cfg})
    T.ptx.cp.async_.commit_group()
    T.ptx.cp.async_.wait_group(0)
    T.cuda.cta_sync()
    {ns}.copy(B[{g_reg}], A_smem[{s_reg}])
",
            g = tup(&self.g_shape),
            s = tup(&self.s_shape),
            dt = self.dtype,
            t = self.threads,
            cfg = self.config,
        )
    }

    /// Lowers, simulates (A = a distinct pattern, B = 0) and checks B[region] == A[region].
    fn check(&self) -> tirx_lower::Lowered {
        let src = self.script();
        let l = lower(&src);
        let dt = DType::from_name(self.dtype).unwrap();
        let n: i64 = self.g_shape.iter().product();
        let a = pattern(dt, n as usize);
        let mut params = vec![a.clone(), vec![0u8; a.len()]];
        if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()) {
            panic!("{}\n{}\n{src}", render(&[e.to_diagnostic()], &src), l.lir);
        }
        let bytes = dt.bytes() as usize;
        for i in 0..n as usize {
            let mut rest = i as i64;
            let mut inside = true;
            for d in (0..self.g_shape.len()).rev() {
                let c = rest % self.g_shape[d];
                rest /= self.g_shape[d];
                inside &= (self.g_region[d].0..self.g_region[d].0 + self.g_region[d].1).contains(&c);
            }
            let want = if inside { &a[i * bytes..(i + 1) * bytes] } else { &[0u8; 8][..bytes] };
            assert_eq!(&params[1][i * bytes..(i + 1) * bytes], want, "B element {i}\n{}\n{src}", l.lir);
        }
        l
    }
}

fn trip<'a>(scope: &'a str, threads: i64, dtype: &'a str, shape: &[i64]) -> AsyncTrip<'a> {
    AsyncTrip {
        scope,
        threads,
        dtype,
        g_shape: shape.to_vec(),
        g_region: shape.iter().map(|&e| (0, e)).collect(),
        s_shape: shape.to_vec(),
        s_layout: None,
        config: "",
    }
}

fn chosen(l: &tirx_lower::Lowered) -> (&str, Option<u32>, Option<u64>) {
    let c = call(l, 0);
    (c.chosen.as_deref().unwrap_or("-"), c.vec, c.rounds)
}

/// test_ldgsts.py `test_copy_g2s_s2g_cta_vec_load`: 3 tasks × 6 dtypes on a 32-thread CTA.
#[test]
fn reference_g2s_s2g_tasks() {
    type Task = (Vec<i64>, Vec<(i64, i64)>, Vec<i64>);
    let tasks: Vec<Task> = vec![
        (vec![128, 32], vec![(0, 128), (0, 32)], vec![128, 32]),
        (vec![64, 64], vec![(32, 32), (0, 32)], vec![32, 32]),
        (vec![4, 32, 32], vec![(0, 1), (0, 32), (0, 32)], vec![32, 32]),
    ];
    for (g_shape, g_region, s_shape) in &tasks {
        for dt in ["int8", "float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "float32"] {
            let t = AsyncTrip {
                g_shape: g_shape.clone(),
                g_region: g_region.clone(),
                s_shape: s_shape.clone(),
                ..trip("cta", 32, dt, &[1])
            };
            let l = t.check();
            let bits = DType::from_name(dt).unwrap().bits();
            let n: i64 = g_region.iter().map(|r| r.1).product();
            let vec = 128 / bits;
            assert_eq!(chosen(&l), ("ldgsts", Some(vec), Some((n / (32 * vec as i64)) as u64)), "{dt} {g_region:?}");
            let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
            assert!(cuda.contains("cp.async.cg.shared.global [%0], [%1], 16;"), "{cuda}");
        }
    }
}

/// Every scope: thread, warp, warpgroup, cta, with the widest cp.async the partition allows.
#[test]
fn every_scope_and_width() {
    for (scope, t, shape, dt, vec, rounds) in [
        ("thread", 1, [4, 8], "float32", 4, 8),
        ("warp", 32, [32, 32], "float16", 8, 4),
        ("wg", 128, [128, 32], "bfloat16", 8, 4),
        ("cta", 256, [64, 64], "float32", 4, 4),
        // Rows of 6 floats: 8-byte cp.async (.ca).
        ("cta", 32, [32, 6], "float32", 2, 3),
        // Rows of 3 floats: 4-byte cp.async.
        ("warp", 32, [32, 3], "float32", 1, 3),
    ] {
        let l = trip(scope, t, dt, &shape).check();
        assert_eq!(chosen(&l), ("ldgsts", Some(vec), Some(rounds)), "{scope} {shape:?} {dt}\n{}", call(&l, 0).render());
    }
    let l = trip("cta", 32, "float32", &[32, 6]).check();
    assert!(l.lir.to_string().contains("cp.async.ca<8>"), "{}", l.lir);
}

/// A swizzled shared side (the walk of §3.6) and a region of a bigger tensor at a symbolic
/// begin, into stage `k % 3` of a ring.
#[test]
fn swizzled_and_symbolic() {
    let mut t = trip("cta", 128, "float16", &[64, 64]);
    t.s_layout = Some("ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))");
    let l = t.check();
    assert_eq!(chosen(&l), ("ldgsts", Some(8), Some(4)));
    let src = format!(
        "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 64, 96), \"float16\")
    B = T.match_buffer(B_ptr, (4, 64, 96), \"float16\")
    T.device_entry()
    bx = T.cta_id([4]); T.thread_id([64])
    S_ = T.alloc_buffer((3, 64, 32), \"float16\", scope=\"shared\", layout=ComposeLayout(3, 2, 3, TileLayout(S[(3, 64, 32)])))
    for k in range(3):
        Tx.cta.copy_async(S_[(k + 1) % 3, 0:64, 0:32], A[bx, 0:64, k * 32:k * 32 + 32])
        T.ptx.cp_async.commit_group()
        T.ptx.cp_async.wait_group(0)
        T.cuda.cta_sync()
        Tx.cta.copy(B[bx, 0:64, k * 32:k * 32 + 32], S_[(k + 1) % 3, 0:64, 0:32])
        T.cuda.cta_sync()
"
    );
    let l = lower(&src);
    assert_eq!(chosen(&l), ("ldgsts", Some(8), Some(4)), "{}", call(&l, 0).render());
    let a = pattern(DType::F16, 4 * 64 * 96);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).unwrap();
    assert_eq!(params[1], a);
}

/// `predicate=` skips the copy where false (the destination keeps its bytes);
/// with `fill_mode="zero"` it zero-fills there instead.
#[test]
fn predicate_and_zero_fill() {
    for fill in [false, true] {
        let cfg = if fill { ", fill_mode=\"zero\"" } else { "" };
        let src = format!(
            "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 16), \"uint8\")
    B = T.match_buffer(B_ptr, (32, 16), \"uint8\")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer((32, 16), \"uint8\", scope=\"shared\")
    for j in range(16):
        A_smem[tid, j] = T.uint8(7)
    Tx.copy_async(A_smem[tid, :], A[tid, :], dispatch=\"ldgsts\", predicate=tid < 16{cfg})
    T.ptx.cp_async.commit_group()
    T.ptx.cp_async.wait_group(0)
    Tx.copy(B[tid, :], A_smem[tid, :])
"
        );
        let l = lower(&src);
        let summary = &tried(call(&l, 0), "ldgsts").reason;
        assert!(summary.contains(if fill { "predicated (zero-fill)" } else { "predicated" }), "{summary}");
        let a = pattern(DType::U8, 512);
        let mut params = vec![a.clone(), vec![0u8; 512]];
        tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).unwrap();
        for (i, (&got, &x)) in params[1].iter().zip(&a).enumerate() {
            let want = if i / 16 < 16 {
                x
            } else if fill {
                0
            } else {
                7
            };
            assert_eq!(got, want, "element {i}, fill {fill}");
        }
    }
}

/// test_ldgsts.py `test_copy_ldgsts_predicate_zero_fill_codegen`: direct mode forwards the
/// predicate, zero-fill and prefetch into one `cp.async` with a source size, without
/// partition temporaries.
#[test]
fn reference_direct_predicate_zero_fill_codegen() {
    let src = format!(
        "{HEAD}
@T.prim_func
def copy_async(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 16), \"uint8\", layout=TileLayout(S[32, 16]))
    T.device_entry()
    tid = T.thread_id([32])
    A_smem = T.alloc_buffer((32, 16), \"uint8\", scope=\"shared\", layout=TileLayout(S[32, 16]))
    Tx.copy_async(A_smem[tid, :], A[tid, :], dispatch=\"ldgsts\", direct=True, prefetch_size=128, predicate=tid < 16, fill_mode=\"zero\")
    T.ptx.cp_async.commit_group()
    T.ptx.cp_async.wait_group(0)
"
    );
    let l = lower(&src);
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;"), "{cuda}");
    assert!(cuda.contains("tirx_cp_async_16_fill_l2_128(&A_smem[tid * 16], &A[tid * 16], pred ? 16 : 0);"), "{cuda}");
    assert!(!cuda.contains("for ("), "one cp.async, no loop:\n{cuda}");
    assert_eq!(chosen(&l), ("ldgsts", Some(16), Some(1)));
}

#[test]
fn prefetch_size_lands_in_the_instruction() {
    for n in [64, 128, 256] {
        let mut t = trip("warp", 32, "float32", &[32, 32]);
        let cfg = format!(", prefetch_size={n}");
        t.config = &cfg;
        let l = t.check();
        assert!(l.lir.to_string().contains(&format!("cp.async.cg.L2::{n}B<16>")), "{}", l.lir);
        let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
        assert!(cuda.contains(&format!("cp.async.cg.shared.global.L2::{n}B [%0], [%1], 16;")), "{cuda}");
    }
}

// ------------------------------------------------------------------ declines

fn declined(src: &str) -> (Rule, String) {
    let d = lower_errors(src);
    let k = parse(src);
    let (ex, _) = tirx_lower::explain_kernel(&k, &Default::default());
    let t = ex.iter().flat_map(|c| &c.tried).find(|t| t.variant == "ldgsts" && !t.accepted);
    let t = t.unwrap_or_else(|| panic!("ldgsts did not decline:\n{}", render(&d, src)));
    (t.rule.unwrap(), t.reason.clone())
}

fn one_call(decl: &str, call: &str) -> String {
    format!(
        "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 64), \"float16\")
    T.device_entry()
    T.cta_id([1]); lane = T.lane_id([32]); T.warp_id([4]); tid = T.thread_id([128])
    {decl}
    {call}
    T.ptx.cp_async.commit_group()
    T.ptx.cp_async.wait_group(0)
"
    )
}

#[test]
fn declines_name_their_rule() {
    let smem = "S_ = T.alloc_buffer((64, 64), \"float16\", scope=\"shared\")";
    let cases: [(&str, &str, Rule, &str); 8] = [
        (
            smem,
            "Tx.cta.copy_async(A[0:64, 0:64], S_[0:64, 0:64])",
            CommonRule::ScopeAllowed.into(),
            "allowed: global->shared",
        ),
        (smem, "Tx.cta.copy_async(S_[0:3, 0:64], A[0:3, 0:64])", CopyRule::DividesThreadCnt.into(), "not divisible"),
        (
            smem,
            "Tx.cta.copy_async(S_[0:64, 0:16], A[0:64, 1:17])",
            CopyAsyncRule::Alignment.into(),
            "cp.async moves 4, 8 or 16 bytes",
        ),
        (
            smem,
            "Tx.cta.copy_async(S_[0:8, 0:8], A[0:8, 0:8], direct=True)",
            CommonRule::ExecScope.into(),
            "thread scope only",
        ),
        (
            smem,
            "Tx.copy_async(S_[0:1, 0:16], A[0:1, 0:16], direct=True)",
            CopyAsyncRule::Partition.into(),
            "exactly one",
        ),
        (
            smem,
            "Tx.cta.copy_async(S_[0:64, 0:64], A[0:64, 0:64], fill_mode=\"zero\")",
            CommonRule::Config.into(),
            "no predicate",
        ),
        (smem, "Tx.copy_async(S_[0:1, 0:8], A[0:1, 0:8], predicate=1.5)", CommonRule::Operand.into(), "not float32"),
        (
            smem,
            "if lane < 16:\n        Tx.warp.copy_async(S_[0:32, 0:64], A[0:32, 0:64])",
            CommonRule::AllThreadsActive.into(),
            "laneid",
        ),
    ];
    for (decl, call, want, words) in cases {
        let src = one_call(decl, call);
        let (rule, reason) = declined(&src);
        assert_eq!(rule, want, "{call}: {reason}");
        assert!(reason.contains(words), "{call}: `{words}` not in `{reason}`");
    }
}

#[test]
fn older_targets_decline_by_arch() {
    let src = one_call(
        "S_ = T.alloc_buffer((64, 64), \"float16\", scope=\"shared\")",
        "Tx.cta.copy_async(S_[0:64, 0:64], A[0:64, 0:64])",
    );
    let k = parse(&src);
    let opts = tirx_lower::LowerOptions::for_arch(tirx_ir::Arch::SM_75);
    let (ex, _) = tirx_lower::explain_kernel(&k, &opts);
    let t = ex[0].tried.iter().find(|t| t.variant == "ldgsts").unwrap();
    assert_eq!(t.rule, Some(CommonRule::Arch.into()), "{t:?}");
    assert!(t.reason.contains("ldgsts needs sm_80; target is sm_75"), "{}", t.reason);
    // The kernel's own cp.async statements are errors at the statement on sm_75, never internal ones.
    let d = tirx_lower::lower_kernel(&k, &opts).unwrap_err();
    assert!(d.iter().all(|d| !d.internal), "{}", render(&d, &src));
    let text = render(&d, &src);
    assert!(text.contains("`cp.async.commit_group` needs sm_80; the target is sm_75"), "{text}");
}

#[test]
fn copy_config_keys_are_script_errors() {
    let src = one_call(
        "S_ = T.alloc_buffer((64, 64), \"float16\", scope=\"shared\")",
        "Tx.cta.copy_async(S_[0:64, 0:64], A[0:64, 0:64], cache=\"nc\")",
    );
    let d = tirx_script::parse_kernel("k.py", &src).unwrap_err();
    let text = render(&d, &src);
    assert!(text.contains("`cache` does not apply to `copy_async`"), "{text}");
    let src = one_call(
        "S_ = T.alloc_buffer((64, 64), \"float16\", scope=\"shared\")",
        "Tx.cta.copy_async(S_[0:64, 0:64], A[0:64, 0:64], fill_mode=\"one\")",
    );
    let text = render(&tirx_script::parse_kernel("k.py", &src).unwrap_err(), &src);
    assert!(text.contains("`fill_mode` expects \"zero\""), "{text}");
}

// ------------------------------------------------------------------ the simulator's reports

/// Lowers `src`, simulates with A = a pattern (other parameters zero) and returns the error.
fn sim_error(src: &str) -> (SimError, String) {
    let k = parse(src);
    let l = tirx_lower::lower_kernel(&k, &Default::default())
        .unwrap_or_else(|d| panic!("lowering failed:\n{}", render(&d, src)));
    let mut params: Vec<Vec<u8>> = l
        .lir
        .params
        .iter()
        .map(|p| {
            let b = l.lir.buf(*p);
            pattern(b.dtype, b.elems as usize)
        })
        .collect();
    let e = tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).expect_err("the simulator must object");
    let text = render(&[e.to_diagnostic()], src);
    (e, text)
}

/// The line (1-based) of `span` in `src`.
fn line_of(src: &str, span: Span) -> usize {
    src[..span.lo as usize].matches('\n').count() + 1
}

/// The error is at the line containing `at` and labels the line containing `other`.
fn names_both(e: &SimError, src: &str, at: &str, other: &str, text: &str) {
    let line = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert_eq!(line_of(src, e.span), line(at), "primary site:\n{text}");
    assert!(e.labels.iter().any(|(sp, _)| line_of(src, *sp) == line(other)), "no label at `{other}`:\n{text}");
}

fn producer_consumer(body: &str) -> String {
    format!(
        "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 32), \"float32\")
    B = T.match_buffer(B_ptr, (64, 32), \"float32\")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([64])
    S_ = T.alloc_buffer((64, 32), \"float32\", scope=\"shared\")
{body}"
    )
}

#[test]
fn reading_the_destination_before_the_wait() {
    let src = producer_consumer(
        "    Tx.cta.copy_async(S_[0:64, 0:32], A[0:64, 0:32])
    T.ptx.cp_async.commit_group()
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:64, 0:32], S_[0:64, 0:32])
    T.ptx.cp_async.wait_group(0)
",
    );
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(text.contains("has not completed"), "{text}");
    names_both(&e, &src, "Tx.cta.copy(B", "copy_async", &text);
}

#[test]
fn overwriting_the_source_in_flight() {
    let src = producer_consumer(
        "    Tx.cta.copy_async(S_[0:64, 0:32], A[0:64, 0:32])
    T.ptx.cp_async.commit_group()
    A[tid, 0] = T.float32(0)
    T.ptx.cp_async.wait_group(0)
",
    );
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(text.contains("writes it while") && text.contains("that reads it has not completed"), "{text}");
    names_both(&e, &src, "A[tid, 0] =", "copy_async", &text);
}

#[test]
fn a_missing_wait_group() {
    // Read by other threads after the barrier: a race on data still in flight, both sites named.
    let src = producer_consumer(
        "    Tx.cta.copy_async(S_[0:64, 0:32], A[0:64, 0:32])
    T.ptx.cp_async.commit_group()
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:64, 0:32], S_[0:64, 0:32])
",
    );
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    names_both(&e, &src, "Tx.cta.copy(B", "copy_async", &text);
    // Never read: the copies never land, reported at the copy.
    let src = producer_consumer(
        "    Tx.cta.copy_async(S_[0:64, 0:32], A[0:64, 0:32])
    T.ptx.cp_async.commit_group()
",
    );
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::AsyncCopy, "{text}");
    assert!(text.contains("not waited for (cp.async.wait_group)"), "{text}");
    assert!(src.lines().nth(line_of(&src, e.span) - 1).unwrap().contains("copy_async"), "{text}");
}

/// A two-stage ring: warp 0 loads stage `k % 2` with cp.async and arrives on `full[s]`;
/// warp 1 waits `full[s]`, copies the stage out and arrives on `empty[s]`; warp 0 waits
/// `empty[s]` before refilling a stage. With `early_release` (the mistake) the consumer
/// arrives on `empty[s]` before it has copied the stage out, so the producer may refill it
/// while it is still being read.
fn ring(early_release: bool) -> String {
    let (before, after) = if early_release {
        ("            empty.arrive(k % 2)\n", "")
    } else {
        ("", "            empty.arrive(k % 2)\n")
    };
    format!(
        "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32, 32), \"float32\")
    B = T.match_buffer(B_ptr, (4, 32, 32), \"float32\")
    T.device_entry()
    T.cta_id([1]); w = T.warp_id([2]); T.lane_id([32]); T.thread_id([64])
    pool = T.SMEMPool()
    S_ = pool.alloc((2, 32, 32), \"float32\", align=128)
    full = MBarrier(pool, 2)
    empty = MBarrier(pool, 2)
    pool.commit()
    full.init(32)
    empty.init(32)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    for k in range(4):
        if w == 0:
            if k >= 2:
                empty.wait(k % 2, (k // 2 - 1) % 2)
            Tx.warp.copy_async(S_[k % 2, 0:32, 0:32], A[k, 0:32, 0:32])
            T.ptx.cp_async.commit_group()
            T.ptx.cp_async.wait_group(0)
            full.arrive(k % 2)
        else:
            full.wait(k % 2, (k // 2) % 2)
{before}            Tx.warp.copy(B[k, 0:32, 0:32], S_[k % 2, 0:32, 0:32])
{after}"
    )
}

#[test]
fn an_mbarrier_ring_is_race_free() {
    let src = ring(false);
    let l = lower(&src);
    let a = pattern(DType::F32, 4096);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).unwrap();
    assert_eq!(params[1], a);
}

#[test]
fn reusing_a_stage_before_its_consumer_released_it() {
    let src = ring(true);
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    // The producer's refill of stage k % 2 races with the consumer's copy out of it.
    let lines: Vec<usize> =
        std::iter::once(e.span).chain(e.labels.iter().map(|l| l.0)).map(|s| line_of(&src, s)).collect();
    let line = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(lines.contains(&line("copy_async")), "{text}");
    assert!(lines.contains(&line("Tx.warp.copy(B")), "{text}");
}

/// A two-stage ring read by the first thread of each of two consumer warpgroups (as
/// gemm_hopper's wgmma reads are recorded): thread 0 fills stage `k % 2` and arrives on
/// `full[s]`; threads 128 and 256 wait, copy the stage out and arrive on `empty[s]` (count
/// 2); thread 0 waits `empty[s]` before refilling. The two readers are in different warps,
/// so the race shadow keeps them as "several readers", ordered for the refill because both
/// are warpgroup-first threads whose arrivals thread 0 acquired. With `one_release` (the
/// mistake) only warpgroup 1 arrives (count 1): warpgroup 2's read races with the refill.
fn leaders_ring(one_release: bool) -> String {
    let (count, release) = if one_release { (1, "if wg == 1:\n                ") } else { (2, "") };
    format!(
        "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32), \"float32\")
    B = T.match_buffer(B_ptr, (2, 4, 32), \"float32\")
    T.device_entry()
    T.cta_id([1]); wg = T.warpgroup_id([3]); tid = T.thread_id([384])
    pool = T.SMEMPool()
    S_ = pool.alloc((2, 32), \"float32\", align=128)
    full = MBarrier(pool, 2)
    empty = MBarrier(pool, 2)
    pool.commit()
    full.init(1)
    empty.init({count})
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    for k in range(4):
        if tid == 0:
            if k >= 2:
                empty.wait(k % 2, (k // 2 - 1) % 2)
            Tx.copy(S_[k % 2, 0:32], A[k, 0:32])
            full.arrive(k % 2)
        if wg >= 1 and tid % 128 == 0:
            full.wait(k % 2, (k // 2) % 2)
            Tx.copy(B[wg - 1, k, 0:32], S_[k % 2, 0:32])
            {release}empty.arrive(k % 2)
"
    )
}

#[test]
fn a_ring_read_by_two_warpgroup_leaders_is_race_free() {
    let src = leaders_ring(false);
    let l = lower(&src);
    let a = pattern(DType::F32, 128);
    let mut params = vec![a.clone(), vec![0u8; 2 * a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}\n{}", render(&[e.to_diagnostic()], &src), l.lir));
    assert_eq!(params[1], [a.clone(), a].concat());
}

#[test]
fn a_leader_that_does_not_release_its_stage_races_with_the_refill() {
    let src = leaders_ring(true);
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(text.contains("thread 256"), "{text}");
    names_both(&e, &src, "Tx.copy(S_", "Tx.copy(B", &text);
}

#[test]
fn a_never_completing_mbarrier_is_a_deadlock() {
    // 64 arrivals expected, only warp 0's 32 arrive.
    let src = producer_consumer(
        "    pool = T.SMEMPool()
    bar = MBarrier(pool, 1)
    bar.init(64)
    T.cuda.cta_sync()
    if tid < 32:
        bar.arrive(0)
    bar.wait(0, 0)
",
    );
    let (e, text) = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::Deadlock, "{text}");
    assert!(text.contains("32 of 64 arrivals") && text.contains("still missing"), "{text}");
    assert!(src.lines().nth(line_of(&src, e.span) - 1).unwrap().contains("bar.wait"), "{text}");
}

/// A TMA box whose shared start is not 16-byte aligned: the decline names the shared buffer.
#[test]
fn a_misaligned_tma_box_names_its_shared_buffer() {
    let src = format!(
        "{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), \"float16\")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([128])
    pool = T.SMEMPool()
    S_ = pool.alloc((64,), \"float16\")
    bar = MBarrier(pool, 1)
    pool.commit()
    Tx.copy_async(S_[4:12], A[0:8], mbar=bar.ptr_to([0]))
"
    );
    let (explain, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    let t = explain[0].tried.iter().find(|t| t.variant == "tma_explicit").expect("tma_explicit tried");
    assert_eq!(t.rule, Some(CopyAsyncRule::SharedPointer.into()), "{}", explain[0].render());
    assert!(t.reason.contains("a box starts at byte 8 of `S_`"), "{}", t.reason);
}
