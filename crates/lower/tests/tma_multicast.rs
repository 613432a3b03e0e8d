//! Multicast TMA loads (`cta_mask=`, docs/tile-primitives.md §3.20, §8.8): in 2- and
//! 4-CTA clusters each CTA loads one slice of its cluster's tile with the mask of
//! every CTA, and every CTA receives the whole tile (its mbarrier expects the whole
//! tile's bytes) — value-checked in the simulator for `tma_auto` and `tma_explicit`;
//! the simulator's reports of a barrier expecting too few bytes, a read before the
//! wait (a CTA barrier does not stand in for it), a run-time mask naming a CTA outside the cluster and a multicast before the
//! peers initialised their barriers (or after, with only a CTA barrier between); the `cta_mask` rules as
//! named declines; the CUDA's `.multicast::cluster`.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::CopyAsyncRule;
use tirx_sim::{SimError, SimErrorKind, SimOptions};

/// Rows of a cluster's tile and its columns (f16: 64 × 64, 8 KiB).
const TM: usize = 64;
const TN: usize = 64;
const TILE_BYTES: usize = TM * TN * 2;

struct Mc {
    cluster: usize,
    grid: usize,
    variant: &'static str,
    /// Bytes each CTA's barrier expects.
    expect: usize,
    wait: bool,
    mask: String,
}

impl Mc {
    fn new(cluster: usize, variant: &'static str) -> Mc {
        Mc { cluster, grid: 8, variant, expect: TILE_BYTES, wait: true, mask: format!("{}", (1 << cluster) - 1) }
    }

    /// Cluster `q` (CTAs `q·c .. q·c + c`) loads rows `q·TM ..` of A: CTA rank `r` issues
    /// rows `r·R .. (r + 1)·R` of the tile to every CTA of the mask; each CTA then
    /// writes the tile it received to its own rows of B.
    fn script(&self) -> String {
        let (c, g, v) = (self.cluster, self.grid, self.variant);
        let rows = TM / c;
        let a_rows = g / c * TM;
        let wait = if self.wait { "    bar.wait(0, 0)\n" } else { "" };
        format!(
            "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def mcast(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({a_rows}, {TN}), \"float16\")
    B = T.match_buffer(B_ptr, ({g} * {TM}, {TN}), \"float16\")
    T.device_entry()
    bx = T.cta_id([{g}])
    rank = T.cta_id_in_cluster([{c}])
    tid = T.thread_id([128])
    pool = T.SMEMPool()
    S_ = pool.alloc(({TM}, {TN}), \"float16\")
    bar = MBarrier(pool, 1)
    pool.commit()
    bar.init(1)
    T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cluster_sync()
    q = bx // {c}
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), {expect})
        Tx.copy_async(S_[rank * {rows} : rank * {rows} + {rows}, 0:{TN}], A[q * {TM} + rank * {rows} : q * {TM} + rank * {rows} + {rows}, 0:{TN}], dispatch=\"{v}\", mbar=bar.ptr_to([0]), cta_mask={mask})
{wait}    Tx.cta.copy(B[bx * {TM} : bx * {TM} + {TM}, 0:{TN}], S_[0:{TM}, 0:{TN}])
",
            expect = self.expect,
            mask = self.mask
        )
    }

    fn run(&self) -> Result<(Vec<u8>, Vec<u8>), SimError> {
        let src = self.script();
        let k = parse(&src);
        let l = tirx_lower::lower_kernel(&k, &Default::default())
            .unwrap_or_else(|d| panic!("lowering failed:\n{}", render(&d, &src)));
        let a = pattern(DType::F16, self.grid / self.cluster * TM * TN);
        let mut params = vec![a.clone(), vec![0u8; self.grid * TM * TN * 2]];
        tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default())?;
        Ok((a, params.pop().unwrap_or_default()))
    }

    /// Every CTA of every cluster holds its cluster's whole tile.
    fn expect_tiles(&self) {
        let src = self.script();
        lower(&src);
        let (a, b) = self.run().unwrap_or_else(|e| panic!("{}", render(&[e.to_diagnostic()], &src)));
        let tile = TM * TN * 2;
        for cta in 0..self.grid {
            let q = cta / self.cluster;
            assert!(
                b[cta * tile..(cta + 1) * tile] == a[q * tile..(q + 1) * tile],
                "CTA {cta} (cluster of {}, {}) did not receive its cluster's tile",
                self.cluster,
                self.variant
            );
        }
    }

    fn error(&self) -> (SimError, String) {
        let src = self.script();
        let e = self.run().expect_err("the simulator must fail");
        let text = render(&[e.to_diagnostic()], &src);
        (e, text)
    }
}

#[test]
fn every_cta_of_a_2_and_4_cta_cluster_receives_the_whole_tile() {
    for c in [2, 4] {
        for v in ["tma_auto", "tma_explicit"] {
            Mc::new(c, v).expect_tiles();
        }
    }
}

