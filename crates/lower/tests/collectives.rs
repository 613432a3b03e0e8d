//! Raw collectives (`T.cuda.warp_sum/max/min`, `warp_reduce`, `cta_sum/max/min`,
//! `cta_reduce`, `shfl_xor/down/up/shfl`; docs/tile-primitives.md §6): the
//! reference's codegen tests (test_cuda_warp_reduce.py, test_cuda_cta_reduce.py,
//! ref-tests §2.16) as simulator value checks, masks under lane conditions,
//! two CTA reductions in a row on one scratch (a race in the reference), and
//! the errors at the call.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, round_to, to_bytes};

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
";

fn run(src: &str, params: &[(DType, Vec<f64>)]) -> Vec<Vec<f64>> {
    let l = lower(src);
    let mut bytes: Vec<Vec<u8>> = params.iter().map(|(t, v)| to_bytes(*t, v)).collect();
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut bytes, &tirx_sim::SimOptions::default()) {
        panic!("simulation failed: {e}\n{}\n{src}", l.lir);
    }
    params.iter().zip(&bytes).map(|((t, _), b)| from_bytes(*t, b)).collect()
}

/// `out[lane] = T.cuda.warp_<op>(lane + 1, width)` in one warp (test_cuda_warp_reduce).
fn warp_reduce(call: &str, width: usize, combine: fn(f64, f64) -> f64) {
    let src = format!(
        r#"{HEAD}def kernel(out_ptr: T.handle):
    out = T.match_buffer(out_ptr, (32,), "float32")
    T.device_entry()
    T.cta_id([1])
    lane = T.lane_id([32])
    T.warp_id([1])
    val: T.float32 = T.float32(lane + 1)
    r = {call}
    out[lane] = r
"#
    );
    let out = run(&src, &[(DType::F32, vec![0.0; 32])]);
    for (l, got) in out[0].iter().enumerate() {
        let seg = l / width * width;
        let want = (seg..seg + width).map(|x| (x + 1) as f64).reduce(combine).unwrap();
        assert_eq!(*got, want, "{call}: lane {l}");
    }
}

#[test]
fn warp_reductions_of_every_width() {
    warp_reduce("T.cuda.warp_sum(val)", 32, |a, b| a + b);
    warp_reduce("T.cuda.warp_sum(val, width=8)", 8, |a, b| a + b);
    warp_reduce("T.cuda.warp_max(val, width=4)", 4, f64::max);
    warp_reduce("T.cuda.warp_min(val)", 32, f64::min);
    warp_reduce("T.cuda.warp_sum(val, width=2)", 2, |a, b| a + b);
    for w in [2, 4, 8, 16, 32] {
        warp_reduce(&format!("T.cuda.warp_reduce(val, \"sum\", {w})"), w, |a, b| a + b);
        warp_reduce(&format!("T.cuda.warp_reduce(val, \"max\", width={w})"), w, f64::max);
    }
}

/// f16 sums accumulate in f32 and round once (docs/numerics.md §9): lane 0 holds 1, the others
/// 2^-11; f32 sums 1 + 31·2^-11, rounded once to f16 1.015625, where f16 additions would round the
/// butterfly's first 1 + 2^-11 to 1 and end at 1.0146484375.
#[test]
fn sixteen_bit_warp_sums_accumulate_in_f32() {
    let src = format!(
        r#"{HEAD}def kernel(a_ptr: T.handle, out_ptr: T.handle):
    a = T.match_buffer(a_ptr, (32,), "float16")
    out = T.match_buffer(out_ptr, (32,), "float16")
    T.device_entry()
    T.cta_id([1])
    lane = T.lane_id([32])
    T.warp_id([1])
    r = T.cuda.warp_sum(a[lane])
    out[lane] = r
"#
    );
    let a: Vec<f64> = (0..32).map(|l| if l == 0 { 1.0 } else { 2f64.powi(-11) }).collect();
    let out = run(&src, &[(DType::F16, a), (DType::F16, vec![0.0; 32])]);
    assert!(out[1].iter().all(|&v| v == 1.015625), "{:?}", out[1]);
    let text = lower(&src).lir.to_string();
    assert!(text.contains("let r: float32 = float32(a[lane])"), "{text}");
}

