//! Reductions (`Tx.<scope>.sum|max|min`, docs/tile-primitives.md §3.10–§3.14):
//! every variant × scope × op × dtype × accum, value-checked in the simulator
//! against a sequential reference that follows the documented summation order
//! (docs/numerics.md §9) bit for bit, and sums also against the exact f64 sum
//! within the documented bound. The reference's reduction tests
//! (test_reduction.py, ref-tests §2.10) are ported case by case: shared
//! (6 shapes, sub-scopes), thread-wise local (10 shapes), the view path on MMA
//! accumulators with and without `thread_reduce`, the shuffle pattern; plus
//! what the reference gets wrong (accum on the shuffle path, warpgroup
//! barrier ids) and the typed declines.

mod common;
use common::*;
use tirx_ir::op::ReduceOp;
use tirx_ir::DType;
use tirx_lower::Lowered;
use tirx_lower::{CommonRule, ReduceRule};
use tirx_sim::value::round_to;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, laneid, tid_in_wg, tx, wg_local_layout

@T.prim_func
";

const OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];
const FLOATS: [&str; 3] = ["float32", "float16", "bfloat16"];

/// The compute type (numerics §9): f32 for sums of 16-bit floats.
fn ct(op: ReduceOp, t: DType) -> DType {
    if op == ReduceOp::Sum && matches!(t, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        t
    }
}

/// One combine step in type `c`, rounded as the GPU rounds it.
fn comb(op: ReduceOp, c: DType, a: f64, b: f64) -> f64 {
    match op {
        ReduceOp::Sum if c.is_float() => round_to(c, a + b),
        ReduceOp::Sum => (a as i64).wrapping_add(b as i64) as f64,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
    }
}

/// A left fold from the first element.
fn fold(op: ReduceOp, c: DType, xs: &[f64]) -> f64 {
    xs[1..].iter().fold(xs[0], |a, &x| comb(op, c, a, x))
}

/// The identity a lane without elements starts from.
fn identity(op: ReduceOp) -> f64 {
    match op {
        ReduceOp::Sum => -0.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    }
}

/// The xor butterfly over `lanes` (indexed by lane id), masks widest first; returns lane `at`'s value.
fn butterfly(op: ReduceOp, c: DType, lanes: &mut [f64], masks: &[usize], at: usize) -> f64 {
    for &m in masks {
        let prev = lanes.to_vec();
        for (l, v) in lanes.iter_mut().enumerate() {
            if l ^ m < prev.len() {
                *v = comb(op, c, prev[l], prev[l ^ m]);
            }
        }
    }
    lanes[at]
}

/// Combines the old destination last (accum) and rounds once to the destination type.
fn finish(op: ReduceOp, t: DType, v: f64, old: Option<f64>) -> f64 {
    let c = ct(op, t);
    round_to(t, old.map_or(v, |o| comb(op, c, v, o)))
}

fn masks(width: usize) -> Vec<usize> {
    let mut m = vec![];
    let mut b = width / 2;
    while b >= 1 {
        m.push(b);
        b /= 2;
    }
    m
}

/// docs/numerics.md §9: a sum of `n` terms computed in f32 with at most `depth` roundings on
/// any path from a term to the result is within `depth·2^-24·Σ|x|` of the exact sum, plus half
/// an ulp of the destination type for the final rounding.
fn within_bound(got: f64, xs: &[f64], old: Option<f64>, depth: usize, t: DType, what: &str) {
    let exact: f64 = xs.iter().sum::<f64>() + old.unwrap_or(0.0);
    let mag: f64 = xs.iter().map(|x| x.abs()).sum::<f64>() + old.map_or(0.0, f64::abs);
    let ulp = |x: f64| match t {
        DType::F32 => 2f64.powi(-23) * x.abs().max(f64::MIN_POSITIVE),
        DType::F16 => 2f64.powi(-10) * x.abs().max(2f64.powi(-14)),
        _ => 2f64.powi(-7) * x.abs().max(2f64.powi(-126)),
    };
    let bound = depth as f64 * 2f64.powi(-24) * mag + ulp(exact) / 2.0 + ulp(got) / 2.0;
    assert!((got - exact).abs() <= bound, "{what}: {got} vs exact {exact}, bound {bound}");
}

fn py_tuple(v: &[i64]) -> String {
    format!("({},)", v.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "))
}

fn full(v: &[i64]) -> String {
    v.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ")
}

fn call_text(scope: &str, op: ReduceOp, dst: &str, src: &str, axes: &str, accum: bool, extra: &str) -> String {
    let f = if scope == "thread" { format!("Tx.{}", op.name()) } else { format!("Tx.{scope}.{}", op.name()) };
    let accum = if accum { ", accum=True" } else { "" };
    format!("{f}({dst}, {src}, axes={axes}{accum}{extra})")
}

fn chosen(l: &Lowered, op: ReduceOp) -> &tirx_lower::CallExplain {
    l.explain.iter().find(|c| c.op == op.name()).unwrap_or_else(|| panic!("no {} call", op.name()))
}

fn assert_chosen(l: &Lowered, op: ReduceOp, variant: &str) {
    let c = chosen(l, op);
    assert_eq!(c.chosen.as_deref(), Some(variant), "{}", c.render());
}

// ----------------------------------------------------------------------------- local_thread

/// `(src shape, axes)`: the reference's 10 thread-wise cases and negative / non-contiguous axes.
const THREAD_CASES: &[(&[i64], &[i64])] = &[
    (&[1], &[0]),
    (&[4], &[0]),
    (&[7], &[0]),
    (&[16], &[0]),
    (&[32], &[0]),
    (&[4, 8], &[0]),
    (&[4, 8], &[1]),
    (&[3, 4, 5], &[0, 2]),
    (&[2, 3, 4], &[-1]),
    (&[2, 3, 4], &[0]),
    (&[2, 3, 4], &[-1, -3]),
];

/// The kept extents and, per source element, the index of its destination element.
fn kept(shape: &[i64], axes: &[usize]) -> (Vec<i64>, Vec<usize>) {
    let keep: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let kept: Vec<i64> = keep.iter().map(|&d| shape[d]).collect();
    let n: i64 = shape.iter().product();
    let map = (0..n as usize)
        .map(|i| {
            let mut x = i;
            let mut c = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                c[d] = x % shape[d] as usize;
                x /= shape[d] as usize;
            }
            keep.iter().fold(0, |acc, &d| acc * shape[d] as usize + c[d])
        })
        .collect();
    (kept, map)
}

fn norm_axes(axes: &[i64], rank: usize) -> Vec<usize> {
    let mut v: Vec<usize> = axes.iter().map(|&a| if a < 0 { (a + rank as i64) as usize } else { a as usize }).collect();
    v.sort_unstable();
    v
}

