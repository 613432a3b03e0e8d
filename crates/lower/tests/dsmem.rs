//! DSMEM and clusters (docs/tile-primitives.md §3.21, §8.8): a ring of dsmem copies
//! between the CTAs of 2-, 4- and 16-CTA clusters value-checked in the simulator, the
//! simulator's cluster reports (no cluster barrier after a copy, a read before the
//! peer's phase completed, a CTA barrier standing in for the wait, a wait on another mbarrier
//! (the one the CTA's own TMA load completes on) standing in for it, a barrier initialised after the cluster barrier, a rank out
//! of the cluster, a cluster barrier not reached by a peer, arriving twice or waiting
//! without an arrive, a source written without `fence.proxy.async`), the split
//! `barrier.cluster.arrive`/`.wait` spellings, global memory shared by a cluster's CTAs (ordered
//! by cluster barriers; unordered accesses reported whichever CTA runs first; nothing between a
//! thread's split arrive and wait ordered), and the dsmem rules as named declines.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::CopyAsyncRule;
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

/// Clusters of 9-16 CTAs are Hopper's non-portable sizes: lowered and simulated like the
/// portable ones (the runtime opts the kernel into them at load); more, or a 2-D shape of more,
/// is a user error at the `T.cta_id_in_cluster` that declares it.
#[test]
fn clusters_of_up_to_16_ctas_and_no_more() {
    expect_ring(16, 32);
    let cuda = tirx_cuda::generate(&lower(&ring(16, 32, WAIT, TAIL, INIT)).lir).unwrap().source;
    assert!(cuda.contains("__cluster_dims__(16, 1, 1)"), "{cuda}");
    for to in ["rank = T.cta_id_in_cluster([32])", "rank, y = T.cta_id_in_cluster([16, 2])"] {
        let src = ring(16, 32, WAIT, TAIL, INIT).replace("rank = T.cta_id_in_cluster([16])", to);
        let text = render(&lower_errors(&src), &src);
        assert!(text.contains("clusters hold 1 to 16 CTAs in up to 3 dimensions"), "{to}: {text}");
        assert!(text.contains(&format!("│     {to}")), "at the declaration: {text}");
    }
}

