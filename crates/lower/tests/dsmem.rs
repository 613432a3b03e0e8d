//! DSMEM and clusters (docs/tile-primitives.md §3.21, §8.8): a ring of dsmem copies
//! between the CTAs of 2- and 4-CTA clusters value-checked in the simulator, the
//! simulator's cluster reports (no cluster barrier after a copy, a read before the
//! peer's phase completed, a barrier initialised after the cluster barrier, a rank out
//! of the cluster, a cluster barrier not reached by a peer, arriving twice or waiting
//! without an arrive, a source written without `fence.proxy.async`), the split
//! `barrier.cluster.arrive`/`.wait` spellings, and the dsmem rules as named declines.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::Rule;
use tirx_sim::{SimError, SimErrorKind, SimOptions};

/// CTA `r` of each cluster of `c` sends its 64-element f32 row of A to CTA `(r + 1) % c`,
/// which writes it to its own row of B: B[i] = A[i - 1 within the cluster].
fn ring(c: usize, grid: usize, wait: &str, tail: &str, init_fence: &str) -> String {
    format!(
        "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def ring(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({grid}, 64), \"float32\")
    B = T.match_buffer(B_ptr, ({grid}, 64), \"float32\")
    T.device_entry()
    bx = T.cta_id([{grid}])
    rank = T.cta_id_in_cluster([{c}])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    mine = pool.alloc((64,), \"float32\")
    theirs = pool.alloc((64,), \"float32\")
    bar = MBarrier(pool, 1)
    pool.commit()
{init_fence}    Tx.warp.copy(mine[0:64], A[bx, 0:64])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.warp_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 256)
        Tx.copy_async(theirs[0:64], mine[0:64], dispatch=\"dsmem\", mbar=bar.ptr_to([0]), remote_cta_id=(rank + 1) % {c})
{wait}    Tx.warp.copy(B[bx, 0:64], theirs[0:64])
{tail}"
    )
}

const INIT: &str = "    bar.init(1)\n    T.ptx.fence.mbarrier_init.release.cluster()\n    T.cuda.cluster_sync()\n";
const WAIT: &str = "    bar.wait(0, 0)\n";
const TAIL: &str = "    T.cuda.cluster_sync()\n";

fn run_ring(src: &str, grid: usize) -> Result<(Vec<u8>, Vec<u8>), SimError> {
    let k = parse(src);
    let l = tirx_lower::lower_kernel(&k, &Default::default())
        .unwrap_or_else(|d| panic!("lowering failed:\n{}", render(&d, src)));
    let a = pattern(DType::F32, grid * 64);
    let mut params = vec![a.clone(), vec![0u8; grid * 64 * 4]];
    tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default())?;
    Ok((a, params.pop().unwrap_or_default()))
}

fn expect_ring(c: usize, grid: usize) {
    expect_ring_of(&ring(c, grid, WAIT, TAIL, INIT), c, grid);
}

fn expect_ring_of(src: &str, c: usize, grid: usize) {
    let (a, b) = run_ring(src, grid).unwrap_or_else(|e| panic!("{}", render(&[e.to_diagnostic()], src)));
    for row in 0..grid {
        let from = row / c * c + (row % c + c - 1) % c;
        assert_eq!(b[row * 256..row * 256 + 256], a[from * 256..from * 256 + 256], "row {row} (cluster of {c})");
    }
}

#[test]
fn a_ring_of_dsmem_copies_in_2_and_4_cta_clusters() {
    expect_ring(2, 8);
    expect_ring(4, 8);
}

#[test]
fn the_kernel_head_declares_the_cluster() {
    let src = ring(4, 8, WAIT, TAIL, INIT);
    let l = lower(&src);
    assert_eq!(l.lir.cluster, [4, 1, 1]);
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("__cluster_dims__(4, 1, 1)"), "{cuda}");
    assert!(cuda.contains("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"), "{cuda}");
    assert!(cuda.contains("barrier.cluster.wait"), "{cuda}");
}

fn sim_err(src: &str) -> (SimError, String) {
    let e = run_ring(src, 8).expect_err("the simulator must fail");
    let text = render(&[e.to_diagnostic()], src);
    (e, text)
}

#[test]
fn exiting_without_a_cluster_barrier_after_the_copy_is_reported() {
    let (e, text) = sim_err(&ring(2, 8, WAIT, "", INIT));
    assert_eq!(e.kind, SimErrorKind::AsyncCopy, "{text}");
    assert!(e.message.contains("no cluster barrier after the copy completed"), "{text}");
}

#[test]
fn reading_the_destination_before_the_phase_completes_is_a_race() {
    let (e, text) = sim_err(&ring(2, 8, "", TAIL, INIT));
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`theirs`"), "{text}");
}

#[test]
fn a_barrier_initialised_without_a_cluster_barrier_is_reported() {
    let (e, text) = sim_err(&ring(2, 8, WAIT, TAIL, "    bar.init(1)\n    T.cuda.cta_sync()\n"));
    assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
    assert!(e.message.contains("not initialised before a cluster barrier"), "{text}");
}

#[test]
fn a_rank_out_of_the_cluster_is_reported() {
    let src = ring(2, 8, WAIT, TAIL, INIT).replace("remote_cta_id=(rank + 1) % 2", "remote_cta_id=rank + 1");
    let (e, text) = sim_err(&src);
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{text}");
    assert!(e.message.contains("not in the cluster of 2 CTAs"), "{text}");
}

#[test]
fn a_cluster_barrier_one_cta_skips_hangs_with_a_report() {
    let src = ring(2, 8, WAIT, "    if rank == 0:\n        T.cuda.cluster_sync()\n", INIT);
    let (e, text) = sim_err(&src);
    assert!(matches!(e.kind, SimErrorKind::BarrierDivergence | SimErrorKind::Deadlock), "{text}");
}

#[test]
fn dsmem_rules_are_named_declines() {
    let base = ring(2, 8, WAIT, TAIL, INIT);
    let cases = [
        ("remote_cta_id=(rank + 1) % 2", "remote_cta_id=2", Rule::RemoteCta),
        (", remote_cta_id=(rank + 1) % 2", "", Rule::RemoteCta),
        (", mbar=bar.ptr_to([0])", "", Rule::Mbar),
        ("theirs[0:64], mine[0:64]", "theirs[0:62], mine[0:62]", Rule::BulkChunk),
        ("theirs[0:64], mine[0:64]", "theirs[2:62], mine[2:62]", Rule::Alignment),
    ];
    for (from, to, rule) in cases {
        let src = base.replace(from, to);
        assert_ne!(src, base, "{from}");
        let (explain, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
        let c = explain.iter().find(|c| c.tried.iter().any(|t| t.variant == "dsmem")).expect("the dsmem call");
        let t = c.tried.iter().find(|t| t.variant == "dsmem").unwrap();
        assert!(!t.accepted && t.rule == Some(rule), "want {rule:?}, got {:?}\n{}", t.rule, c.render());
    }
    let no_cluster = base.replace("    rank = T.cta_id_in_cluster([2])\n", "    rank = bx % 2\n");
    assert_ne!(no_cluster, base);
    let (explain, _) = tirx_lower::explain_kernel(&parse(&no_cluster), &Default::default());
    let c = explain.iter().find(|c| c.tried.iter().any(|t| t.variant == "dsmem")).expect("the dsmem call");
    assert_eq!(rule(c, "dsmem"), Rule::Cluster, "{}", c.render());
}

const SPLIT: &str = "    T.ptx.barrier.cluster.arrive()\n    T.ptx.barrier.cluster.wait()\n";

#[test]
fn the_split_cluster_barrier_spellings_order_like_cluster_sync() {
    let init = INIT.replace("    T.cuda.cluster_sync()\n", SPLIT);
    expect_ring_of(&ring(2, 8, WAIT, SPLIT, &init), 2, 8);
}

#[test]
fn arriving_twice_or_waiting_without_an_arrive_at_the_cluster_barrier_is_reported() {
    let twice = "    T.ptx.barrier.cluster.arrive()\n".to_string() + SPLIT;
    let (e, text) = sim_err(&ring(2, 8, WAIT, &twice, INIT));
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{text}");
    assert!(e.message.contains("arrives at the cluster barrier twice without waiting in between"), "{text}");
    let (e, text) = sim_err(&ring(2, 8, WAIT, "    T.ptx.barrier.cluster.wait()\n", INIT));
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{text}");
    assert!(e.message.contains("waits at the cluster barrier without arriving first"), "{text}");
}

#[test]
fn a_dsmem_source_written_without_the_async_proxy_fence_is_a_race() {
    let base = ring(2, 8, WAIT, TAIL, INIT);
    let src = base.replacen("    T.ptx.fence.proxy.async_.shared__cta()\n", "", 1);
    assert_ne!(src, base);
    let (e, text) = sim_err(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`mine`") && e.message.contains("the dsmem copy"), "{text}");
}

/// A run-time grid in a cluster launch: a launch check that the grid is a whole number
/// of clusters (CUDA refuses the launch otherwise), evaluated by every launcher
/// (`LKernel::specialize`: the CLI, the runtime, the Python package, the simulator).
#[test]
fn a_run_time_grid_is_checked_to_be_a_whole_number_of_clusters() {
    use tirx_ir::lir::ScalarValue;
    let src = ring(2, 0, WAIT, TAIL, INIT)
        .replace("B_ptr: T.handle):", "B_ptr: T.handle, n: T.int32):")
        .replace("(0, 64)", "(n, 64)")
        .replace("T.cta_id([0])", "T.cta_id([n])");
    let l = lower(&src);
    let checks: Vec<String> = l.lir.checks.iter().map(|c| l.lir.sym_text(&c.cond)).collect();
    assert!(checks.contains(&"n % 2 == 0".to_string()), "{checks:?}");
    let c = l.lir.checks.iter().find(|c| l.lir.sym_text(&c.cond) == "n % 2 == 0").unwrap();
    assert!(c.what.contains("whole number of clusters") && c.what.contains("__cluster_dims__(2, 1, 1)"), "{}", c.what);
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("// launch check: n % 2 == 0"), "{cuda}");
    assert!(l.lir.specialize(&[ScalarValue::Int(6)]).is_ok());
    let e = l.lir.specialize(&[ScalarValue::Int(5)]).unwrap_err();
    assert!(e.to_string().contains("n % 2 == 0") && e.to_string().contains("n = 5"), "{e}");
    // The simulator runs a whole number of clusters and refuses the rest before running.
    let run = |n: usize| {
        let a = pattern(DType::F32, n * 64);
        let mut p = vec![a.clone(), vec![0u8; n * 256]];
        tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(n as i64)], &SimOptions::default()).map(|_| (a, p))
    };
    let (a, p) = run(6).unwrap_or_else(|e| panic!("{}", render(&[e.to_diagnostic()], &src)));
    assert_eq!(p[1][256..512], a[0..256], "CTA 1 holds CTA 0's row");
    let e = run(5).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::InvalidLaunch, "{e}");
}

/// The runtime's own evaluation of a grid (a kernel built without lowering's launch
/// check): a symbolic grid dimension that is not a whole number of clusters is refused.
#[test]
fn specialize_refuses_a_grid_that_splits_a_cluster() {
    use tirx_ir::lir::ScalarValue;
    let src = ring(2, 0, WAIT, TAIL, INIT)
        .replace("B_ptr: T.handle):", "B_ptr: T.handle, n: T.int32):")
        .replace("(0, 64)", "(n, 64)")
        .replace("T.cta_id([0])", "T.cta_id([n])");
    let mut k = lower(&src).lir;
    k.checks.clear();
    let e = k.specialize(&[ScalarValue::Int(7)]).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("grid dimension x `n` is 7") && text.contains("clusters of 2 CTAs"), "{text}");
    assert!(k.specialize(&[ScalarValue::Int(8)]).is_ok());
}