#[test]
fn the_cuda_multicasts_in_a_cluster_kernel() {
    let l = lower(&Mc::new(4, "tma_auto").script());
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("__cluster_dims__(4, 1, 1)"), "{cuda}");
    assert!(
        cuda.contains("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"),
        "{cuda}"
    );
    assert!(cuda.contains("tirx_tma_load_2d_multicast("), "{cuda}");
    let text = l.lir.to_string();
    assert!(text.contains("multicast=15"), "{text}");
    let c = call(&l, 0);
    assert!(c.render().contains("multicast"), "{}", c.render());
}

#[test]
fn a_barrier_expecting_only_its_own_slice_is_reported() {
    let mut m = Mc::new(2, "tma_auto");
    m.expect = TILE_BYTES / 2;
    // CTA 0's phase completes on its own slice and its threads read the tile; the
    // peer's slice then lands on rows they read.
    let (e, text) = m.error();
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`S_`") && e.message.contains("multicast TMA load by thread 0 of CTA rank 1"), "{text}");
}

#[test]
fn reading_the_tile_before_the_wait_is_a_race() {
    let mut m = Mc::new(2, "tma_auto");
    m.wait = false;
    let (e, text) = m.error();
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`S_`"), "{text}");
}

#[test]
fn a_run_time_mask_naming_a_cta_outside_the_cluster_is_reported() {
    let mut m = Mc::new(2, "tma_auto");
    m.mask = "3 << rank".into();
    let (e, text) = m.error();
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{text}");
    assert!(e.message.contains("cta_mask 0x6") && e.message.contains("the cluster has 2 CTAs"), "{text}");
}

#[test]
fn a_multicast_before_the_peers_initialised_their_barriers_is_reported() {
    let m = Mc::new(2, "tma_auto");
    let src = m.script().replacen("    T.cuda.cluster_sync()\n", "", 1);
    let l = tirx_lower::lower_kernel(&parse(&src), &Default::default()).expect("lowers");
    let mut params = vec![pattern(DType::F16, 4 * TM * TN), vec![0u8; 8 * TM * TN * 2]];
    let e = tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).expect_err("must fail");
    let text = render(&[e.to_diagnostic()], &src);
    assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
    assert!(e.message.contains("of CTA rank 1, which is not initialised"), "{text}");
}

/// A 2-CTA cluster where only rank 1 issues the whole tile to both CTAs (each expects it).
fn rank_1_multicasts_the_tile() -> String {
    let src = Mc::new(2, "tma_auto").script();
    let one = src.replace(
        "        Tx.copy_async(S_[rank * 32 : rank * 32 + 32, 0:64], A[q * 64 + rank * 32 : q * 64 + rank * 32 + 32, 0:64],",
        "        if rank == 1:\n            Tx.copy_async(S_[0:64, 0:64], A[q * 64 : q * 64 + 64, 0:64],",
    );
    assert_ne!(one, src);
    one
}

fn simulate_src(src: &str) -> Result<Vec<u8>, (SimError, String)> {
    let params = vec![pattern(DType::F16, 4 * TM * TN), vec![0u8; 8 * TM * TN * 2]];
    simulate_on(src, params).map(|mut p| p.pop().unwrap_or_default())
}

#[test]
fn a_multicast_into_a_peer_whose_init_no_cluster_barrier_ordered_is_reported() {
    // With the cluster barrier after the inits, every CTA receives the tile.
    let src = rank_1_multicasts_the_tile();
    let b = simulate_src(&src).unwrap_or_else(|(_, text)| panic!("{text}"));
    let a = pattern(DType::F16, 4 * TM * TN);
    for cta in 0..8 {
        assert!(b[cta * TILE_BYTES..(cta + 1) * TILE_BYTES] == a[cta / 2 * TILE_BYTES..(cta / 2 + 1) * TILE_BYTES]);
    }
    // A CTA barrier orders rank 0's init with rank 0's threads only, not with rank 1's copy.
    let src = src.replacen("    T.cuda.cluster_sync()\n", "    T.cuda.cta_sync()\n", 1);
    let (e, text) = simulate_src(&src).expect_err("rank 0's init is not ordered before the multicast");
    assert_eq!(e.kind, SimErrorKind::Mbarrier, "{text}");
    assert!(
        e.message.contains("thread 0 of CTA rank 1 completes on `bar[0]` of CTA rank 0")
            && e.message.contains("not initialised before a cluster barrier"),
        "{text}"
    );
}

/// The rule `variant` declined the copy_async of `src` by.
fn declined(src: &str, variant: &str) -> Rule {
    let (explain, _) = tirx_lower::explain_kernel(&parse(src), &Default::default());
    let c = explain.iter().find(|c| c.tried.iter().any(|t| t.variant == variant)).expect("the copy_async call");
    rule(c, variant)
}