fn thread_wise(shape: &[i64], axes: &[i64], op: ReduceOp, t: &str, accum: bool) {
    let ax = norm_axes(axes, shape.len());
    let (kept, map) = kept(shape, &ax);
    let kept = if kept.is_empty() { vec![1] } else { kept };
    let threads = 4usize;
    let axes_text = format!("({},)", axes.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "));
    let load_old =
        if accum { format!("Tx.copy(Y[{}], B[tid, {}])\n    ", full(&kept), full(&kept)) } else { String::new() };
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {a}, "{t}")
    B = T.match_buffer(B_ptr, {b}, "{t}")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([{threads}])
    X = T.alloc_local({xs}, "{t}")
    Y = T.alloc_local({ys}, "{t}")
    Tx.copy(X[{xf}], A[tid, {xf}])
    {load_old}{call}
    Tx.copy(B[tid, {yf}], Y[{yf}])
"#,
        a = py_tuple(&[&[threads as i64][..], shape].concat()),
        b = py_tuple(&[&[threads as i64][..], &kept].concat()),
        xs = py_tuple(shape),
        ys = py_tuple(&kept),
        xf = full(shape),
        yf = full(&kept),
        call = call_text(
            "thread",
            op,
            &format!("Y[{}]", full(&kept)),
            &format!("X[{}]", full(shape)),
            &axes_text,
            accum,
            ""
        ),
    );
    let d = dt(t);
    let (n, m) = (map.len(), kept.iter().product::<i64>() as usize);
    let a = values(d, threads * n, 1, -2.0, 2.0);
    let b0 = values(d, threads * m, 2, -2.0, 2.0);
    let (l, out) = run(&src, &[(d, a.clone()), (d, b0.clone())]);
    assert_chosen(&l, op, "local_thread");
    for th in 0..threads {
        for j in 0..m {
            let xs: Vec<f64> = (0..n).filter(|&i| map[i] == j).map(|i| round_to(ct(op, d), a[th * n + i])).collect();
            let old = accum.then(|| b0[th * m + j]);
            let want = finish(op, d, fold(op, ct(op, d), &xs), old);
            let got = out[1][th * m + j];
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{t} {} {shape:?} axes {axes:?} accum {accum}: thread {th} element {j}: got {got}, want {want}\n{src}",
                op.name()
            );
            if op == ReduceOp::Sum {
                within_bound(got, &xs, old, xs.len() + 1, d, "thread-wise sum");
            }
        }
    }
}

#[test]
fn local_thread_matrix() {
    for (shape, axes) in THREAD_CASES {
        for op in OPS {
            for accum in [false, true] {
                thread_wise(shape, axes, op, "float32", accum);
            }
        }
    }
    for t in ["float16", "bfloat16"] {
        for op in OPS {
            for accum in [false, true] {
                thread_wise(&[3, 4, 5], &[0, 2], op, t, accum);
                thread_wise(&[32], &[0], op, t, accum);
            }
        }
    }
}

/// test_reduction_local_optimized_3input_maxmin: on sm_90 these 1-D thread-wise max/min
/// reductions are the generic local ones (the 3-input variant needs sm_100).
#[test]
fn local_thread_lengths_of_the_3_input_cases() {
    for len in [8i64, 16, 64, 128, 256, 7, 10, 15, 100] {
        for op in [ReduceOp::Max, ReduceOp::Min] {
            for accum in [false, true] {
                thread_wise(&[len], &[0], op, "float32", accum);
            }
        }
    }
}

#[test]
fn local_thread_explains_its_order_and_code() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2, 3, 4), "float16")
    B = T.match_buffer(B_ptr, (3,), "float16")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    X = T.alloc_local((2, 3, 4), "float16")
    Y = T.alloc_local((3,), "float16")
    Tx.copy(X[0:2, 0:3, 0:4], A[0:2, 0:3, 0:4])
    Tx.sum(Y[0:3], X[0:2, 0:3, 0:4], axes=(0, 2))
    Tx.copy(B[0:3], Y[0:3])
"#
    );
    let l = lower(&src);
    let c = chosen(&l, ReduceOp::Sum);
    let t = tried(c, "local_thread");
    assert!(
        t.reason.contains("sequential: per thread 24 source elements into 3 destination registers, each a fold of 8 registers, in row-major order of the reduced coordinates, computed in float32"),
        "{}",
        t.reason
    );
    let text = l.lir.to_string();
    assert!(text.contains("acc[0] = acc[0] + float32(X[k * 4 + ((q / 4) * 12 + q % 4)])"), "{text}");
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("float acc[1];"), "{cuda}");
}

// ----------------------------------------------------------------------------- warp_shuffle

/// A shuffle-pattern case: the source layout over `shape` (lanes in the reduced dims),
/// the destination layout over the kept extents (replicated over those lanes), and
/// which lane holds each source element / how many lanes a group has.
struct Pattern {
    shape: &'static [i64],
    axes: &'static [i64],
    src_layout: &'static str,
    dst_layout: &'static str,
    /// Lane of source element `i` (row-major).
    lane: fn(usize) -> usize,
    /// The butterfly's lane masks.
    masks: &'static [usize],
    /// Destination registers per lane, the destination element in register `k`
    /// of lane `l`, and that index as script text (`lane`, `k` in scope).
    regs: usize,
    dst_elem: fn(usize, usize) -> usize,
    dst_text: &'static str,
}

const PATTERNS: &[Pattern] = &[
    // The reference's multi-element pattern: 4 independent column sums over 32 lanes.
    Pattern {
        shape: &[32, 4],
        axes: &[0],
        src_layout: "S[(32, 4):(1@laneid, 1)]",
        dst_layout: "S[4:1] + R[32:1@laneid]",
        lane: |i| i / 4,
        masks: &[16, 8, 4, 2, 1],
        regs: 4,
        dst_elem: |_, k| k,
        dst_text: "k",
    },
    // One element per lane.
    Pattern {
        shape: &[32],
        axes: &[0],
        src_layout: "S[32:1@laneid]",
        dst_layout: "S[1:1] + R[32:1@laneid]",
        lane: |i| i,
        masks: &[16, 8, 4, 2, 1],
        regs: 1,
        dst_elem: |_, _| 0,
        dst_text: "k",
    },
    // Groups of 8 lanes, 2 registers each: row r on lanes 8r..8r+7.
    Pattern {
        shape: &[4, 8, 2],
        axes: &[1, 2],
        src_layout: "S[(4, 8, 2):(8@laneid, 1@laneid, 1)]",
        dst_layout: "S[4:8@laneid] + R[8:1@laneid]",
        lane: |i| (i / 16) * 8 + (i / 2) % 8,
        masks: &[4, 2, 1],
        regs: 1,
        dst_elem: |l, _| l / 8,
        dst_text: "lane // 8",
    },
    // Reduced lanes are bits 0..2 (stride 1) while the kept dim sits on bits 3..4.
    Pattern {
        shape: &[8, 4, 3],
        axes: &[0],
        src_layout: "S[(8, 4, 3):(1@laneid, 8@laneid, 1)]",
        dst_layout: "S[(4, 3):(8@laneid, 1)] + R[8:1@laneid]",
        lane: |i| (i / 12) + 8 * ((i / 3) % 4),
        masks: &[4, 2, 1],
        regs: 3,
        dst_elem: |l, k| (l / 8) * 3 + k,
        dst_text: "(lane // 8) * 3 + k",
    },
];

