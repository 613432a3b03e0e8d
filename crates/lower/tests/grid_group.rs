//! Grid group barriers (`T.cuda.grid_group_sync(word, size)`, docs/tile-primitives.md §8.10): the
//! CTAs of a cooperative grid meeting on a global word — values through the simulator (which
//! runs the whole grid together), the races it reports (a partial read from a CTA of another
//! group, a slot rewritten before its readers passed the next phase), transitive ordering
//! through chains of phases, its reports (a group that never fills, a size above the grid, two
//! sizes in one phase, a word not zero, threads disagreeing on the word, `--grid-limit`), threads
//! meeting it at different instructions (a kernel's roles, each in its branch), the
//! front end's and lowering's rules, and the CUDA (the helper, the cooperative launch flag).

mod common;
use common::*;
use tirx_sim::{SimErrorKind, SimOptions};

/// `grid` CTAs of 32 threads; P (partials, float32), S (results), W (words, zero) of 8 each.
fn kernel(grid: usize, body: &str) -> String {
    format!(
        "from tvm.script import tirx as T

@T.prim_func
def k(P_ptr: T.handle, S_ptr: T.handle, W_ptr: T.handle):
    P = T.match_buffer(P_ptr, (8,), \"float32\")
    S = T.match_buffer(S_ptr, (8,), \"float32\")
    W = T.match_buffer(W_ptr, (8,), \"int32\")
    T.device_entry()
    bx = T.cta_id([{grid}])
    tid = T.thread_id([32])
{body}"
    )
}

fn params() -> Vec<Vec<u8>> {
    vec![vec![0u8; 32], vec![0u8; 32], vec![0u8; 32]]
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Each CTA of a group of `g` writes its partial, meets its group, sums the group's partials.
fn group_sum(grid: usize, g: usize, word: &str) -> String {
    kernel(
        grid,
        &format!(
            "    if tid == 0:
        P[bx] = T.cast(bx + 1, \"float32\")
    T.cuda.grid_group_sync(W.ptr_to([{word}]), {g})
    if tid == 0:
        acc = T.float32(0)
        for i in range({g}):
            acc = acc + P[bx // {g} * {g} + i]
        S[bx] = acc
"
        ),
    )
}

#[test]
fn groups_exchange_partials_through_global_memory() {
    let src = group_sum(6, 3, "bx // 3");
    let l = lower(&src);
    assert!(l.lir.cooperative());
    let out = simulate_on(&src, params()).unwrap_or_else(|(_, t)| panic!("{t}"));
    assert_eq!(floats(&out[1])[..6], [6.0, 6.0, 6.0, 15.0, 15.0, 15.0]);
    // One phase each: the words' count is back to 0, the top bit flipped.
    assert_eq!(words(&out[2])[..3], [0x8000_0000, 0x8000_0000, 0]);
    // The CUDA: the helper, the call on the word, and the launch metadata's cooperative flag.
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA");
    assert!(cuda.meta.cooperative);
    assert!(cuda.source.contains("atom.add.acq_rel.gpu.global.u32"), "{}", cuda.source);
    assert!(
        cuda.source.contains("tirx_grid_group_sync(reinterpret_cast<unsigned*>(&W[bx / 3]), 3);"),
        "{}",
        cuda.source
    );
}

#[test]
fn a_partial_of_another_group_is_a_race() {
    let src = group_sum(6, 3, "bx // 3").replace("P[bx // 3 * 3 + i]", "P[(bx + 3) % 6 // 3 * 3 + i]");
    let (e, text) = simulate_on(&src, params()).expect_err("a race");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("no grid group barrier orders the two"), "{text}");
    assert!(e.help.as_deref().is_some_and(|h| h.contains("T.cuda.grid_group_sync")), "{text}");
}

/// Three rounds: each CTA writes its slot, meets the group, reads its neighbour's slot; with
/// `tail`, meets the group again before the slot is rewritten.
fn rounds(tail: &str) -> String {
    kernel(
        4,
        &format!(
            "    for it in range(3):
        if tid == 0:
            P[bx] = T.float32(it * 10) + T.cast(bx, \"float32\")
        T.cuda.grid_group_sync(W.ptr_to([0]), 4)
        if tid == 0:
            S[bx] = S[bx] + P[(bx + 1) % 4]
{tail}"
        ),
    )
}

#[test]
fn a_slot_rewritten_before_its_readers_met_again_is_a_race() {
    let src = rounds("        T.cuda.grid_group_sync(W.ptr_to([0]), 4)\n");
    let out = simulate_on(&src, params()).unwrap_or_else(|(_, t)| panic!("{t}"));
    assert_eq!(floats(&out[1])[..4], [33.0, 36.0, 39.0, 30.0]);
    assert_eq!(words(&out[2])[0], 0, "six phases: the top bit flipped back");
    let (e, text) = simulate_on(&rounds(""), params()).expect_err("a race");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
    assert!(e.message.contains("`P`") && e.message.contains("writes it"), "{text}");
}

#[test]
fn phases_order_transitively() {
    // CTA 0 writes P[0]; it meets CTA 1 on W[0]; CTA 1 then meets CTA 2 on W[1]; CTA 2 reads
    // P[0]: ordered through CTA 1, which passed both phases.
    let body = "    if bx == 0:
        if tid == 0:
            P[0] = T.float32(7)
    if bx < 2:
        T.cuda.grid_group_sync(W.ptr_to([0]), 2)
    if bx > 0:
        T.cuda.grid_group_sync(W.ptr_to([1]), 2)
    if bx == 2:
        if tid == 0:
            S[0] = P[0]
";
    let out = simulate_on(&kernel(3, body), params()).unwrap_or_else(|(_, t)| panic!("{t}"));
    assert_eq!(floats(&out[1])[0], 7.0);
    // Without CTA 1's second phase, CTA 2 meets nobody who saw the write: a race... and a hang
    // first (the phase on W[1] needs 2 CTAs), so let CTA 2 meet CTA 1 before CTA 1 met CTA 0.
    let body = body.replace("    if bx < 2:\n        T.cuda.grid_group_sync(W.ptr_to([0]), 2)\n    if bx > 0:\n        T.cuda.grid_group_sync(W.ptr_to([1]), 2)\n", "    if bx > 0:\n        T.cuda.grid_group_sync(W.ptr_to([1]), 2)\n    if bx < 2:\n        T.cuda.grid_group_sync(W.ptr_to([0]), 2)\n");
    let (e, text) = simulate_on(&kernel(3, &body), params()).expect_err("a race");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
}

#[test]
fn the_simulators_reports() {
    let err = |src: String, p: Vec<Vec<u8>>| simulate_on(&src, p).expect_err("an error");
    // A group that never fills: 3 of the 4 CTAs a phase needs.
    let (e, text) =
        err(group_sum(6, 3, "bx // 3").replace("W.ptr_to([bx // 3]), 3)", "W.ptr_to([bx // 3]), 4)"), params());
    assert_eq!(e.kind, SimErrorKind::Deadlock, "{text}");
    assert!(e.message.contains("never completes") && e.message.contains("3 of its 4 CTAs"), "{text}");
    // More CTAs than the grid has.
    let (e, text) = err(group_sum(6, 3, "0").replace("W.ptr_to([0]), 3)", "W.ptr_to([0]), 7)"), params());
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{text}");
    assert!(e.message.contains("of 7 CTAs; the grid has 6"), "{text}");
    // Two sizes in one phase.
    let (e, text) = err(group_sum(6, 3, "0").replace("W.ptr_to([0]), 3)", "W.ptr_to([0]), 3 + bx % 2)"), params());
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{text}");
    assert!(e.message.contains("where the CTAs before it in this phase meet"), "{text}");
    // A word whose count is not 0.
    let mut p = params();
    p[2][..4].copy_from_slice(&5u32.to_le_bytes());
    let (e, text) = err(group_sum(6, 3, "bx // 3"), p);
    assert!(e.message.contains("holds 0x5 at its first use"), "{text}");
    // Threads of one CTA on different words.
    let (e, text) =
        err(group_sum(6, 3, "bx // 3").replace("W.ptr_to([bx // 3])", "W.ptr_to([bx // 3 + tid % 2 * 4])"), params());
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{text}");
    assert!(e.message.contains("different operands"), "{text}");
    // A cooperative grid runs whole.
    let src = group_sum(6, 3, "bx // 3");
    let l = lower(&src);
    let opts = SimOptions { grid_limit: Some(3), ..SimOptions::default() };
    let e = tirx_sim::simulate(&l.lir, &mut params(), &opts).expect_err("grid limit");
    assert!(e.message.contains("runs whole: --grid-limit 3 is below its 6 CTAs"), "{}", e.message);
}

#[test]
fn the_word_is_a_global_int32_outside_clusters() {
    let src = group_sum(6, 3, "bx // 3")
        .replace("W = T.match_buffer(W_ptr, (8,), \"int32\")", "W = T.match_buffer(W_ptr, (8,), \"float32\")");
    let Err(d) = tirx_script::parse_kernel("k.py", &src) else { panic!("a float word parsed") };
    assert!(d[0].message.contains("cannot hold a grid group barrier"), "{}", render(&d, &src));
    let src = group_sum(6, 3, "bx // 3")
        .replace("    tid = T.thread_id([32])", "    rank = T.cta_id_in_cluster([2])\n    tid = T.thread_id([32])");
    let d = lower_errors(&src);
    assert!(d[0].message.contains("a grid group barrier in a kernel launched in clusters"), "{}", render(&d, &src));
}

/// Two warps a CTA, each meeting the barrier in its own branch (a warp-specialised kernel's
/// roles): `split` the condition that picks the branch.
fn roles(split: &str) -> String {
    let body = "    if SPLIT:
        if tid == 0:
            P[bx] = T.cast(bx + 1, \"float32\")
        T.cuda.grid_group_sync(W.ptr_to([0]), 4)
    else:
        T.cuda.grid_group_sync(W.ptr_to([0]), 4)
        if tid == 32:
            S[bx] = P[(bx + 1) % 4]
";
    kernel(4, &body.replace("SPLIT", split)).replace("T.thread_id([32])", "T.thread_id([64])")
}

#[test]
fn threads_meet_the_barrier_at_their_own_instructions() {
    // Warp 0 writes before its barrier instruction, warp 1 reads another CTA's after its own; then
    // the lanes of one warp split between the two (the CTA barriers are not `.aligned`).
    for split in ["tid < 32", "tid < 16"] {
        let src = roles(split);
        let out = simulate_on(&src, params()).unwrap_or_else(|(_, t)| panic!("{t}"));
        assert_eq!(floats(&out[1])[..4], [2.0, 3.0, 4.0, 1.0], "{split}");
    }
    let cuda = tirx_cuda::generate(&lower(&roles("tid < 32")).lir).expect("CUDA");
    assert_eq!(cuda.source.matches("asm volatile(\"barrier.sync 0;\" ::: \"memory\");").count(), 2, "{}", cuda.source);
    assert!(!cuda.source.contains("__syncthreads"), "{}", cuda.source);
}