#[test]
fn cta_mask_rules_are_named_declines() {
    let base = Mc::new(2, "tma_auto").script();
    let no_cluster = base.replace("    rank = T.cta_id_in_cluster([2])\n", "    rank = bx % 2\n");
    let cases = [
        (base.replace("cta_mask=3", "cta_mask=7"), CopyAsyncRule::CtaMask),
        (base.replace("cta_mask=3", "cta_mask=1.5"), CopyAsyncRule::CtaMask),
        (no_cluster.clone(), CopyAsyncRule::Cluster),
    ];
    for (src, want) in cases {
        for v in ["tma_auto", "tma_explicit"] {
            let src = src.replace("tma_auto", v);
            assert_eq!(declined(&src, v), want, "{v}\n{src}");
        }
    }
    // The reference's default: `cta_mask=0` is a plain load, in any launch.
    let unicast = no_cluster.replace("cta_mask=3", "cta_mask=0");
    let l = tirx_lower::lower_kernel(&parse(&unicast), &Default::default()).expect("cta_mask=0 lowers");
    assert!(!l.lir.to_string().contains("multicast"));
}

#[test]
fn a_store_takes_no_cta_mask() {
    // A TMA store of the tile with a mask: `direction`.
    let src = Mc::new(2, "tma_auto").script();
    let store = src.replace(
        "    Tx.cta.copy(B[bx * 64 : bx * 64 + 64, 0:64], S_[0:64, 0:64])\n",
        "    T.ptx.fence.proxy.async_.shared__cta()\n    if tid == 0:\n        Tx.copy_async(B[bx * 64 : bx * 64 + 64, 0:64], S_[0:64, 0:64], dispatch=\"tma_explicit\", cta_mask=3)\n",
    );
    assert_ne!(store, src);
    let (explain, _) = tirx_lower::explain_kernel(&parse(&store), &Default::default());
    let c = explain.iter().rfind(|c| c.tried.iter().any(|t| t.variant == "tma_explicit")).expect("the store");
    assert_eq!(rule(c, "tma_explicit"), CopyAsyncRule::Direction);
}

// ---------------------------------------------------------------------------
// A CTA barrier in a receiving CTA does not complete a multicast landing there:
// only the mbarrier phase it completes on does, for the threads that waited for it
// (and, through the CTA barrier, for the threads ordered after a waiter).
// ---------------------------------------------------------------------------

const WAIT: &str = "    bar.wait(0, 0)\n";

#[test]
fn one_waiter_and_a_cta_barrier_hand_the_multicast_tile_to_every_thread() {
    let one_waits = "    if tid == 0:\n        bar.wait(0, 0)\n    T.cuda.cta_sync()\n";
    for src in [Mc::new(2, "tma_auto").script(), rank_1_multicasts_the_tile()] {
        let src = src.replacen(WAIT, one_waits, 1);
        assert!(src.contains(one_waits));
        lower(&src);
        let b = simulate_src(&src).unwrap_or_else(|(_, text)| panic!("{text}"));
        let a = pattern(DType::F16, 4 * TM * TN);
        for cta in 0..8 {
            let q = cta / 2;
            assert!(
                b[cta * TILE_BYTES..(cta + 1) * TILE_BYTES] == a[q * TILE_BYTES..(q + 1) * TILE_BYTES],
                "CTA {cta}"
            );
        }
    }
}

#[test]
fn a_cta_barrier_without_an_mbarrier_wait_does_not_order_a_multicast_landing() {
    // Every CTA multicasts its slice; the CTA barrier replaces the wait.
    let src = Mc::new(2, "tma_auto").script().replacen(WAIT, "    T.cuda.cta_sync()\n", 1);
    let (e, text) = simulate_src(&src).expect_err("a race");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`S_`"), "{text}");
    // Rank 1 multicasts the whole tile; in rank 0 only, thread 0 reads one element after
    // the CTA barrier. Rank 0 runs first, so the read comes before the multicast, which
    // lands on it unordered (thread 0 of rank 1 is not thread 0 of rank 0).
    let src = rank_1_multicasts_the_tile().replacen(
        &format!("{WAIT}    Tx.cta.copy(B[bx * 64 : bx * 64 + 64, 0:64], S_[0:64, 0:64])\n"),
        "    T.cuda.cta_sync()\n    if rank == 0:\n        if tid == 0:\n            B[bx * 64, 0] = S_[0, 0]\n",
        1,
    );
    assert!(src.contains("B[bx * 64, 0] = S_[0, 0]"));
    let (e, text) = simulate_src(&src).expect_err("a race");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(
        e.message.contains("`S_`")
            && e.message.contains("a multicast TMA load by thread 0 of CTA rank 1 writes it into CTA (0, 0, 0)")
            && e.message.contains("no cluster barrier (or chain of exchanges) orders that before the copy"),
        "{text}"
    );
    assert!(e.labels.iter().any(|(s, _)| src[s.lo as usize..].starts_with("B[bx * 64, 0] = S_[0, 0]")), "{text}");
}