fn shuffle_case(p: &Pattern, op: ReduceOp, t: &str, accum: bool) {
    let warps = 4usize;
    let ax = norm_axes(p.axes, p.shape.len());
    let (kept, map) = kept(p.shape, &ax);
    let kept = if kept.is_empty() { vec![1] } else { kept };
    let (n, m) = (map.len(), kept.iter().product::<i64>() as usize);
    let axes_text = format!("({},)", p.axes.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "));
    let regs = p.regs;
    let old = if accum {
        format!("for k in range({regs}):\n        Yl[k] = C[w, {}]\n    ", p.dst_text)
    } else {
        String::new()
    };
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, {a}, "{t}")
    B = T.match_buffer(B_ptr, ({warps}, 32, {regs}), "{t}")
    C = T.match_buffer(C_ptr, ({warps}, {m}), "{t}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{th}])
    w = T.warp_id([{warps}])
    lane = T.lane_id([32])
    X = T.alloc_buffer({xs}, "{t}", scope="local", layout=TileLayout({sl}))
    Y = T.alloc_buffer({ys}, "{t}", scope="local", layout=TileLayout({dl}))
    Tx.warp.copy(X[{xf}], A[w, {xf}])
    Yl = Y.local()
    {old}{call}
    for k in range({regs}):
        B[w, lane, k] = Yl[k]
"#,
        a = py_tuple(&[&[warps as i64][..], p.shape].concat()),
        th = warps * 32,
        xs = py_tuple(p.shape),
        ys = py_tuple(&kept),
        sl = p.src_layout,
        dl = p.dst_layout,
        xf = full(p.shape),
        call = call_text(
            "warp",
            op,
            &format!("Y[{}]", full(&kept)),
            &format!("X[{}]", full(p.shape)),
            &axes_text,
            accum,
            ""
        ),
    );
    let d = dt(t);
    let c = ct(op, d);
    let a = values(d, warps * n, 3, -2.0, 2.0);
    let c0 = values(d, warps * m, 4, -2.0, 2.0);
    let (l, out) = run(&src, &[(d, a.clone()), (d, vec![0.0; warps * 32 * regs]), (d, c0.clone())]);
    assert_chosen(&l, op, "warp_shuffle");
    let mut seen = 0;
    for w in 0..warps {
        for j in 0..m {
            // Per lane: its elements of destination element j, folded in row-major order.
            let mut lanes = vec![identity(op); 32];
            let mut has = [false; 32];
            let mut xs = vec![];
            for i in (0..n).filter(|&i| map[i] == j) {
                let x = round_to(c, a[w * n + i]);
                xs.push(x);
                let ln = (p.lane)(i);
                lanes[ln] = if has[ln] { comb(op, c, lanes[ln], x) } else { x };
                has[ln] = true;
            }
            let group = (0..32).filter(|&ln| has[ln]).collect::<Vec<_>>();
            let old = accum.then(|| c0[w * m + j]);
            for &ln in &group {
                let mut lv = lanes.clone();
                let want = finish(op, d, butterfly(op, c, &mut lv, p.masks, ln), old);
                let k = (0..regs).find(|&k| (p.dst_elem)(ln, k) == j).expect("the lane holds the element");
                seen += 1;
                let got = out[1][(w * 32 + ln) * regs + k];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{t} {} {:?} accum {accum}: warp {w} lane {ln} element {j}: got {got}, want {want}\n{src}",
                    op.name(),
                    p.shape
                );
                if op == ReduceOp::Sum {
                    within_bound(got, &xs, old, xs.len() / group.len() + p.masks.len() + 1, d, "warp sum");
                }
            }
        }
    }
    assert_eq!(seen, warps * 32 * regs, "every register of every lane checked");
}

#[test]
fn warp_shuffle_matrix() {
    for p in PATTERNS {
        for op in OPS {
            for t in FLOATS {
                for accum in [false, true] {
                    shuffle_case(p, op, t, accum);
                }
            }
        }
    }
}

#[test]
fn warp_shuffle_explains_masks_and_emits_xor_shuffles() {
    let p = &PATTERNS[2];
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 8, 2), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    X = T.alloc_buffer((4, 8, 2), "float32", scope="local", layout=TileLayout({}))
    Y = T.alloc_buffer((4,), "float32", scope="local", layout=TileLayout({}))
    Tx.warp.copy(X[0:4, 0:8, 0:2], A[0:4, 0:8, 0:2])
    Tx.warp.max(Y[0:4], X[0:4, 0:8, 0:2], axes=(1, 2), accum=True)
"#,
        p.src_layout, p.dst_layout
    );
    let l = lower(&src);
    let r = &tried(chosen(&l, ReduceOp::Max), "warp_shuffle").reason;
    assert!(
        r.contains("per thread 2 source elements into 1 destination register, each a fold of 2 registers; butterfly masks 4, 2, 1 (3 shuffles per thread)"),
        "{r}"
    );
    assert!(r.contains("accum: the old destination is combined last; no barrier"), "{r}");
    let text = l.lir.to_string();
    for m in [4, 2, 1] {
        assert!(text.contains(&format!("shfl.sync.bfly(acc[0], {m}; width=32, mask=0xffffffff)")), "{text}");
    }
}

// ----------------------------------------------------------------------------- local_view

/// The per-warp 16×128 mma accumulator: element (r, c) on lane 4·(r%8) + (c%8)/2,
/// register 32·(r/8) + 2·(c/8) + c%2.
const ACC: &str = "TileLayout(S[(2, 8, 16, 4, 2):(32, 4@laneid, 2, 1@laneid, 1)])";
/// Per-quad partials of its rows: (r, q) on lane 4·(r%8) + q, register r/8.
const RED: &str = "TileLayout(S[(2, 8, 4):(1, 4@laneid, 1@laneid)])";