/// `out[tid] = T.cuda.cta_<op>(tid + 1, warps, scratch.ptr_to([0]))` (test_cuda_cta_reduce).
fn cta_reduce(op: &str, warps: usize) {
    let threads = 32 * warps;
    let src = format!(
        r#"{HEAD}def kernel(out_ptr: T.handle):
    out = T.match_buffer(out_ptr, ({threads},), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([{threads}])
    scratch = T.alloc_buffer(({warps},), "float32", scope="shared")
    val: T.float32 = T.float32(tid + 1)
    r = T.cuda.cta_{op}(val, {warps}, scratch.ptr_to([0]))
    out[tid] = r
"#
    );
    let out = run(&src, &[(DType::F32, vec![0.0; threads])]);
    let n = threads as f64;
    let want = match op {
        "sum" => n * (n + 1.0) / 2.0,
        "max" => n,
        _ => 1.0,
    };
    assert!(out[0].iter().all(|&v| v == want), "cta_{op} of {warps} warps: {:?} vs {want}", &out[0][..4]);
}

#[test]
fn cta_reductions_of_every_warp_count() {
    for warps in [1, 2, 4, 8, 16, 32] {
        cta_reduce("sum", warps);
    }
    cta_reduce("max", 4);
    cta_reduce("min", 4);
}

/// max then sum on one scratch: a softmax's two reductions. Every warp reads the
/// partials before the second barrier, so the second call's writes do not race
/// (the simulator's race check would catch the reference's broadcast through scratch[0]).
#[test]
fn two_cta_reductions_on_one_scratch() {
    let src = format!(
        r#"{HEAD}def kernel(x_ptr: T.handle, out_ptr: T.handle):
    x = T.match_buffer(x_ptr, (256,), "float32")
    out = T.match_buffer(out_ptr, (256,), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([256])
    scratch = T.alloc_buffer((8,), "float32", scope="shared")
    v = x[tid]
    m = T.cuda.cta_max(v, 8, scratch.ptr_to([0]))
    e = T.exp(v - m)
    s = T.cuda.cta_reduce(e, "sum", 8, scratch.ptr_to([0]))
    out[tid] = e / s
"#
    );
    let x: Vec<f64> = (0..256).map(|i| round_to(DType::F32, ((i * 37) % 101) as f64 / 17.0 - 3.0)).collect();
    let out = run(&src, &[(DType::F32, x.clone()), (DType::F32, vec![0.0; 256])]);
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = x.iter().map(|v| (v - m).exp()).sum();
    for (i, &v) in x.iter().enumerate() {
        let want = (v - m).exp() / total;
        assert!((out[1][i] - want).abs() <= 1e-6 * want.max(1e-3), "softmax[{i}]: {} vs {want}", out[1][i]);
    }
    let sum: f64 = out[1].iter().sum();
    assert!((sum - 1.0).abs() < 1e-5, "{sum}");
}

/// Shuffles with each mode, and the member mask of the active lanes.
#[test]
fn shuffles_of_each_mode() {
    let src = format!(
        r#"{HEAD}def kernel(out_ptr: T.handle):
    out = T.match_buffer(out_ptr, (4, 32), "int32")
    T.device_entry()
    T.cta_id([1])
    lane = T.lane_id([32])
    T.warp_id([1])
    x = T.cuda.shfl_xor(lane * 10, 5)
    d = T.cuda.shfl_down(lane * 10, 3, width=16)
    u = T.cuda.shfl_up(lane * 10, 1, width=8)
    i = T.cuda.shfl(lane * 10, 7, width=16)
    out[0, lane] = x
    out[1, lane] = d
    out[2, lane] = u
    out[3, lane] = i
"#
    );
    let out = run(&src, &[(DType::I32, vec![0.0; 128])]);
    for l in 0..32usize {
        let down = if l % 16 + 3 < 16 { l + 3 } else { l };
        let up = if l % 8 >= 1 { l - 1 } else { l };
        let want = [(l ^ 5) * 10, down * 10, up * 10, (l / 16 * 16 + 7) * 10];
        for (k, w) in want.iter().enumerate() {
            assert_eq!(out[0][k * 32 + l], *w as f64, "mode {k} lane {l}");
        }
    }
}

/// Under `if lane < 16` the member mask is the 16 active lanes (the reference's
/// fixed 0xffffffff would wait for the others forever).
#[test]
fn masks_follow_the_active_lanes() {
    let src = format!(
        r#"{HEAD}def kernel(out_ptr: T.handle):
    out = T.match_buffer(out_ptr, (32,), "float32")
    T.device_entry()
    T.cta_id([1])
    lane = T.lane_id([32])
    T.warp_id([1])
    out[lane] = T.float32(0)
    if lane < 16:
        r = T.cuda.warp_sum(T.float32(lane), width=16)
        out[lane] = r
"#
    );
    let l = lower(&src);
    assert!(l.lir.to_string().contains("mask=0x0000ffff"), "{}", l.lir);
    let out = run(&src, &[(DType::F32, vec![0.0; 32])]);
    assert!(out[0][..16].iter().all(|&v| v == 120.0) && out[0][16..].iter().all(|&v| v == 0.0), "{:?}", out[0]);
}

fn error_of(src: &str) -> String {
    let k = match tirx_script::parse_kernel("k.py", src) {
        Ok(k) => k,
        Err(d) => return render(&d, src),
    };
    render(&lower_errors_of(&k), src)
}

fn lower_errors_of(k: &tirx_ir::hir::Kernel) -> Vec<tirx_ir::Diagnostic> {
    match tirx_lower::lower_kernel(k, &Default::default()) {
        Ok(l) => panic!("expected an error, got:\n{}", l.lir),
        Err(d) => d,
    }
}

fn kernel_with(threads: usize, body: &str) -> String {
    format!(
        r#"{HEAD}def kernel(out_ptr: T.handle):
    out = T.match_buffer(out_ptr, ({threads},), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([{threads}])
    lane = T.lane_id([32])
    scratch = T.alloc_buffer((4,), "float32", scope="shared")
    v: T.float32 = T.float32(tid)
{body}
"#
    )
}

#[test]
fn errors_at_the_call() {
    let cases: &[(usize, &str, &str)] = &[
        (
            128,
            "    if lane < 8:\n        r = T.cuda.warp_sum(v, width=16)",
            "a width-16 warp reduction combines aligned groups of 16 lanes, but only lanes 0-7 are active here",
        ),
        (
            128,
            "    if lane < 16:\n        r = T.cuda.shfl_xor(v, 16)",
            "lane 0 would read lane 16, which is not active here (active: 0-15)",
        ),
        (96, "    r = T.cuda.cta_sum(v, 4, scratch.ptr_to([0]))", "num_warps=4 but the CTA has 96 threads"),
        (
            128,
            "    if tid < 64:\n        r = T.cuda.cta_sum(v, 4, scratch.ptr_to([0]))",
            "every thread of the CTA must reach a CTA reduction",
        ),
        (
            256,
            "    r = T.cuda.cta_sum(v, 8, scratch.ptr_to([0]))",
            "the scratch `scratch` holds 4 elements; 8 partials from element 0 do not fit",
        ),
        (128, "    r = T.cuda.warp_sum(v, width=3)", "`width` must be a power of two in 2..=32, found 3"),
        (128, "    r = T.cuda.warp_reduce(v, \"prod\")", "unknown reduction `\"prod\"`"),
        (
            128,
            "    out[tid] = T.cuda.warp_sum(v)",
            "`T.cuda.warp_sum` is a statement that binds a name, not a value inside an expression",
        ),
        (128, "    T.cuda.warp_sum(v)", "`T.cuda.warp_sum` produces a value that must be bound to a name"),
        (
            128,
            "    L = T.alloc_buffer((4,), \"float32\", scope=\"local\")\n    r = T.cuda.cta_sum(v, 4, L.ptr_to([0]))",
            "the scratch of `T.cuda.cta_sum` must be in shared memory; `L` is not",
        ),
        (128, "    r = T.cuda.warp_sum(tid > 3)", "`T.cuda.warp_sum` of a bool value"),
        (128, "    r: T.float16 = T.cuda.warp_sum(v)", "`T.cuda.warp_sum` of a float32 value is float32, not float16"),
        (128, "    r = T.cuda.shfl_xor(v, 40)", "`lane_mask` 40 is outside 0..32"),
        (128, "    r = T.cuda.cta_sum(v, 4, scratch.ptr_to([9]))", "index 9 is outside dim 0 of `scratch` (size 4)"),
    ];
    for (threads, body, want) in cases {
        let src = kernel_with(*threads, body);
        let got = error_of(&src);
        assert!(got.contains(want), "{body}\nwant: {want}\ngot:\n{got}");
    }
}

/// The printer writes collectives back as they parse (`parse(print(k)) == k`).
#[test]
fn collectives_print_and_parse_back() {
    let src = kernel_with(
        128,
        "    a = T.cuda.warp_max(v, width=8)\n    b = T.cuda.cta_min(a, 4, scratch.ptr_to([0]))\n    c = T.cuda.shfl_down(b, 2, width=16)\n    d = T.cuda.shfl(c, lane // 2)\n    out[tid] = d",
    );
    let k = parse(&src);
    let printed = tirx_script::print_kernel(&k);
    assert!(printed.contains("b = T.cuda.cta_min(a, 4, scratch.ptr_to([0]))"), "{printed}");
    assert!(printed.contains("c = T.cuda.shfl_down(b, 2, width=16)"), "{printed}");
    let again = parse(&printed);
    assert_eq!(tirx_script::print_kernel(&again), printed);
}
