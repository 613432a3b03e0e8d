//! Arrives on a peer CTA's mbarrier (`T.ptx.mbarrier.arrive(bar, cta_id=r)`,
//! `MBarrier.arrive(stage, cta_id=r)`; docs/tile-primitives.md §8.8): the ring of stages that
//! both CTAs of a cluster fill by multicast loads (`examples/multicast_pipeline.py`), each
//! consumer releasing a stage to its own producer and its peer's. Value-checked in the simulator;
//! every planted mistake reported — no remote release (the peer's refill races with this CTA's
//! reads of the stage), no fence for the async proxy, a barrier counting too few or too many
//! arrivals, a rank outside the cluster (at compile time and at run time), a peer barrier no
//! cluster barrier ordered the init of, no cluster launch, a remote arrive not ordered before
//! its target's exit (a relaxed end barrier, or none without the producer's tail); the CUDA's
//! `mapa` and cluster-scope release.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_sim::{SimError, SimErrorKind};

const EXAMPLE: &str = include_str!("../../../examples/multicast_pipeline.py");
/// A's rows (6 steps of 64-row bands) and columns.
const ROWS: usize = 6 * 64;
const COLS: usize = 64;

fn planted(from: &str, to: &str) -> String {
    assert!(EXAMPLE.contains(from), "the example no longer has {from:?}");
    EXAMPLE.replacen(from, to, 1)
}

fn simulate_src(src: &str) -> Result<Vec<u8>, (SimError, String)> {
    let params = vec![pattern(DType::F16, ROWS * COLS), vec![0u8; 2 * ROWS * COLS * 2]];
    simulate_on(src, params).map(|mut p| p.pop().unwrap_or_default())
}

#[test]
fn both_ctas_copy_every_band_the_ring_brings() {
    let b = simulate_src(EXAMPLE).unwrap_or_else(|(_, text)| panic!("{text}"));
    let a = pattern(DType::F16, ROWS * COLS);
    assert!(b[..a.len()] == a[..] && b[a.len()..] == a[..]);
}

#[test]
fn without_the_remote_release_the_peers_refill_races_with_this_ctas_stage() {
    let src = planted("                empty.arrive(s % STAGES, cta_id=1 - rank)\n", "").replacen(
        "    empty.init(CLUSTER)",
        "    empty.init(1)",
        1,
    );
    let (e, text) = simulate_src(&src).expect_err("the peer's producer refills the stage unordered");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("a multicast TMA load by thread 0 of CTA rank"), "{text}");
    assert!(e.message.contains("no cluster barrier (or chain of exchanges) orders that"), "{text}");
}

#[test]
fn a_release_before_the_reads_end_is_a_race_even_with_the_remote_arrive() {
    // The consumer releases the stage first, then reads it: both producers may refill it meanwhile.
    let src = planted(
        "            for i in range(2):\n                for c in range(K):\n                    B[rank, s * TM + lane * 2 + i, c] = band[s % STAGES, lane * 2 + i, c]\n",
        "",
    )
    .replacen(
        "                empty.arrive(s % STAGES, cta_id=1 - rank)\n",
        "                empty.arrive(s % STAGES, cta_id=1 - rank)\n            for i in range(2):\n                for c in range(K):\n                    B[rank, s * TM + lane * 2 + i, c] = band[s % STAGES, lane * 2 + i, c]\n",
        1,
    );
    let (e, text) = simulate_src(&src).expect_err("a read after the release races with the refill");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
}

#[test]
fn the_peers_refill_needs_the_readers_fence_for_the_async_proxy() {
    // Only the peer's refill is left to catch it: this CTA's own producer loads the other half.
    let src = planted("            T.ptx.fence.proxy.async_.shared__cta()\n", "");
    let (e, text) = simulate_src(&src).expect_err("generic reads, then an async-proxy refill, no fence");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("through the generic proxy and no `fence.proxy.async`"), "{text}");
}

#[test]
fn a_barrier_counting_the_wrong_arrivals_is_reported() {
    // Two arrivals a phase from one consumer alone (the remote one dropped): no phase completes.
    let src = planted("                empty.arrive(s % STAGES, cta_id=1 - rank)\n", "");
    let (e, text) = simulate_src(&src).expect_err("the producers wait for releases that never come");
    assert_eq!(e.kind, SimErrorKind::Deadlock, "{text}");
    // One arrival a phase, two given: the second finds the phase complete (or overtakes it).
    let src = planted("    empty.init(CLUSTER)", "    empty.init(1)");
    let (e, text) = simulate_src(&src).expect_err("a phase with all its arrivals gets one more");
    assert!(matches!(e.kind, SimErrorKind::Mbarrier | SimErrorKind::DataRace), "{text}");
}

/// The example with its end (the last `T.cuda.cluster_sync()`) replaced by `end`.
fn with_end(end: &str) -> String {
    let last = "    T.cuda.cluster_sync()\n";
    let at = EXAMPLE.rfind(last).expect("the example ends with a cluster barrier");
    format!("{}{end}{}", &EXAMPLE[..at], &EXAMPLE[at + last.len()..])
}