/// test_reduction_local_view_complex: row reductions of per-warp accumulators
/// into per-quad values, with `thread_reduce` (or a second in-place call).
fn view_complex(warps: usize, op: ReduceOp, t: &str, shuffle: bool, accum: bool) {
    let rows = 16 * warps;
    let load_old = if accum { "Tx.warp.copy(Y[0:16, 0:4], B[w * 16 : w * 16 + 16, 0:4])\n    " } else { "" };
    let first = call_text(
        "warp",
        op,
        "Y[0:16, 0:4]",
        "X[0:16, 0:128]",
        "-1",
        accum,
        if shuffle { ", thread_reduce=True" } else { "" },
    );
    let second = if shuffle {
        String::new()
    } else {
        format!("\n    {}", call_text("warp", op, "Y[0:16, 0:4]", "Y[0:16, 0:4]", "-1", false, ", thread_reduce=True"))
    };
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({rows}, 128), "{t}")
    B = T.match_buffer(B_ptr, ({rows}, 4), "{t}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{th}])
    w = T.warp_id([{warps}])
    X = T.alloc_buffer((16, 128), "{t}", scope="local", layout={ACC})
    Y = T.alloc_buffer((16, 4), "{t}", scope="local", layout={RED})
    Tx.warp.copy(X[0:16, 0:128], A[w * 16 : w * 16 + 16, 0:128])
    {load_old}{first}{second}
    Tx.warp.copy(B[w * 16 : w * 16 + 16, 0:4], Y[0:16, 0:4])
"#,
        th = 32 * warps
    );
    let d = dt(t);
    let c = ct(op, d);
    let a = values(d, rows * 128, 5, -2.0, 2.0);
    let b0 = values(d, rows * 4, 6, -2.0, 2.0);
    let (l, out) = run(&src, &[(d, a.clone()), (d, if accum { b0.clone() } else { vec![0.0; rows * 4] })]);
    assert_chosen(&l, op, "local_view");
    for r in 0..rows {
        // Quad lane q folds columns 8i + 2q + j in order, then the butterfly (masks 2, 1).
        let mut quad: Vec<f64> = (0..4)
            .map(|q| {
                let xs: Vec<f64> = (0..16)
                    .flat_map(|i| (0..2).map(move |j| 8 * i + 2 * q + j))
                    .map(|col| round_to(c, a[r * 128 + col]))
                    .collect();
                fold(op, c, &xs)
            })
            .collect();
        if !shuffle {
            // The first call stores per-quad partials (rounded to the type); the second reduces them.
            quad = quad.iter().map(|&v| round_to(c, round_to(d, v))).collect();
        }
        let full_row: Vec<f64> = (0..128).map(|col| round_to(c, a[r * 128 + col])).collect();
        for q in 0..4 {
            let old = (accum && shuffle).then(|| b0[r * 4 + q]);
            let mut lanes = quad.clone();
            let want = finish(op, d, butterfly(op, c, &mut lanes, &[2, 1], q), old);
            let got = out[1][r * 4 + q];
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{t} {} warps {warps} shuffle {shuffle} accum {accum}: row {r} quad {q}: got {got}, want {want}",
                op.name()
            );
            if op == ReduceOp::Sum && shuffle {
                within_bound(got, &full_row, old, 32 + 2 + 1, d, "row sum");
            }
        }
    }
}

#[test]
fn local_view_mma_accumulators() {
    // The reference's (groups, warps) = (1, 1), (1, 4), (2, 8): 1, 4 and 8 warps.
    for warps in [1, 4, 8] {
        for op in OPS {
            for t in FLOATS {
                view_complex(warps, op, t, true, false);
                view_complex(warps, op, t, true, true);
                view_complex(warps, op, t, false, false);
            }
        }
    }
}

/// Without `thread_reduce`, each lane keeps its own partial; `accum` still applies.
#[test]
fn local_view_partials_and_accum_without_shuffle() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 128), "float32")
    B = T.match_buffer(B_ptr, (16, 4), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    X = T.alloc_buffer((16, 128), "float32", scope="local", layout={ACC})
    Y = T.alloc_buffer((16, 4), "float32", scope="local", layout={RED})
    Tx.warp.copy(X[0:16, 0:128], A[0:16, 0:128])
    Tx.warp.copy(Y[0:16, 0:4], B[0:16, 0:4])
    Tx.warp.max(Y[0:16, 0:4], X[0:16, 0:128], accum=True)
    Tx.warp.copy(B[0:16, 0:4], Y[0:16, 0:4])
"#
    );
    let a = values(DType::F32, 16 * 128, 7, -2.0, 2.0);
    let b0: Vec<f64> = (0..64).map(|i| if i % 3 == 0 { 5.0 } else { -5.0 }).collect();
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, b0.clone())]);
    let reason = &tried(chosen(&l, ReduceOp::Max), "local_view").reason;
    assert!(reason.contains("per-thread partials (no thread_reduce: no shuffle)"), "{reason}");
    for r in 0..16 {
        for q in 0..4 {
            let part =
                (0..128).filter(|col| (col / 2) % 4 == q).map(|col| a[r * 128 + col]).fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(out[1][r * 4 + q], part.max(b0[r * 4 + q]), "row {r} quad {q}");
        }
    }
}

/// test_reduction_local_view_basic: lanes own rows, reductions over register dims
/// (with a kept unit dim and a sliced source).
#[test]
fn local_view_lane_rows() {
    for op in OPS {
        for (axes, dst, region, cols) in [
            ("(1,)", (1, 8), "0:4", 4),
            ("(1, 2)", (1, 1), "0:4", 4),
            ("(2,)", (4, 1), "0:4", 4),
            ("(1,)", (1, 8), "2:4", 2),
        ] {
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 4, 8), "float32")
    B = T.match_buffer(B_ptr, (32, {d0}, {d1}), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    X = T.alloc_buffer((32, 4, 8), "float32", scope="local", layout=TileLayout(S[(32, 4, 8):(1@laneid, 8, 1)]))
    Y = T.alloc_buffer((32, {d0}, {d1}), "float32", scope="local", layout=TileLayout(S[(32, {d0}, {d1}):(1@laneid, {d1}, 1)]))
    Tx.warp.copy(X[0:32, 0:4, 0:8], A[0:32, 0:4, 0:8])
    {call}
    Tx.warp.copy(B[0:32, 0:{d0}, 0:{d1}], Y[0:32, 0:{d0}, 0:{d1}])
"#,
                d0 = dst.0,
                d1 = dst.1,
                call = call_text(
                    "warp",
                    op,
                    &format!("Y[0:32, 0:{}, 0:{}]", dst.0, dst.1),
                    &format!("X[0:32, {region}, 0:8]"),
                    axes,
                    false,
                    ""
                ),
            );
            let a = values(DType::F32, 32 * 32, 8, -2.0, 2.0);
            let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 32 * dst.0 * dst.1])]);
            assert_chosen(&l, op, "local_view");
            let lo = if region == "2:4" { 2 } else { 0 };
            for lane in 0..32 {
                for i in 0..dst.0 {
                    for j in 0..dst.1 {
                        let xs: Vec<f64> = (lo..lo + cols)
                            .flat_map(|r| (0..8).map(move |c| (r, c)))
                            .filter(|&(r, c)| match axes {
                                "(1,)" => c == j,
                                "(2,)" => r == i,
                                _ => true,
                            })
                            .map(|(r, c)| a[lane * 32 + r * 8 + c])
                            .collect();
                        let want = fold(op, DType::F32, &xs);
                        assert_eq!(out[1][(lane * dst.0 + i) * dst.1 + j], want, "axes {axes} lane {lane} ({i}, {j})");
                    }
                }
            }
        }
    }
}