/// `c` CTAs per cluster exchange a value every iteration, all to all (each sends its value into
/// row `rank` of every peer's `stats` slot, 16-byte dsmem copies completing on that slot's
/// mbarrier), as the row kernels' `cluster_exchange` does, and write the cluster's sum:
/// B[i, it] = sum of A[j, it] over the cluster of i. `slots` stat buffers (and mbarriers) used in
/// turn; `sync`: a CTA barrier at the top of each iteration, before thread 0's copies.
fn exchange(c: usize, grid: usize, iters: usize, slots: usize, sync: bool) -> String {
    let sync = if sync { "        T.cuda.cta_sync()\n" } else { "" };
    format!(
        "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def exchange(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({grid}, {iters}), \"float32\")
    B = T.match_buffer(B_ptr, ({grid}, {iters}), \"float32\")
    T.device_entry()
    bx = T.cta_id([{grid}])
    rank = T.cta_id_in_cluster([{c}])
    tid = T.thread_id([64])
    pool = T.SMEMPool()
    stats = pool.alloc(({slots}, {c}, 4), \"float32\")
    mine = pool.alloc(({slots}, 4), \"float32\")
    bar = MBarrier(pool, {slots})
    pool.commit()
    bar.init(1)
    T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cluster_sync()
    for it in T.serial({iters}):
        p = it % {slots}
{sync}        if tid == 0:
            for k in T.serial(4):
                mine[p, k] = A[bx, it]
            T.ptx.fence.proxy.async_.shared__cta()
            for k in T.serial(4):
                stats[p, rank, k] = A[bx, it]
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([p]), {tx})
            for q in T.serial(1, {c}):
                Tx.copy_async(stats[p, rank, 0:4], mine[p, 0:4], dispatch=\"dsmem\", mbar=bar.ptr_to([p]), remote_cta_id=(rank + q) % {c})
        bar.wait(p, it // {slots} % 2)
        total = T.alloc_buffer((1,), \"float32\", scope=\"local\")
        total[0] = 0.0
        for r in T.serial({c}):
            total[0] = total[0] + stats[p, r, 0]
        if tid == 0:
            B[bx, it] = total[0]
    T.cuda.cluster_sync()
",
        tx = (c - 1) * 16
    )
}

fn run_exchange(src: &str, c: usize, grid: usize, iters: usize) -> Result<(), String> {
    let k = parse(src);
    let l = tirx_lower::lower_kernel(&k, &Default::default())
        .unwrap_or_else(|d| panic!("lowering failed:\n{}", render(&d, src)));
    let a: Vec<f32> = (0..grid * iters).map(|i| (i % 7) as f32 + 0.5 * (i / 7) as f32).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut params = vec![bytes(&a), vec![0u8; grid * iters * 4]];
    tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).map_err(|e| render(&[e.to_diagnostic()], src))?;
    let out: Vec<f32> = params[1].chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    for row in 0..grid {
        for it in 0..iters {
            let want: f32 = (row / c * c..row / c * c + c).map(|j| a[j * iters + it]).sum();
            assert_eq!(out[row * iters + it], want, "row {row} iteration {it}");
        }
    }
    Ok(())
}

/// Two slots used in turn need no cluster barrier per iteration: a peer writes slot p again two
/// iterations on, after it waited for this CTA's copy of the iteration between, which thread 0
/// issued after a CTA barrier that followed every thread's reads of slot p (the simulator
/// follows that chain of copies and mbarrier phases across the CTAs). One slot, or no CTA
/// barrier before the copies, is a race, reported.
#[test]
fn a_chain_of_exchanges_orders_a_peers_copy_without_a_cluster_barrier() {
    run_exchange(&exchange(4, 8, 6, 2, true), 4, 8, 6).unwrap_or_else(|e| panic!("{e}"));
    run_exchange(&exchange(2, 4, 5, 3, true), 2, 4, 5).unwrap_or_else(|e| panic!("{e}"));
    for (slots, sync) in [(1, true), (2, false)] {
        let e = run_exchange(&exchange(4, 8, 6, slots, sync), 4, 8, 6).expect_err("a race");
        assert!(e.contains("data race") && e.contains("`stats`"), "{slots} slot(s), sync {sync}: {e}");
    }
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
        ("remote_cta_id=(rank + 1) % 2", "remote_cta_id=2", CopyAsyncRule::RemoteCta),
        (", remote_cta_id=(rank + 1) % 2", "", CopyAsyncRule::RemoteCta),
        (", mbar=bar.ptr_to([0])", "", CopyAsyncRule::Mbar),
        ("theirs[0:64], mine[0:64]", "theirs[0:62], mine[0:62]", CopyAsyncRule::BulkChunk),
        ("theirs[0:64], mine[0:64]", "theirs[2:62], mine[2:62]", CopyAsyncRule::Alignment),
    ];
    for (from, to, rule) in cases {
        let src = base.replace(from, to);
        assert_ne!(src, base, "{from}");
        let (explain, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
        let c = explain.iter().find(|c| c.tried.iter().any(|t| t.variant == "dsmem")).expect("the dsmem call");
        let t = c.tried.iter().find(|t| t.variant == "dsmem").unwrap();
        assert!(!t.accepted && t.rule == Some(rule.into()), "want {rule:?}, got {:?}\n{}", t.rule, c.render());
    }
    let no_cluster = base.replace("    rank = T.cta_id_in_cluster([2])\n", "    rank = bx % 2\n");
    assert_ne!(no_cluster, base);
    let (explain, _) = tirx_lower::explain_kernel(&parse(&no_cluster), &Default::default());
    let c = explain.iter().find(|c| c.tried.iter().any(|t| t.variant == "dsmem")).expect("the dsmem call");
    assert_eq!(rule(c, "dsmem"), CopyAsyncRule::Cluster, "{}", c.render());
}

const SPLIT: &str = "    T.ptx.barrier.cluster.arrive()\n    T.ptx.barrier.cluster.wait()\n";

#[test]
fn the_split_cluster_barrier_spellings_order_like_cluster_sync() {
    let init = INIT.replace("    T.cuda.cluster_sync()\n", SPLIT);
    expect_ring_of(&ring(2, 8, WAIT, SPLIT, &init), 2, 8);
}

const RELAXED: &str = "    T.ptx.barrier.cluster.arrive.relaxed()\n    T.ptx.barrier.cluster.wait()\n";

#[test]
fn a_relaxed_arrive_ends_the_kernel_as_the_cluster_barrier_does() {
    // The last phase orders execution only (no CTA exits while a copy reads its source or a
    // peer its shared memory): `.relaxed` is enough, and its CUDA has no release (no MEMBAR).
    let src = ring(2, 8, WAIT, RELAXED, INIT);
    expect_ring_of(&src, 2, 8);
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("codegen").source;
    assert!(cuda.contains("barrier.cluster.arrive.relaxed.aligned;"), "{cuda}");
    assert_eq!(cuda.matches("barrier.cluster.arrive.aligned;").count(), 1, "the init's arrive releases: {cuda}");
}

#[test]
fn a_relaxed_arrive_after_the_init_fence_publishes_the_barriers() {
    // CUTLASS's start: `fence.mbarrier_init.release.cluster` releases the thread's inits, so the
    // phase's arrive may be `.relaxed` (no MEMBAR); without the fence, or with it after the
    // arrive, the phase orders no init before the peers' copies.
    let lean = INIT.replace("    T.cuda.cluster_sync()\n", RELAXED);
    expect_ring_of(&ring(2, 8, WAIT, TAIL, &lean), 2, 8);
    let fence = "    T.ptx.fence.mbarrier_init.release.cluster()\n";
    let late = format!(
        "    bar.init(1)\n    T.ptx.barrier.cluster.arrive.relaxed()\n{fence}    T.ptx.barrier.cluster.wait()\n"
    );
    for init in [lean.replace(fence, ""), late] {
        let (e, text) = sim_err(&ring(2, 8, WAIT, TAIL, &init));
        assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
        assert!(e.message.contains("not initialised before a cluster barrier"), "{text}");
    }
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
fn a_warps_lanes_at_different_cluster_barrier_instructions_are_reported() {
    // `barrier.cluster.arrive.aligned`: a warp's lanes execute one instruction together. Lane 0
    // arriving at one and the others at another (a lane-dependent condition) hangs the hardware.
    let apart = |cond: &str| {
        format!("    if {cond}:\n        T.ptx.barrier.cluster.arrive()\n    else:\n        T.ptx.barrier.cluster.arrive()\n{WAIT_CLUSTER}")
    };
    let (e, text) = sim_err(&ring(2, 8, WAIT, &apart("tid == 0"), INIT));
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{text}");
    assert!(
        e.message.contains("`barrier.cluster.arrive`") && e.message.contains("at another instruction than lane"),
        "{text}"
    );
    // A condition the whole warp shares (the CTA's rank): each warp at one instruction.
    expect_ring_of(&ring(2, 8, WAIT, &apart("rank == 0"), INIT), 2, 8);
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

// ---------------------------------------------------------------------------
// Strided regions: one bulk copy per chunk contiguous on both sides (the
// reference's stride-gap chunking), value-checked in the simulator.
// ---------------------------------------------------------------------------

/// One side of a strided dsmem copy: the shared buffer (shape, optional layout
/// expression) and the region of it that is copied.
#[derive(Clone, Copy)]
struct Side {
    shape: &'static [i64],
    layout: Option<&'static str>,
    region: &'static [(i64, i64)],
}

/// CTA `r` of each 2-CTA cluster (4 CTAs) loads `A[bx]` into the source region of
/// `mine`, zeroes all of `theirs`, and copies the source region into the destination
/// region of `theirs` in its peer with one dsmem call; every CTA then writes all of
/// its `theirs` to `B[bx]`. B[bx] holds the peer's A in the destination region (row-major
/// order), zero elsewhere.
fn strided(dtype: &str, src: Side, dst: Side) -> String {
    let tup = |v: &[i64]| format!("({})", v.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "));
    let reg = |r: &[(i64, i64)]| r.iter().map(|(b, e)| format!("{b}:{}", b + e)).collect::<Vec<_>>().join(", ");
    let full = |s: &[i64]| s.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ");
    let ext: Vec<i64> = src.region.iter().map(|r| r.1).collect();
    let layout = |s: &Side| s.layout.map(|l| format!(", layout={l}")).unwrap_or_default();
    let bytes = ext.iter().product::<i64>() * dt(dtype).bytes() as i64;
    format!(
        "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, mma_shared_layout
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def strided(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, {a}), \"{dtype}\")
    B = T.match_buffer(B_ptr, (4, {b}), \"{dtype}\")
    T.device_entry()
    bx = T.cta_id([4])
    rank = T.cta_id_in_cluster([2])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    mine = pool.alloc({ms}, \"{dtype}\"{ml})
    theirs = pool.alloc({ts}, \"{dtype}\"{tl})
    bar = MBarrier(pool, 1)
    pool.commit()
    bar.init(1)
    Tx.warp.fill(theirs[{tfull}], 0.0)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cluster_sync()
    Tx.warp.copy(mine[{sreg}], A[bx, {afull}])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.warp_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), {bytes})
        Tx.copy_async(theirs[{dreg}], mine[{sreg}], dispatch=\"dsmem\", mbar=bar.ptr_to([0]), remote_cta_id=(rank + 1) % 2)
    bar.wait(0, 0)
    Tx.warp.copy(B[bx, {tfull}], theirs[{tfull}])
    T.cuda.cluster_sync()
",
        a = ext.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
        b = dst.shape.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
        ms = tup(src.shape),
        ml = layout(&src),
        ts = tup(dst.shape),
        tl = layout(&dst),
        tfull = full(dst.shape),
        afull = full(&ext),
        sreg = reg(src.region),
        dreg = reg(dst.region),
    )
}

/// Lowers (dumped for the GPU matrix, CUDA generated, simulated clean), simulates with
/// a distinct A and checks B; returns the LIR text of the kernel.
fn expect_strided(dtype: &str, src: Side, dst: Side) -> String {
    let text = strided(dtype, src, dst);
    let l = lower(&text);
    let t = dt(dtype);
    let esize = t.bytes() as usize;
    let n: usize = src.region.iter().map(|r| r.1 as usize).product();
    let per_b: usize = dst.shape.iter().map(|&e| e as usize).product();
    let a = pattern(t, 4 * n);
    let mut params = vec![a.clone(), vec![0u8; 4 * per_b * esize]];
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()) {
        panic!("{}\n{}", render(&[e.to_diagnostic()], &text), l.lir);
    }
    let b = &params[1];
    for bx in 0..4 {
        let from = bx / 2 * 2 + (bx % 2 + 1) % 2;
        let mut k = 0; // row-major index within the destination region
        for i in 0..per_b {
            let (mut rest, mut inside) = (i as i64, true);
            for (d, &e) in dst.shape.iter().enumerate().rev() {
                let c = rest % e;
                rest /= e;
                inside &= c >= dst.region[d].0 && c < dst.region[d].0 + dst.region[d].1;
            }
            let got = &b[(bx * per_b + i) * esize..][..esize];
            if inside {
                assert_eq!(
                    got,
                    &a[(from * n + k) * esize..][..esize],
                    "CTA {bx}: element {i} (region element {k})\n{text}"
                );
                k += 1;
            } else {
                assert!(got.iter().all(|&x| x == 0), "CTA {bx}: element {i} outside the region written\n{text}");
            }
        }
        assert_eq!(k, n);
    }
    l.lir.to_string()
}

/// The dsmem call's LIR lines (the bulk copies and their loops).
fn bulk_lines(lir: &str) -> Vec<String> {
    let lines: Vec<&str> = lir.lines().collect();
    let start = lines.iter().position(|l| l.contains("copy_async -> dsmem")).expect("the dsmem call") + 1;
    let (mut out, mut depth) = (Vec::new(), 0);
    for l in &lines[start..] {
        let t = l.trim();
        match t {
            _ if t.starts_with("for ") => depth += 1,
            "}" if depth > 0 => depth -= 1,
            _ if t.starts_with("cp.async.bulk") => {}
            _ => break,
        }
        out.push(t.to_string());
    }
    out
}

const ROW_MAJOR_64X32: Side = Side { shape: &[64, 32], layout: None, region: &[(0, 64), (0, 32)] };

#[test]
fn a_column_slice_is_one_bulk_copy_per_row() {
    // 64 x 32 of a (64, 64) f16 buffer: rows of 64 B, 128 B apart; the destination dense.
    let src = Side { shape: &[64, 64], layout: None, region: &[(0, 64), (0, 32)] };
    let lir = expect_strided("float16", src, ROW_MAJOR_64X32);
    let lines = bulk_lines(&lir);
    assert_eq!(
        lines,
        [
            "for chunk in 0..64 {",
            "cp.async.bulk.shared::cluster.shared::cta<64> theirs[chunk * 32] @ cta (rank + 1) % 2 <- mine[chunk * 64] bar=bar[0]",
            "}",
        ],
        "{lir}"
    );
    // The other column half, and f32 (rows of 128 B).
    let right = Side { shape: &[64, 64], layout: None, region: &[(0, 64), (32, 32)] };
    expect_strided("float16", right, ROW_MAJOR_64X32);
    let lir = expect_strided("float32", src, ROW_MAJOR_64X32);
    assert!(bulk_lines(&lir)[1].contains("<128>"), "{lir}");
}

#[test]
fn the_generated_cuda_loops_over_the_rows() {
    let src = Side { shape: &[64, 64], layout: None, region: &[(0, 64), (0, 32)] };
    let l = lower(&strided("float16", src, ROW_MAJOR_64X32));
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert_eq!(cuda.matches("tirx_bulk_copy_to_peer(").count(), 2, "one call site and the helper\n{cuda}");
    let call = cuda.lines().position(|s| s.contains("tirx_bulk_copy_to_peer(&")).expect("the call");
    let lines: Vec<&str> = cuda.lines().collect();
    assert!(lines[call - 1].trim_start().starts_with("for ("), "{cuda}");
    assert!(lines[call].contains("64u"), "{cuda}");
    let ex = l.explain.iter().find(|c| c.chosen.as_deref() == Some("dsmem")).expect("the dsmem call");
    let t = tried(ex, "dsmem");
    assert!(t.reason.contains("4096 B in 64 chunks of 64 B"), "{}", ex.render());
}

#[test]
fn different_row_strides_on_the_two_sides() {
    // Source rows 128 B apart, destination rows 96 B apart starting at byte 16.
    let src = Side { shape: &[64, 64], layout: None, region: &[(0, 64), (0, 32)] };
    let dst = Side { shape: &[64, 48], layout: None, region: &[(0, 64), (8, 32)] };
    let lir = expect_strided("float16", src, dst);
    assert_eq!(bulk_lines(&lir).len(), 3, "{lir}");
    assert!(bulk_lines(&lir)[1].contains("theirs[chunk * 48 + 8]"), "{lir}");
    // The reference's stride-gap cases: explicit layouts with gaps, 256 B rows 512 B and
    // 1 KiB apart (8 bulk copies each).
    let gap = |l| Side { shape: &[8, 128], layout: Some(l), region: &[(0, 8), (0, 128)] };
    let a = gap("TileLayout(S[(8, 128):(256, 1)])");
    let lir = expect_strided("float16", a, a);
    assert_eq!(bulk_lines(&lir)[0], "for chunk in 0..8 {", "{lir}");
    let lir = expect_strided("float16", a, gap("TileLayout(S[(8, 128):(512, 1)])"));
    assert_eq!(bulk_lines(&lir)[0], "for chunk in 0..8 {", "{lir}");
    // A shorter contiguous run on one side sets the chunk: 128 B source rows into 64 B
    // destination rows of a wider buffer (two chunks per source row).
    let src = Side { shape: &[16, 64], layout: None, region: &[(0, 16), (0, 32)] };
    let dst = Side { shape: &[32, 32], layout: None, region: &[(0, 32), (0, 16)] };
    let lir = expect_strided("float32", src, dst);
    let lines = bulk_lines(&lir);
    assert_eq!(lines[..2], ["for chunk0 in 0..16 {", "for chunk1 in 0..2 {"], "{lir}");
    assert!(lines[2].contains("<64> theirs[chunk0 * 64 + chunk1 * 32]"), "{lir}");
}

#[test]
fn a_3d_region_is_two_loops() {
    // (4, 8, 32) of a (4, 16, 64) f16 buffer into (4, 8, 32) of a (4, 8, 48) one.
    let src = Side { shape: &[4, 16, 64], layout: None, region: &[(0, 4), (0, 8), (16, 32)] };
    let dst = Side { shape: &[4, 8, 48], layout: None, region: &[(0, 4), (0, 8), (8, 32)] };
    let lir = expect_strided("float16", src, dst);
    let lines = bulk_lines(&lir);
    assert_eq!(lines[0], "for chunk0 in 0..4 {", "{lir}");
    assert_eq!(lines[1], "for chunk1 in 0..8 {", "{lir}");
    // A 3-D region whose rows chain on both sides is one loop (the dims fuse).
    let src = Side { shape: &[2, 8, 64], layout: None, region: &[(0, 2), (0, 8), (0, 32)] };
    let dst = Side { shape: &[2, 8, 32], layout: None, region: &[(0, 2), (0, 8), (0, 32)] };
    let lir = expect_strided("float32", src, dst);
    assert_eq!(bulk_lines(&lir)[0], "for chunk in 0..16 {", "{lir}");
}

#[test]
fn shapes_that_split_the_chunks_differently_still_copy_in_order() {
    // 6 x 8 f32 (32 B runs) into 4 x 12 (48 B runs): chunks of 16 B, two per source row
    // and three per destination row; neither radix divides the other, so the chunk
    // index is split into each side's digits.
    let src = Side { shape: &[6, 16], layout: None, region: &[(0, 6), (0, 8)] };
    let dst = Side { shape: &[4, 16], layout: None, region: &[(0, 4), (0, 12)] };
    let lir = expect_strided("float32", src, dst);
    let lines = bulk_lines(&lir);
    assert_eq!(lines[0], "for chunk in 0..12 {", "{lir}");
    assert!(lines[1].contains("<16>"), "{lir}");
}

#[test]
fn a_dense_region_is_still_one_bulk_copy() {
    let src = Side { shape: &[64, 32], layout: None, region: &[(0, 64), (0, 32)] };
    let lir = expect_strided("float16", src, ROW_MAJOR_64X32);
    let lines = bulk_lines(&lir);
    assert_eq!(lines.len(), 1, "{lir}");
    assert!(lines[0].contains("<4096>"), "{lir}");
}

/// The rule and reason the dsmem variant declines the strided copy by.
fn strided_decline(dtype: &str, src: Side, dst: Side) -> (Rule, String) {
    let text = strided(dtype, src, dst);
    let (explain, _) = tirx_lower::explain_kernel(&parse(&text), &Default::default());
    let c = explain.iter().find(|c| c.tried.iter().any(|t| t.variant == "dsmem")).expect("the dsmem call");
    let t = tried(c, "dsmem");
    assert!(!t.accepted, "dsmem accepted\n{}", c.render());
    (t.rule.expect("a rule"), t.reason.clone())
}

#[test]
fn strided_regions_that_bulk_copies_cannot_move_decline_by_name() {
    let dense = |shape: &'static [i64], region: &'static [(i64, i64)]| Side { shape, layout: None, region };
    // 64 x 4 f16: rows of 8 B.
    let (r, why) =
        strided_decline("float16", dense(&[64, 64], &[(0, 64), (0, 4)]), dense(&[64, 4], &[(0, 64), (0, 4)]));
    assert_eq!(r, CopyAsyncRule::BulkChunk, "{why}");
    assert!(why.contains("4 element(s) (8 B)") && why.contains("multiple of 16 bytes"), "{why}");
    // A column slice starting at byte 8.
    let (r, why) = strided_decline("float16", dense(&[64, 64], &[(0, 64), (4, 32)]), ROW_MAJOR_64X32);
    assert_eq!(r, CopyAsyncRule::Alignment, "{why}");
    assert!(why.contains("`mine` starts at byte 8"), "{why}");
    // 64 B rows 72 B apart: the second chunk starts at byte 72.
    let (r, why) = strided_decline("float16", dense(&[64, 36], &[(0, 64), (0, 32)]), ROW_MAJOR_64X32);
    assert_eq!(r, CopyAsyncRule::Alignment, "{why}");
    assert!(why.contains("chunk 1 of `mine` starts at byte 72") && why.contains("step by 72 B"), "{why}");
    // ... and on the destination side.
    let (r, why) = strided_decline("float16", ROW_MAJOR_64X32, dense(&[64, 36], &[(0, 64), (0, 32)]));
    assert_eq!(r, CopyAsyncRule::Alignment, "{why}");
    assert!(why.contains("chunk 1 of `theirs`"), "{why}");
    // Row-major into column-major (the reference's incompatible case): 1-element runs.
    let (r, why) = strided_decline(
        "float16",
        Side { shape: &[4, 64], layout: None, region: &[(0, 4), (0, 64)] },
        Side { shape: &[4, 64], layout: Some("TileLayout(S[(4, 64):(1, 4)])"), region: &[(0, 4), (0, 64)] },
    );
    assert_eq!(r, CopyAsyncRule::BulkChunk, "{why}");
    assert!(why.contains("dense") && why.contains("1 element(s) (2 B)"), "{why}");
    // 16 B chunks, 300 of them: over the cap.
    let (r, why) =
        strided_decline("float32", dense(&[300, 8], &[(0, 300), (0, 4)]), dense(&[300, 4], &[(0, 300), (0, 4)]));
    assert_eq!(r, CopyAsyncRule::BulkChunk, "{why}");
    assert!(why.contains("300 chunks of 16 B") && why.contains("256"), "{why}");
    // A swizzled side still declines.
    let sw = Side {
        shape: &[64, 64],
        layout: Some("mma_shared_layout(\"float16\", 3, (64, 64))"),
        region: &[(0, 64), (0, 64)],
    };
    let (r, why) = strided_decline("float16", dense(&[64, 64], &[(0, 64), (0, 64)]), sw);
    assert_eq!(r, CopyAsyncRule::BulkChunk, "{why}");
    assert!(why.contains("swizzled"), "{why}");
}

#[test]
fn every_chunk_counts_toward_the_peer_barrier() {
    // 64 chunks of 64 B complete on the peer's barrier, each counting its bytes.
    let src = Side { shape: &[64, 64], layout: None, region: &[(0, 64), (0, 32)] };
    let text = strided("float16", src, ROW_MAJOR_64X32);
    let sim = |tx: &str| {
        let k = text.replace("bar.ptr_to([0]), 4096)", &format!("bar.ptr_to([0]), {tx})"));
        assert_ne!(k, text);
        let l = tirx_lower::lower_kernel(&parse(&k), &Default::default()).unwrap();
        let mut params = vec![pattern(DType::F16, 4 * 2048), vec![0u8; 4 * 2048 * 2]];
        let e =
            tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).expect_err("a wrong expect_tx must fail");
        let shown = render(&[e.to_diagnostic()], &k);
        (e, shown)
    };
    // The bytes of one chunk only: the phase completes when the first chunk lands, and
    // the read after the wait races with the other chunks.
    let (e, text) = sim("64");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(
        e.message.contains("`theirs`") && e.message.contains("dsmem copy into it by thread 0 of the issuing CTA"),
        "{text}"
    );
    // One byte count more than the chunks bring: the phase never completes.
    let (e, text) = sim("4112");
    assert!(matches!(e.kind, SimErrorKind::Deadlock | SimErrorKind::Mbarrier), "{text}");
}

// ---------------------------------------------------------------------------
// A CTA barrier in the receiving CTA does not complete a peer's copy into it:
// only the mbarrier phase the copy completes on does, for the threads that wait
// for it (and, through the CTA barrier, the threads ordered after a waiter).
// ---------------------------------------------------------------------------

/// Only thread 0 of the receiving CTA waits for the copy's phase; a CTA barrier hands
/// the landing to the whole warp.
const ONE_WAITS: &str = "    if tid == 0:\n        bar.wait(0, 0)\n    T.cuda.cta_sync()\n";
/// Nobody waits: the CTA barrier alone.
const CTA_SYNC_ONLY: &str = "    T.cuda.cta_sync()\n";

#[test]
fn one_waiter_and_a_cta_barrier_hand_a_dsmem_landing_to_every_thread() {
    let src = ring(2, 8, ONE_WAITS, TAIL, INIT);
    lower(&src);
    expect_ring_of(&src, 2, 8);
}

#[test]
fn a_cta_barrier_without_an_mbarrier_wait_does_not_order_a_dsmem_landing() {
    let (e, text) = sim_err(&ring(2, 8, CTA_SYNC_ONLY, TAIL, INIT));
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`theirs`"), "{text}");
}

/// Rank 1 of each 2-CTA cluster copies its row of A into `theirs` of rank 0, which
/// announces the bytes and runs `receiver` (under `if rank == 0`, 8 spaces deep);
/// `after` follows the copy in both CTAs, then a cluster barrier ends the kernel.
fn one_way(receiver: &str, after: &str) -> String {
    format!(
        "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def one_way(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 64), \"float32\")
    B = T.match_buffer(B_ptr, (8, 64), \"float32\")
    T.device_entry()
    bx = T.cta_id([8])
    rank = T.cta_id_in_cluster([2])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    mine = pool.alloc((64,), \"float32\")
    theirs = pool.alloc((64,), \"float32\")
    bar = MBarrier(pool, 1)
    pool.commit()
{INIT}    Tx.warp.copy(mine[0:64], A[bx, 0:64])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.warp_sync()
    if rank == 0:
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 256)
{receiver}    if rank == 1:
        if tid == 0:
            Tx.copy_async(theirs[0:64], mine[0:64], dispatch=\"dsmem\", mbar=bar.ptr_to([0]), remote_cta_id=0)
{after}{TAIL}"
    )
}

/// Rank 0: thread 0 waits for the copy's phase, a CTA barrier, then the warp reads.
const RECEIVE: &str =
    "        if tid == 0:\n            bar.wait(0, 0)\n        T.cuda.cta_sync()\n        Tx.warp.copy(B[bx, 0:64], theirs[0:64])\n";

#[test]
fn a_one_way_dsmem_copy_waited_for_by_one_thread_reaches_its_cta() {
    for (receiver, after) in [(RECEIVE, ""), ("", &*format!("    T.cuda.cluster_sync()\n    if rank == 0:\n{RECEIVE}"))]
    {
        let src = one_way(receiver, after);
        lower(&src);
        let (a, b) = run_ring(&src, 8).unwrap_or_else(|e| panic!("{}", render(&[e.to_diagnostic()], &src)));
        for row in (0..8).step_by(2) {
            assert_eq!(b[row * 256..row * 256 + 256], a[(row + 1) * 256..(row + 2) * 256], "row {row}\n{src}");
            assert!(b[(row + 1) * 256..(row + 2) * 256].iter().all(|&x| x == 0), "row {}", row + 1);
        }
    }
}

#[test]
fn a_dsmem_copy_into_a_cta_that_only_passed_a_cta_barrier_is_a_race() {
    // Rank 0's thread 0 reads `theirs` after a CTA barrier, waiting for nothing. Rank 0 runs
    // first here, so the read comes before rank 1's copy; the copy is then unordered with
    // it (thread 0 of rank 1 is not thread 0 of rank 0, and rank 0's CTA barrier does not
    // order rank 1's copy).
    let racy = "        T.cuda.cta_sync()\n        if tid == 0:\n            B[bx, 0] = theirs[0]\n";
    let src = one_way(racy, "");
    let (e, text) = sim_err(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(
        e.message.contains("`theirs`")
            && e.message.contains("a dsmem copy by thread 0 of CTA rank 1 writes it into CTA (0, 0, 0)")
            && e.message.contains("thread 0 (warp 0, lane 0) of CTA (0, 0, 0) read it there")
            && e.message.contains("no cluster barrier (or chain of exchanges) orders that before the copy"),
        "{text}"
    );
    assert!(src[e.span.lo as usize..].starts_with("Tx.copy_async(theirs"), "{text}");
    assert!(e.labels.iter().any(|(s, _)| src[s.lo as usize..].starts_with("B[bx, 0] = theirs[0]")), "{text}");
    // The same reads after a cluster barrier that follows the copy: the copy has landed,
    // but nobody in rank 0 waited for its phase, and neither barrier completes it.
    let src = one_way("", &format!("    T.cuda.cluster_sync()\n    if rank == 0:\n{racy}"));
    let (e, text) = sim_err(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(
        e.message.contains("`theirs`")
            && e.message.contains("has not waited for the mbarrier phase that copy completed"),
        "{text}"
    );
    assert!(src[e.span.lo as usize..].starts_with("B[bx, 0] = theirs[0]"), "{text}");
}

/// Rank 1's thread 0 copies its row of A into rank 0's `theirs` (dsmem) completing on rank
/// 0's `bar[0]`; after a cluster barrier, rank 0's thread 0 loads A's next row into `own`
/// by TMA completing on `bar[1]`; rank 0 runs `waits`, then its warp copies `theirs` to
/// its row of B and `own` to the next row.
fn dsmem_and_own_load(waits: &str) -> String {
    format!(
        "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def two_sources(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 64), \"float32\")
    B = T.match_buffer(B_ptr, (8, 64), \"float32\")
    T.device_entry()
    bx = T.cta_id([8])
    rank = T.cta_id_in_cluster([2])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    mine = pool.alloc((64,), \"float32\")
    theirs = pool.alloc((64,), \"float32\")
    own = pool.alloc((64,), \"float32\")
    bar = MBarrier(pool, 2)
    pool.commit()
{INIT}    Tx.warp.copy(mine[0:64], A[bx, 0:64])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.warp_sync()
    if rank == 0:
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 256)
    if rank == 1:
        if tid == 0:
            Tx.copy_async(theirs[0:64], mine[0:64], dispatch=\"dsmem\", mbar=bar.ptr_to([0]), remote_cta_id=0)
    T.cuda.cluster_sync()
    if rank == 0:
        if tid == 0:
            Tx.copy_async(own[0:64], A[bx + 1, 0:64], dispatch=\"tma_auto\", mbar=bar.ptr_to([1]))
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([1]), 256)
{waits}        Tx.warp.copy(B[bx + 1, 0:64], own[0:64])
        Tx.warp.copy(B[bx, 0:64], theirs[0:64])
{TAIL}"
    )
}

#[test]
fn waiting_for_the_own_load_does_not_acquire_a_peer_copy_on_another_mbarrier() {
    // The dsmem copy (by thread 0 of rank 1) landed on bar[0] before the cluster barrier;
    // rank 0 waits only for bar[1], its own thread 0's load: `theirs` is not ordered.
    let src = dsmem_and_own_load("        bar.wait(1, 0)\n");
    let (e, text) = sim_err(&src);
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(
        e.message.contains("`theirs`")
            && e.message.contains("a TMA copy completing on `bar[0]` wrote it")
            && e.message.contains("has not waited for the mbarrier phase that copy completed")
            && e.message.contains("only of `bar[1]`"),
        "{text}"
    );
    assert!(src[e.span.lo as usize..].starts_with("Tx.warp.copy(B[bx, 0:64], theirs"), "{text}");
    // Waiting for both phases orders both tiles.
    for waits in
        ["        bar.wait(1, 0)\n        bar.wait(0, 0)\n", "        bar.wait(0, 0)\n        bar.wait(1, 0)\n"]
    {
        let src = dsmem_and_own_load(waits);
        lower(&src);
        let (a, b) = run_ring(&src, 8).unwrap_or_else(|e| panic!("{}\n{src}", render(&[e.to_diagnostic()], &src)));
        for row in (0..8).step_by(2) {
            assert_eq!(b[row * 256..row * 256 + 256], a[(row + 1) * 256..(row + 2) * 256], "row {row}\n{src}");
            assert_eq!(b[(row + 1) * 256..(row + 2) * 256], a[(row + 1) * 256..(row + 2) * 256], "row {}", row + 1);
        }
    }
}

/// A 2-CTA cluster, 64 threads a CTA, exchanging through global memory: `body` runs in both
/// CTAs (`rank`, `tid`); A holds 64 int32 (zero), B receives what the readers read.
fn global_exchange(body: &str) -> String {
    format!(
        "from tvm.script import tirx as T

@T.prim_func
def exchange(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), \"int32\")
    B = T.match_buffer(B_ptr, (128,), \"int32\")
    T.device_entry()
    bx = T.cta_id([2])
    rank = T.cta_id_in_cluster([2])
    tid = T.thread_id([64])
{body}"
    )
}

fn exchange_sim(body: &str) -> Result<Vec<Vec<u8>>, (SimError, String)> {
    let src = global_exchange(body);
    simulate_on(&src, vec![vec![0u8; 64 * 4], vec![0u8; 128 * 4]])
}

fn exchange_race(body: &str) -> (SimError, String) {
    let src = global_exchange(body);
    let Err((e, text)) = exchange_sim(body) else { panic!("expected a race:\n{src}") };
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    (e, text)
}

fn int32s(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn a_cluster_barrier_orders_the_ctas_global_accesses_either_way() {
    // Rank w writes A[tid]; after the cluster barrier rank 1 - w reads it (whichever CTA the
    // simulator runs first), and rewrites it after a second one.
    for w in 0..2 {
        let body = format!(
            "    if rank == {w}:
        A[tid] = tid + 100
    T.cuda.cluster_sync()
    if rank == {r}:
        B[bx * 64 + tid] = A[tid]
    T.cuda.cluster_sync()
    if rank == {w}:
        A[tid] = 0
",
            r = 1 - w
        );
        let out = exchange_sim(&body).unwrap_or_else(|(_, text)| panic!("{text}"));
        let b = int32s(&out[1]);
        for tid in 0..64 {
            assert_eq!(b[(1 - w) * 64 + tid], tid as i32 + 100, "rank {w} writes, tid {tid}");
            assert_eq!(b[w * 64 + tid], 0);
        }
    }
}

#[test]
fn ctas_of_a_cluster_racing_on_global_memory_are_reported_whichever_runs_first() {
    // Before: a write of thread 0 of rank 1 and a read of thread 0 of rank 0 (the same thread
    // index in both CTAs once was one thread to the simulator: neither order was reported).
    for (w, r) in [(0, 1), (1, 0)] {
        let body = format!(
            "    T.cuda.cluster_sync()
    if rank == {r}:
        if tid == 0:
            B[tid] = A[1]
    if rank == {w}:
        if tid == 0:
            A[1] = 7
"
        );
        let (e, text) = exchange_race(&body);
        assert!(
            e.message.contains("`A`")
                && e.message.contains(&format!("of CTA ({w}, 0, 0)"))
                && e.message.contains(&format!("of CTA ({r}, 0, 0)"))
                && e.message.contains("no cluster barrier orders the two"),
            "{text}"
        );
        assert!(e.help.as_deref().is_some_and(|h| h.contains("T.cuda.cluster_sync()")), "{text}");
    }
}

/// Thread 40 of rank 0 writes `A[3]` between `before` and `after`; thread 0 of the ranks where
/// `reader` holds then reads it into `B`.
fn thread_40_writes(before: &str, after: &str, reader: &str) -> String {
    format!(
        "{before}    if rank == 0:
        if tid == 40:
            A[3] = 7
{after}    if {reader}:
        if tid == 0:
            B[bx] = A[3]
"
    )
}

const ARRIVE: &str = "    T.ptx.barrier.cluster.arrive()\n";
const WAIT_CLUSTER: &str = "    T.ptx.barrier.cluster.wait()\n";

#[test]
fn an_access_between_a_threads_cluster_arrive_and_wait_is_not_ordered_by_that_barrier() {
    // Thread 40 writes after its arrive: neither the other CTA's nor its own CTA's thread 0,
    // reading after its wait, is ordered after the write.
    for reader in ["rank != 0", "rank == 0"] {
        let (e, text) = exchange_race(&thread_40_writes(ARRIVE, WAIT_CLUSTER, reader));
        assert!(e.message.contains("`A`") && e.message.contains("thread 40"), "{text}");
    }
    // Written before the arrive: ordered (and the value is there).
    let out = exchange_sim(&thread_40_writes("", SPLIT, "rank >= 0")).unwrap_or_else(|(_, text)| panic!("{text}"));
    assert_eq!(int32s(&out[1])[..2], [7, 7]);
}

#[test]
fn a_relaxed_arrive_orders_no_access_before_it() {
    // A write before a relaxed arrive is not ordered before a read after the wait (in the other
    // CTA or its own); a release arrive before it, in an earlier phase, still orders what it did.
    for reader in ["rank != 0", "rank == 0"] {
        let (e, text) = exchange_race(&thread_40_writes("", RELAXED, reader));
        assert!(e.message.contains("`A`") && e.message.contains("thread 40"), "{text}");
    }
    let after = "    T.cuda.cluster_sync()\n".to_string() + RELAXED;
    let out = exchange_sim(&thread_40_writes("", &after, "rank >= 0")).unwrap_or_else(|(_, text)| panic!("{text}"));
    assert_eq!(int32s(&out[1])[..2], [7, 7]);
}

#[test]
fn readers_in_both_ctas_are_ordered_before_a_write_only_by_a_cluster_barrier() {
    let reads = "    B[bx * 64 + tid] = A[tid]\n";
    let write = "    if rank == 0:\n        A[tid] = 1\n";
    // (rank 0 runs first: rank 1's read then meets rank 0's write)
    let (e, text) = exchange_race(&format!("{reads}{write}"));
    assert!(e.message.contains("`A`") && e.message.contains("no cluster barrier orders the two"), "{text}");
    // A CTA barrier orders only its own CTA's readers.
    let (e, text) = exchange_race(&format!("{reads}    T.cuda.cta_sync()\n{write}"));
    assert!(e.message.contains("no cluster barrier orders the two"), "{text}");
    exchange_sim(&format!("{reads}    T.cuda.cluster_sync()\n{write}")).unwrap_or_else(|(_, text)| panic!("{text}"));
}