#[test]
fn a_remote_arrive_must_reach_its_target_before_the_target_exits() {
    // A `.relaxed` end barrier orders no memory access: the last remote releases may still be
    // on their way to a peer that has exited.
    let relaxed = with_end("    T.ptx.barrier.cluster.arrive.relaxed()\n    T.ptx.barrier.cluster.wait()\n");
    let (e, text) = simulate_src(&relaxed).expect_err("the peer may exit before the arrive lands");
    assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
    assert!(e.message.contains("(remote)") && e.message.contains("may exit before the arrive reaches"), "{text}");
    let (e, text) = simulate_src(&with_end("")).expect_err("no end barrier, no tail");
    assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
    // The producer's tail (CUTLASS's): every stage's last release waited for, no end barrier.
    let loop_end = "                cta_mask=(1 << CLUSTER) - 1,\n            )\n";
    let tail =
        "        for s in range(STEPS, STEPS + STAGES):\n            empty.wait(s % STAGES, (s // STAGES + 1) % 2)\n";
    let src = with_end("").replacen(loop_end, &format!("{loop_end}{tail}"), 1);
    assert_ne!(src, with_end(""));
    let b = simulate_src(&src).unwrap_or_else(|(_, text)| panic!("{text}"));
    let a = pattern(DType::F16, ROWS * COLS);
    assert!(b[..a.len()] == a[..] && b[a.len()..] == a[..]);
}

#[test]
fn a_run_time_rank_outside_the_cluster_is_reported() {
    let src = planted("cta_id=1 - rank)", "cta_id=1 + rank)");
    let (e, text) = simulate_src(&src).expect_err("rank 1's peer would be rank 2");
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{text}");
    assert!(e.message.contains("on CTA rank 2, which is not in the cluster of 2 CTAs"), "{text}");
}

#[test]
fn a_peer_barrier_whose_init_no_cluster_barrier_ordered_is_reported() {
    let src = planted(
        "    T.ptx.fence.mbarrier_init()\n    T.cuda.cluster_sync()\n",
        "    T.ptx.fence.mbarrier_init()\n    T.cuda.cta_sync()\n",
    );
    let (e, text) = simulate_src(&src).expect_err("the peer's barrier is not known to be initialised");
    assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
}

#[test]
fn a_constant_rank_outside_the_cluster_and_no_cluster_launch_are_errors_at_the_argument() {
    let d = lower_errors(&planted("cta_id=1 - rank)", "cta_id=2)"));
    assert!(d.iter().any(|d| d.message.contains("`cta_id=2` is not a CTA of the cluster of 2")), "{d:?}");
    let one = "from tvm.script import tirx as T
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def k(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32,), \"float32\")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    bar = MBarrier(pool, 1)
    pool.commit()
    bar.init(1)
    T.cuda.cta_sync()
    if tid == 0:
        bar.arrive(0, cta_id=0)
    A[tid] = 1.0
";
    let d = lower_errors(one);
    assert!(d.iter().any(|d| d.message.contains("needs a cluster launch")), "{d:?}");
}

#[test]
fn the_cuda_maps_the_barrier_into_the_peer_and_releases_at_cluster_scope() {
    let l = lower(EXAMPLE);
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
    assert!(cuda.contains("mapa.shared::cluster.u32"), "{cuda}");
    assert!(cuda.contains("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];"), "{cuda}");
    assert!(cuda.contains("tirx_mbarrier_arrive_remote(&empty[s % 2], 1 - rank);"), "{cuda}");
}

const REMOTE: &str = "                empty.arrive(s % STAGES, cta_id=1 - rank)\n";
const REMOTE_CTA: &str = "                empty.arrive(s % STAGES, cta_id=1 - rank, scope=\"cta\")\n";

#[test]
fn a_cta_scope_remote_arrive_orders_the_reads_before_it_and_has_no_fence() {
    // CUTLASS's `ClusterBarrier::arrive`: the consumer's reads of the stage are done when it is
    // issued, so the peer's refill after it is ordered; the CUDA has no cluster-scope release.
    let src = planted(REMOTE, REMOTE_CTA);
    let b = simulate_src(&src).unwrap_or_else(|(_, text)| panic!("{text}"));
    let a = pattern(DType::F16, ROWS * COLS);
    assert!(b[..a.len()] == a[..] && b[a.len()..] == a[..]);
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("CUDA").source;
    assert!(cuda.contains("mbarrier.arrive.shared::cluster.b64 _, [%0];"), "{cuda}");
    assert!(cuda.contains("tirx_mbarrier_arrive_remote_cta(&empty[s % 2], 1 - rank);"), "{cuda}");
    assert!(!cuda.contains("release.cluster.shared::cluster"), "{cuda}");
}

#[test]
fn a_write_before_a_cta_scope_remote_arrive_is_not_released_to_the_peer() {
    // The consumer also writes its stage before freeing it: a cluster-scope arrive orders that
    // write before the peer's refill, a CTA-scope one only the reads.
    let write = "            T.ptx.fence.proxy.async_.shared__cta()\n";
    let with_write = |arrive: &str| {
        planted(REMOTE, arrive).replacen(
            write,
            &format!("            band[s % STAGES, lane * 2, 0] = T.float16(0)\n{write}"),
            1,
        )
    };
    simulate_src(&with_write(REMOTE)).unwrap_or_else(|(_, text)| panic!("{text}"));
    let (e, text) = simulate_src(&with_write(REMOTE_CTA)).expect_err("the write is not released to the peer");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("a multicast TMA load by thread 0 of CTA rank"), "{text}");
    assert!(e.message.contains("wrote it there"), "{text}");
}

#[test]
fn a_remote_arrives_scope_is_cluster_or_cta_and_only_remote() {
    let errors = |src: &str| tirx_script::parse_kernel("k.py", src).expect_err("a parse error");
    let d = errors(&planted(REMOTE, "                empty.arrive(s % STAGES, cta_id=1 - rank, scope=\"gpu\")\n"));
    assert!(d.iter().any(|d| d.message.contains("`scope=` is \"cluster\" or \"cta\"")), "{d:?}");
    let d = errors(&planted(
        "                empty.arrive(s % STAGES)\n",
        "                empty.arrive(s % STAGES, scope=\"cta\")\n",
    ));
    assert!(d.iter().any(|d| d.message.contains("`scope=` is for a remote arrive")), "{d:?}");
}