/// test_reduction_warpgroup_wg_local_layout: each thread of two warpgroups reduces its own row.
#[test]
fn local_view_warpgroup_rows() {
    for op in OPS {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (256, 16), "float32")
    B = T.match_buffer(B_ptr, (256, 1), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([256])
    g = T.warpgroup_id([2])
    X = T.alloc_buffer((128, 16), "float32", scope="local", layout=wg_local_layout(16))
    Y = T.alloc_buffer((128, 1), "float32", scope="local", layout=wg_local_layout(1))
    Tx.wg.copy(X[0:128, 0:16], A[g * 128 : g * 128 + 128, 0:16])
    {}
    Tx.wg.copy(B[g * 128 : g * 128 + 128, 0:1], Y[0:128, 0:1])
"#,
            call_text("wg", op, "Y[0:128, 0:1]", "X[0:128, 0:16]", "[-1]", false, "")
        );
        let a = values(DType::F32, 256 * 16, 9, -2.0, 2.0);
        let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 256])]);
        assert_chosen(&l, op, "local_view");
        for r in 0..256 {
            assert_eq!(out[1][r], fold(op, DType::F32, &a[r * 16..r * 16 + 16]), "row {r}");
        }
    }
}

// ----------------------------------------------------------------------------- shared

/// The reference of the shared variant: groups of `g` lanes, lane `i` folding
/// elements i, i + g, … from the identity, then the butterfly (masks g/2 … 1).
fn shared_reference(op: ReduceOp, c: DType, xs: &[f64], g: usize) -> f64 {
    let mut lanes: Vec<f64> =
        (0..g).map(|i| xs.iter().skip(i).step_by(g).fold(identity(op), |a, &x| comb(op, c, a, x))).collect();
    butterfly(op, c, &mut lanes, &masks(g), 0)
}

fn group_size(len: usize, threads: usize) -> usize {
    let mut g = len.next_power_of_two().min(32);
    while g > 1 && !threads.is_multiple_of(g) {
        g /= 2;
    }
    g
}

/// One shared-memory reduction of `A[src region]` into `B[dst region]` by a
/// call of `scope` under `guard` (an `if` on scope ids, or none), `threads` per CTA.
struct SharedCase {
    src_shape: Vec<i64>,
    dst_shape: Vec<i64>,
    axes: Vec<i64>,
    src_begin: Vec<i64>,
    dst_begin: Vec<i64>,
    src_ext: Vec<i64>,
    dst_ext: Vec<i64>,
    scope: &'static str,
    guard: &'static str,
    threads: usize,
    decl: &'static str,
}

fn shared_case(k: &SharedCase, op: ReduceOp, t: &str, accum: bool) -> Lowered {
    let axes_text = format!("({},)", k.axes.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "));
    let red = call_text(
        k.scope,
        op,
        &format!("B_smem[{}]", region(&k.dst_begin, &k.dst_ext)),
        &format!("A_smem[{}]", region(&k.src_begin, &k.src_ext)),
        &axes_text,
        accum,
        "",
    );
    let body = if k.guard.is_empty() { format!("    {red}") } else { format!("    if {}:\n        {red}", k.guard) };
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {sa}, "{t}")
    B = T.match_buffer(B_ptr, {sb}, "{t}")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([{th}])
    {decl}
    A_smem = T.alloc_buffer({sa}, "{t}", scope="shared")
    B_smem = T.alloc_buffer({sb}, "{t}", scope="shared")
    Tx.cta.copy(A_smem[{fa}], A[{fa}])
    Tx.cta.copy(B_smem[{fb}], B[{fb}])
    T.cuda.cta_sync()
{body}
    T.cuda.cta_sync()
    Tx.cta.copy(B[{fb}], B_smem[{fb}])
"#,
        sa = py_tuple(&k.src_shape),
        sb = py_tuple(&k.dst_shape),
        th = k.threads,
        decl = k.decl,
        fa = full(&k.src_shape),
        fb = full(&k.dst_shape),
    );
    let d = dt(t);
    let c = ct(op, d);
    let na: i64 = k.src_shape.iter().product();
    let nb: i64 = k.dst_shape.iter().product();
    let a = values(d, na as usize, 11, -2.0, 2.0);
    let b0 = values(d, nb as usize, 12, -2.0, 2.0);
    let (l, out) = run(&src, &[(d, a.clone()), (d, b0.clone())]);
    assert_chosen(&l, op, "shared");
    // Reference: region coordinates, kept dims row-major → the destination region row-major.
    let ax = norm_axes(&k.axes, k.src_ext.len());
    let (_, map) = kept(&k.src_ext, &ax);
    let n_src: usize = k.src_ext.iter().product::<i64>() as usize;
    let n_red: usize = ax.iter().map(|&d| k.src_ext[d] as usize).product();
    let threads = match k.scope {
        "thread" => 1,
        "warp" => 32,
        "wg" => 128,
        _ => k.threads,
    };
    // One thread per reduction when the innermost dim is kept and they cover the threads.
    let n_spatial = n_src / n_red;
    let inner = (0..k.src_ext.len()).rev().find(|&d| k.src_ext[d] != 1).unwrap();
    let g = if !ax.contains(&inner) && n_spatial >= threads { 1 } else { group_size(n_red, threads) };
    let flat = |shape: &[i64], begin: &[i64], ext: &[i64], mut i: usize| -> usize {
        let mut c = vec![0i64; ext.len()];
        for d in (0..ext.len()).rev() {
            c[d] = begin[d] + (i % ext[d] as usize) as i64;
            i /= ext[d] as usize;
        }
        c.iter().zip(shape).fold(0i64, |acc, (&x, &e)| acc * e + x) as usize
    };
    let n_dst: usize = k.dst_ext.iter().product::<i64>() as usize;
    let mut want_b = b0.clone();
    for j in 0..n_dst {
        let xs: Vec<f64> = (0..n_src)
            .filter(|&i| map[i] == j)
            .map(|i| round_to(c, a[flat(&k.src_shape, &k.src_begin, &k.src_ext, i)]))
            .collect();
        let at = flat(&k.dst_shape, &k.dst_begin, &k.dst_ext, j);
        let old = accum.then(|| b0[at]);
        let v = if k.scope == "thread" {
            xs.iter().fold(identity(op), |acc, &x| comb(op, c, acc, x))
        } else {
            shared_reference(op, c, &xs, g)
        };
        want_b[at] = finish(op, d, v, old);
        if op == ReduceOp::Sum {
            within_bound(want_b[at], &xs, old, xs.len().div_ceil(g) + masks(g).len() + 1, d, "shared sum");
        }
    }
    for (i, (got, want)) in out[1].iter().zip(&want_b).enumerate() {
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{t} {} {:?} axes {:?} accum {accum}: B[{i}]: got {got}, want {want}\n{src}",
            op.name(),
            k.src_ext,
            k.axes
        );
    }
    l
}

fn cta_case(src: &[i64], dst: &[i64], axes: &[i64], sb: &[i64], db: &[i64], se: &[i64], de: &[i64]) -> SharedCase {
    let threads = if src.iter().product::<i64>() > 1024 { 128 } else { 32 };
    SharedCase {
        src_shape: src.to_vec(),
        dst_shape: dst.to_vec(),
        axes: axes.to_vec(),
        src_begin: sb.to_vec(),
        dst_begin: db.to_vec(),
        src_ext: se.to_vec(),
        dst_ext: de.to_vec(),
        scope: "cta",
        guard: "",
        threads,
        decl: "",
    }
}

