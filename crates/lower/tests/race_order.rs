//! The race checker does not depend on the order the simulator runs warps in (issue 27
//! defect 9): each kernel gets the same verdict — the same race, or no race and the same
//! output bytes — under the ascending order and under pseudo-random warp orders drawn
//! afresh at every round of the scheduler. The kernels: the examples that pipeline through
//! shared memory, and racy variants of them (a cp.async refill issued before the barrier
//! that orders the other warps' reads of its stage, a shared write read by another warp
//! without a barrier).

mod common;
use common::*;
use proptest::prelude::*;
use std::path::PathBuf;
use tirx_sim::{SimErrorKind, SimOptions};

fn example(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The pipelined GEMM with its refill moved above the barrier: the refill overwrites the
/// stage the other warps read in the previous iteration, with nothing ordering them.
fn refill_before_barrier() -> String {
    let s = example("gemm_mma_pipelined.py");
    let fixed = "        T.ptx.cp_async.wait_group(STAGES - 2)\n        T.cuda.cta_sync()\n";
    assert!(s.contains(fixed));
    s.replace(fixed, "        T.ptx.cp_async.wait_group(STAGES - 2)\n").replace(
        "        T.ptx.cp_async.commit_group()\n        Tx.warp.copy(A_f",
        "        T.ptx.cp_async.commit_group()\n        T.cuda.cta_sync()\n        Tx.warp.copy(A_f",
    )
}

/// Warp 1 reads what warp 0 wrote to shared memory, with no barrier between.
const NO_BARRIER: &str = r#"from tvm.script import tirx as T

@T.prim_func
def no_barrier(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), "float32")
    B = T.match_buffer(B_ptr, (64,), "float32")
    T.device_entry()
    T.cta_id([1])
    t = T.thread_id([64])
    S = T.alloc_buffer((64,), "float32", scope="shared")
    S[t] = A[t]
    B[t] = S[63 - t]
"#;

/// `(name, source, whether it races)`.
fn kernels() -> Vec<(&'static str, String, bool)> {
    let mut out: Vec<(&'static str, String, bool)> = [
        "gemm_mma_pipelined.py",
        "copy_double_buffer.py",
        "ewise_smem_pipeline.py",
        "reduce_shared_cta.py",
        "collective_warp_cta.py",
        "reduce_warpgroup_shared.py",
    ]
    .into_iter()
    .map(|f| (f, example(f), false))
    .collect();
    out.push(("refill_before_barrier", refill_before_barrier(), true));
    out.push(("no_barrier", NO_BARRIER.to_string(), true));
    out
}

/// The verdict under `seed`: the race's kind and message, or the output bytes.
fn verdict(src: &str, seed: Option<u64>) -> Result<Vec<Vec<u8>>, String> {
    let k = parse(src);
    let l = tirx_lower::lower_kernel(&k, &Default::default()).expect("lowers");
    let mut params: Vec<Vec<u8>> =
        l.lir.params.iter().map(|p| pattern(l.lir.buf(*p).dtype, l.lir.buf(*p).elems as usize)).collect();
    let opts = SimOptions { grid_limit: Some(1), warp_order_seed: seed, ..Default::default() };
    match tirx_sim::simulate(&l.lir, &mut params, &opts) {
        Ok(_) => Ok(params),
        Err(e) if e.kind == SimErrorKind::DataRace => Err("data race".into()),
        Err(e) => Err(format!("{:?}: {}", e.kind, e.message)),
    }
}

#[test]
fn the_racy_variants_race_in_ascending_order() {
    for (name, src, races) in kernels() {
        let v = verdict(&src, None);
        assert_eq!(v.is_err(), races, "{name}: {:?}", v.err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn every_warp_order_gets_the_same_verdict(seed in any::<u64>()) {
        for (name, src, _) in kernels() {
            let base = verdict(&src, None);
            let other = verdict(&src, Some(seed));
            prop_assert!(base == other, "{name}: ascending {:?}, seed {seed} {:?}", base.as_ref().err(), other.as_ref().err());
        }
    }
}