/// test_reduction_shared: 6 shape/axes cases × op × {f32, f16} (+ bf16) × accum, cta scope.
#[test]
fn shared_cta_matrix() {
    let cases = [
        cta_case(&[32, 32], &[32], &[-1], &[0, 0], &[0], &[32, 32], &[32]),
        cta_case(&[32, 32], &[32], &[0], &[0, 0], &[0], &[32, 32], &[32]),
        cta_case(&[8, 16, 2, 22], &[8, 16], &[-2, -1], &[0, 0, 0, 0], &[0, 0], &[8, 16, 2, 22], &[8, 16]),
        cta_case(&[4, 8, 6], &[4, 6], &[1], &[0, 0, 0], &[0, 0], &[4, 8, 6], &[4, 6]),
        cta_case(&[32, 7], &[32], &[-1], &[0, 0], &[0], &[32, 7], &[32]),
        cta_case(&[32, 32], &[32], &[-1], &[1, 1], &[2], &[5, 8], &[5]),
    ];
    for k in &cases {
        for op in OPS {
            for t in FLOATS {
                for accum in [false, true] {
                    shared_case(k, op, t, accum);
                }
            }
        }
    }
}

fn sub_scope(scope: &'static str) -> SharedCase {
    let (guard, decl) = match scope {
        "warp" => ("w == 5", "w = T.warp_id([8])"),
        "wg" => ("g == 1", "g = T.warpgroup_id([2])"),
        _ => ("tid == 65", ""),
    };
    SharedCase {
        src_shape: vec![4, 8],
        dst_shape: vec![4],
        axes: vec![-1],
        src_begin: vec![0, 0],
        dst_begin: vec![0],
        src_ext: vec![4, 8],
        dst_ext: vec![4],
        scope,
        guard,
        threads: 256,
        decl,
    }
}

/// test_reduction_shared_subscope: warp / warpgroup / thread calls under `if` on scope ids.
#[test]
fn shared_sub_scopes() {
    for scope in ["warp", "wg", "thread"] {
        for op in OPS {
            for accum in [false, true] {
                let l = shared_case(&sub_scope(scope), op, "float32", accum);
                let r = &tried(chosen(&l, op), "shared").reason;
                let barrier = match scope {
                    "warp" => "barrier: __syncwarp()",
                    "wg" => "barrier: bar.sync 1 + wg_id, 128",
                    _ => "barrier: none (one thread)",
                };
                assert!(r.contains(barrier), "{r}");
            }
        }
    }
}

/// Two warpgroups reduce different rows at once: each synchronises on its own
/// barrier (1 + wg_id), so the simulator sees no collision (the reference's
/// fixed barrier 8 would release 128 of the 256 arriving threads).
#[test]
fn shared_warpgroups_at_once_use_their_own_barriers() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2, 64, 32), "float32")
    B = T.match_buffer(B_ptr, (2, 64), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([256])
    g = T.warpgroup_id([2])
    A_smem = T.alloc_buffer((2, 64, 32), "float32", scope="shared")
    B_smem = T.alloc_buffer((2, 64), "float32", scope="shared")
    Tx.cta.copy(A_smem[0:2, 0:64, 0:32], A[0:2, 0:64, 0:32])
    T.cuda.cta_sync()
    Tx.wg.sum(B_smem[g, 0:64], A_smem[g, 0:64, 0:32])
    Tx.wg.max(B_smem[g, 0:64], A_smem[g, 0:64, 0:32], accum=True)
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:2, 0:64], B_smem[0:2, 0:64])
"#
    );
    let a = values(DType::F32, 2 * 64 * 32, 13, -2.0, 2.0);
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 128])]);
    let text = l.lir.to_string();
    assert_eq!(text.matches("bar.sync g + 1, 128").count(), 2, "{text}");
    for row in 0..128 {
        let xs: Vec<f64> = a[row * 32..row * 32 + 32].to_vec();
        let s = shared_reference(ReduceOp::Sum, DType::F32, &xs, 32);
        let m = shared_reference(ReduceOp::Max, DType::F32, &xs, 32);
        assert_eq!(out[1][row], s.max(m), "row {row}");
    }
}

/// Bank conflicts of the shared variant through the simulator's stats: lanes
/// read consecutive elements of a row, both when reducing rows (lanes share a row)
/// and columns (one thread per column: the reference's 32-lane groups would read
/// a column of the 32-float-wide tile, 32 ways; 16 columns for 32 threads still do).
#[test]
fn shared_bank_conflicts_are_measured() {
    for (axes, ways, cols) in [("-1", 1, 32), ("0", 1, 32), ("0", 32, 16)] {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 32), "float32")
    B = T.match_buffer(B_ptr, (32,), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    A_smem = T.alloc_buffer((32, 32), "float32", scope="shared")
    B_smem = T.alloc_buffer((32,), "float32", scope="shared")
    Tx.cta.copy(A_smem[0:32, 0:32], A[0:32, 0:32])
    T.cuda.cta_sync()
    Tx.cta.sum(B_smem[0:{cols}], A_smem[0:32, 0:{cols}], axes={axes})
    Tx.cta.copy(B[0:32], B_smem[0:32])
"#
        );
        let l = lower(&src);
        let mut params = vec![vec![0u8; 4096], vec![0u8; 128]];
        let opts = tirx_sim::SimOptions { stats: true, ..Default::default() };
        let rep = tirx_sim::simulate(&l.lir, &mut params, &opts).unwrap();
        let sum_span = l.explain[1].span();
        let loads: Vec<_> =
            rep.bank.iter().filter(|b| b.span == sum_span && b.buf == "A_smem" && b.kind == "load").collect();
        assert_eq!(loads.len(), 1, "{:?}", rep.bank);
        assert_eq!(loads[0].worst_ways, ways, "axes={axes}: {:?}", loads[0]);
    }
}

// ----------------------------------------------------------------------------- sub-scopes and declines

/// A register reduction under `if w == 2`: only warp 2 reduces, the others keep their input.
#[test]
fn warp_shuffle_under_a_warp_condition() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32), "float32")
    B = T.match_buffer(B_ptr, (4, 32), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    w = T.warp_id([4])
    lane = T.lane_id([32])
    X = T.alloc_buffer((32,), "float32", scope="local", layout=TileLayout(S[32:1@laneid]))
    Y = T.alloc_buffer((1,), "float32", scope="local", layout=TileLayout(S[1:1] + R[32:1@laneid]))
    Tx.warp.copy(X[0:32], A[w, 0:32])
    Yl = Y.local()
    Xl = X.local()
    Yl[0] = Xl[0]
    if w == 2:
        Tx.warp.min(Y[0:1], X[0:32])
    B[w, lane] = Yl[0]
"#
    );
    let a = values(DType::F32, 128, 14, -2.0, 2.0);
    let (_, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 128])]);
    let m = a[64..96].iter().copied().fold(f64::INFINITY, f64::min);
    for i in 0..128 {
        let want = if i / 32 == 2 { m } else { a[i] };
        assert_eq!(out[1][i], want, "element {i}");
    }
}

/// The dispatch record of every call (also when lowering fails).
fn explain(src: &str) -> Vec<tirx_lower::CallExplain> {
    tirx_lower::explain_kernel(&parse(src), &Default::default()).0
}

/// A warp-scope register reduction: `src` (32, 4) over laneid rows into `dst` (4,), with `layout` and `extra`.
fn warp_regs(dst_layout: &str, extra: &str, dtype: &str) -> String {
    format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 4), "{dtype}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    X = T.alloc_buffer((32, 4), "{dtype}", scope="local", layout=TileLayout(S[(32, 4):(1@laneid, 1)]))
    Y = T.alloc_buffer((4,), "{dtype}", scope="local", layout=TileLayout({dst_layout}))
    Tx.warp.copy(X[0:32, 0:4], A[0:32, 0:4])
    Tx.warp.sum(Y[0:4], X[0:32, 0:4], axes=0{extra})
"#
    )
}

#[test]
fn declines_are_typed() {
    // A destination not replicated over the lanes the butterfly combines.
    let c = &explain(&warp_regs("S[4:1]", "", "float32"))[1];
    assert_eq!(rule(c, "warp_shuffle"), ReduceRule::DstReplica, "{}", c.render());
    let r = &tried(c, "warp_shuffle").reason;
    assert!(
        r.contains("thread 1 holds none of `Y` but thread 0 holds registers [0, 1, 2, 3]")
            && r.contains("+ R[32:1@laneid]"),
        "{r}"
    );
    assert_eq!(c.chosen, None);
    // A destination replicated over 16 of the 32 lanes that hold the rows.
    let c = &explain(&warp_regs("S[4:1] + R[16:1@laneid]", "", "float32"))[1];
    assert_eq!(rule(c, "warp_shuffle"), ReduceRule::DstReplica, "{}", c.render());
    // thread_reduce=False cannot keep whole reductions in one thread.
    let c = &explain(&warp_regs("S[4:1] + R[32:1@laneid]", ", thread_reduce=False", "float32"))[1];
    assert_eq!(rule(c, "warp_shuffle"), CommonRule::Config, "{}", c.render());
    // An element type without reductions.
    let c = &explain(&warp_regs("S[4:1] + R[32:1@laneid]", "", "int8"))[1];
    assert_eq!(rule(c, "warp_shuffle"), CommonRule::Dtype, "{}", c.render());
    // thread_reduce=True at thread scope.
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8,), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    X = T.alloc_local((8,), "float32")
    Y = T.alloc_local((1,), "float32")
    Tx.copy(X[0:8], A[0:8])
    Tx.sum(Y[0:1], X[0:8], thread_reduce=True)
"#
    );
    let c = &explain(&src)[1];
    assert_eq!(rule(c, "local_thread"), CommonRule::Config, "{}", c.render());
}

#[test]
fn declines_of_the_warpgroup_and_cta_forms() {
    // A warpgroup reduction over 128 rows spread over the whole warpgroup: lanes of 4 warps.
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 4), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    X = T.alloc_buffer((128, 4), "float32", scope="local", layout=TileLayout(S[(128, 4):(1@tid_in_wg, 1)]))
    Y = T.alloc_buffer((4,), "float32", scope="local", layout=TileLayout(S[4:1] + R[128:1@tid_in_wg]))
    Tx.wg.copy(X[0:128, 0:4], A[0:128, 0:4])
    Tx.wg.sum(Y[0:4], X[0:128, 0:4], axes=0)
"#
    );
    let c = &explain(&src)[1];
    assert_eq!(rule(c, "warp_shuffle"), ReduceRule::ReduceLayout, "{}", c.render());
    assert!(tried(c, "warp_shuffle").reason.contains("spans threads of several warps"), "{}", c.render());
    // Per-thread values of the wrong extent: 2 per row where the rows are spread over 4 lanes.
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 128), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    X = T.alloc_buffer((16, 128), "float32", scope="local", layout={ACC})
    Y = T.alloc_buffer((16, 2), "float32", scope="local")
    Tx.warp.copy(X[0:16, 0:128], A[0:16, 0:128])
    Tx.warp.sum(Y[0:16, 0:2], X[0:16, 0:128], thread_reduce=True)
"#
    );
    let c = &explain(&src)[1];
    assert_eq!(rule(c, "local_view"), ReduceRule::ReduceLayout, "{}", c.render());
    assert!(
        tried(c, "local_view").reason.contains("thread or its register extent (dim 1: 4 threads × 32 registers)"),
        "{}",
        c.render()
    );
    // A shared reduction in a CTA of 48 threads would need two lane masks.
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 16), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([48])
    A_smem = T.alloc_buffer((4, 16), "float32", scope="shared")
    B_smem = T.alloc_buffer((4,), "float32", scope="shared")
    Tx.cta.copy(A_smem[0:4, 0:16], A[0:4, 0:16])
    T.cuda.cta_sync()
    Tx.cta.sum(B_smem[0:4], A_smem[0:4, 0:16])
"#
    );
    let c = &explain(&src)[1];
    assert_eq!(rule(c, "shared"), ReduceRule::Partition, "{}", c.render());
}

// ----------------------------------------------------------------------------- wider scopes

/// warp_shuffle at warpgroup and cta scope: each warp's lanes hold one row (2 registers
/// each), the rows reduce within their warp and every lane of the warp gets its row's value.
#[test]
fn warp_shuffle_at_warpgroup_and_cta_scope() {
    for (scope, axis, threads, warps) in [("wg", "tid_in_wg", 128usize, 4usize), ("cta", "tx", 64, 2)] {
        for t in ["float32", "float16"] {
            for op in OPS {
                for accum in [false, true] {
                    let src = format!(
                        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({warps}, 32, 2), "{t}")
    B = T.match_buffer(B_ptr, ({threads},), "{t}")
    C = T.match_buffer(C_ptr, ({warps},), "{t}")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([{threads}])
    w = T.warp_id([{warps}])
    X = T.alloc_buffer(({warps}, 32, 2), "{t}", scope="local", layout=TileLayout(S[({warps}, 32, 2):(32@{axis}, 1@{axis}, 1)]))
    Y = T.alloc_buffer(({warps},), "{t}", scope="local", layout=TileLayout(S[{warps}:32@{axis}] + R[32:1@{axis}]))
    Tx.{scope}.copy(X[0:{warps}, 0:32, 0:2], A[0:{warps}, 0:32, 0:2])
    Yl = Y.local()
    Yl[0] = C[w]
    {call}
    B[tid] = Yl[0]
"#,
                        call = call_text(
                            scope,
                            op,
                            &format!("Y[0:{warps}]"),
                            &format!("X[0:{warps}, 0:32, 0:2]"),
                            "(1, 2)",
                            accum,
                            ""
                        ),
                    );
                    let d = dt(t);
                    let c = ct(op, d);
                    let a = values(d, warps * 64, 15, -2.0, 2.0);
                    let c0 = values(d, warps, 16, -2.0, 2.0);
                    let (l, out) = run(&src, &[(d, a.clone()), (d, vec![0.0; threads]), (d, c0.clone())]);
                    assert_chosen(&l, op, "warp_shuffle");
                    for w in 0..warps {
                        let mut lanes: Vec<f64> = (0..32)
                            .map(|ln| {
                                fold(op, c, &[round_to(c, a[w * 64 + ln * 2]), round_to(c, a[w * 64 + ln * 2 + 1])])
                            })
                            .collect();
                        let want = finish(op, d, butterfly(op, c, &mut lanes, &masks(32), 0), accum.then(|| c0[w]));
                        for ln in 0..32 {
                            let got = out[1][w * 32 + ln];
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{scope} {t} {} accum {accum}: warp {w} lane {ln}",
                                op.name()
                            );
                        }
                    }
                }
            }
        }
    }
}

/// local_view at warpgroup scope with accum and 16-bit types: each thread's own row of 16.
#[test]
fn local_view_warpgroup_accum_16_bit() {
    for t in ["float16", "bfloat16"] {
        for op in OPS {
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 16), "{t}")
    B = T.match_buffer(B_ptr, (128, 1), "{t}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    X = T.alloc_buffer((128, 16), "{t}", scope="local", layout=wg_local_layout(16))
    Y = T.alloc_buffer((128, 1), "{t}", scope="local", layout=wg_local_layout(1))
    Tx.wg.copy(X[0:128, 0:16], A[0:128, 0:16])
    Tx.wg.copy(Y[0:128, 0:1], B[0:128, 0:1])
    {}
    Tx.wg.copy(B[0:128, 0:1], Y[0:128, 0:1])
"#,
                call_text("wg", op, "Y[0:128, 0:1]", "X[0:128, 0:16]", "-1", true, "")
            );
            let d = dt(t);
            let c = ct(op, d);
            let a = values(d, 128 * 16, 17, -2.0, 2.0);
            let b0 = values(d, 128, 18, -2.0, 2.0);
            let (l, out) = run(&src, &[(d, a.clone()), (d, b0.clone())]);
            assert_chosen(&l, op, "local_view");
            for r in 0..128 {
                let xs: Vec<f64> = a[r * 16..r * 16 + 16].iter().map(|&x| round_to(c, x)).collect();
                let want = finish(op, d, fold(op, c, &xs), Some(b0[r]));
                assert_eq!(out[1][r].to_bits(), want.to_bits(), "{t} {} row {r}", op.name());
            }
        }
    }
}

/// test_reduction_warp_shuffle_multi_warp_loop: thread → warp → thread scopes in a loop —
/// each warp sums one value per lane through 1-register views, lane 0 of each warp stores
/// its partial, warp 0 sums the partials. (The reference lets all 32 lanes store the same
/// partial to one shared element, a write-write race the simulator reports; here lane 0 stores.)
#[test]
fn warp_sums_in_a_loop_across_warps() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (3, 128), "float32")
    B = T.match_buffer(B_ptr, (3,), "float32")
    T.device_entry()
    T.cta_id([1])
    ty = T.warp_id([4])
    tx = T.lane_id([32])
    sum_smem = T.alloc_buffer((4,), "float32", scope="shared")
    partial = T.alloc_buffer((1,), "float32", scope="local")
    result = T.alloc_buffer((1,), "float32", scope="local")
    cross = T.alloc_buffer((1,), "float32", scope="local")
    cross_res = T.alloc_buffer((1,), "float32", scope="local")
    src_v = partial.view(32, layout=TileLayout(S[32:1@laneid]))
    dst_v = result.view(1, layout=TileLayout(S[1:1] + R[32:1@laneid]))
    cs = cross.view(32, layout=TileLayout(S[32:1@laneid]))
    cd = cross_res.view(1, layout=TileLayout(S[1:1] + R[32:1@laneid]))
    for it in range(3):
        partial[0] = A[it, ty * 32 + tx]
        Tx.warp.sum(dst_v[0:1], src_v[0:32])
        if tx == 0:
            sum_smem[ty] = result[0]
        T.cuda.cta_sync()
        if ty == 0:
            cross[0] = T.if_then_else(tx < 4, sum_smem[tx % 4], T.float32(0))
            Tx.warp.sum(cd[0:1], cs[0:32])
            if tx == 0:
                B[it] = cross_res[0]
        T.cuda.cta_sync()
"#
    );
    let a = values(DType::F32, 3 * 128, 19, -2.0, 2.0);
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 3])]);
    assert_chosen(&l, ReduceOp::Sum, "warp_shuffle");
    for it in 0..3 {
        let partials: Vec<f64> = (0..4)
            .map(|w| {
                let mut lanes: Vec<f64> = (0..32).map(|ln| a[it * 128 + w * 32 + ln]).collect();
                butterfly(ReduceOp::Sum, DType::F32, &mut lanes, &masks(32), 0)
            })
            .collect();
        let mut lanes: Vec<f64> = (0..32).map(|ln| if ln < 4 { partials[ln] } else { 0.0 }).collect();
        let want = butterfly(ReduceOp::Sum, DType::F32, &mut lanes, &masks(32), 0);
        assert_eq!(out[1][it], want, "iteration {it}");
        within_bound(want, &a[it * 128..it * 128 + 128], None, 10, DType::F32, "loop sum");
    }
}

/// test_reduction_local_view_basic, 2-D cases: each lane reduces its row of 64 registers
/// (or the slice 16:32 of it), with and without accum.
#[test]
fn local_view_lane_rows_2d() {
    for op in OPS {
        for (accum, lo, hi) in [(false, 0, 64), (true, 0, 64), (false, 16, 32)] {
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 64), "float32")
    B = T.match_buffer(B_ptr, (32, 1), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    X = T.alloc_buffer((32, 64), "float32", scope="local", layout=TileLayout(S[(32, 64):(1@laneid, 1)]))
    Y = T.alloc_buffer((32, 1), "float32", scope="local", layout=TileLayout(S[(32, 1):(1@laneid, 1)]))
    Tx.warp.copy(X[0:32, 0:64], A[0:32, 0:64])
    Tx.warp.copy(Y[0:32, 0:1], B[0:32, 0:1])
    {}
    Tx.warp.copy(B[0:32, 0:1], Y[0:32, 0:1])
"#,
                call_text("warp", op, "Y[0:32, 0:1]", &format!("X[0:32, {lo}:{hi}]"), "(-1,)", accum, "")
            );
            let a = values(DType::F32, 32 * 64, 20, -2.0, 2.0);
            let b0 = values(DType::F32, 32, 21, -2.0, 2.0);
            let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, b0.clone())]);
            assert_chosen(&l, op, "local_view");
            for lane in 0..32 {
                let xs = &a[lane * 64 + lo..lane * 64 + hi];
                let want = finish(op, DType::F32, fold(op, DType::F32, xs), accum.then(|| b0[lane]));
                assert_eq!(out[1][lane].to_bits(), want.to_bits(), "{} accum {accum} {lo}:{hi} lane {lane}", op.name());
            }
        }
    }
}
