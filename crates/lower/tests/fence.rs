//! GPU-scope fences (`T.cuda.thread_fence()`, docs/tile-primitives.md §8.11): the "last CTA"
//! reduction in one launch — every CTA writes its part, meets at a barrier, one thread fences
//! and takes a ticket; the CTA whose ticket is the last fences again and reads every part —
//! through the simulator (values, the counter left at zero), every missing step of it reported
//! as a race, the front end's rules and the CUDA (`__threadfence()`).

mod common;
use common::*;
use tirx_sim::SimErrorKind;

const GRID: usize = 4;

/// `GRID` CTAs of 64 threads: C (one int32 counter), P (each CTA's part: 64 int32), O (64
/// int32: the sum of the parts). `steps` are the kernel's ordering steps, each kept or not:
/// the barrier after the parts' writes, the release fence, the acquire fence.
fn last_cta_sum(barrier: bool, release: bool, acquire: bool) -> String {
    let line = |keep: bool, s: &str| if keep { s.to_string() } else { String::new() };
    format!(
        "from tvm.script import tirx as T

@T.prim_func
def k(C_ptr: T.handle, P_ptr: T.handle, O_ptr: T.handle):
    C = T.match_buffer(C_ptr, (1,), \"int32\")
    P = T.match_buffer(P_ptr, ({GRID}, 64), \"int32\")
    O = T.match_buffer(O_ptr, (64,), \"int32\")
    T.device_entry()
    bx = T.cta_id([{GRID}])
    tid = T.thread_id([64])
    S = T.alloc_buffer((1,), \"int32\", scope=\"shared\")
    acc = T.alloc_buffer((1,), \"int32\", scope=\"local\")
    P[bx, tid] = (bx + 1) * tid
{}    if tid == 0:
{}        n = T.cuda.atomic_add(C.ptr_to([0]), 1)
{}        S[0] = n
    T.cuda.cta_sync()
    if S[0] == {GRID} - 1:
        acc[0] = 0
        for c in T.serial({GRID}):
            acc[0] = acc[0] + P[c, tid]
        O[tid] = acc[0]
        if tid == 0:
            T.cuda.atomic_add(C.ptr_to([0]), -{GRID})
",
        line(barrier, "    T.cuda.cta_sync()\n"),
        line(release, "        T.cuda.thread_fence()\n"),
        line(acquire, "        T.cuda.thread_fence()\n"),
    )
}

fn params() -> Vec<Vec<u8>> {
    vec![vec![0u8; 4], vec![0u8; GRID * 256], vec![0u8; 256]]
}

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn the_last_cta_reads_every_part_after_fences() {
    let src = last_cta_sum(true, true, true);
    let out = simulate_on(&src, params()).unwrap_or_else(|(_, t)| panic!("{t}"));
    assert_eq!(ints(&out[0]), [0], "the last CTA leaves the counter at zero");
    let want: Vec<i32> = (0..64).map(|t| t * (GRID * (GRID + 1) / 2) as i32).collect();
    assert_eq!(ints(&out[2]), want);
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("CUDA").source;
    assert!(
        cuda.contains("__threadfence();\n        const int n = atomicAdd(&C[0], 1);\n        __threadfence();"),
        "{cuda}"
    );
}

#[test]
fn each_missing_step_is_a_race() {
    for (barrier, release, acquire, why) in [
        (false, true, true, "no barrier: the fence releases thread 0's writes only"),
        (true, false, true, "no release fence"),
        (true, true, false, "no acquire fence"),
        (true, false, false, "no fence at all"),
    ] {
        match simulate_on(&last_cta_sum(barrier, release, acquire), params()) {
            Ok(_) => panic!("{why}: expected a race"),
            Err((e, text)) => {
                assert_eq!(e.kind, SimErrorKind::DataRace, "{why}: {text}");
                assert!(text.contains("`P`") && text.contains("CTAs of one launch are not ordered"), "{why}: {text}");
                assert!(text.contains("T.cuda.thread_fence()"), "{why}: the help names the fix: {text}");
            }
        }
    }
}

#[test]
fn a_write_after_the_fence_is_not_released() {
    // Thread 0 writes its part after its release: the last CTA's read of it races.
    let src = last_cta_sum(true, true, true).replace(
        "        n = T.cuda.atomic_add(C.ptr_to([0]), 1)\n",
        "        P[bx, 0] = 7\n        n = T.cuda.atomic_add(C.ptr_to([0]), 1)\n",
    );
    let err = simulate_on(&src, params()).expect_err("a race");
    assert_eq!(err.0.kind, SimErrorKind::DataRace, "{}", err.1);
}

#[test]
fn a_fence_takes_nothing_and_returns_nothing() {
    let base = last_cta_sum(true, true, true);
    for (from, to, want) in [
        (
            "        T.cuda.thread_fence()\n        n =",
            "        T.cuda.thread_fence(1)\n        n =",
            "a fence takes no arguments",
        ),
        ("        T.cuda.thread_fence()\n        n =", "        f = T.cuda.thread_fence()\n        n =", "a fence"),
    ] {
        let src = base.replacen(from, to, 1);
        assert_ne!(src, base);
        let text = match tirx_script::parse_kernel("k.py", &src) {
            Err(d) => render(&d, &src),
            Ok(_) => render(&lower_errors(&src), &src),
        };
        assert!(text.contains(want) && text.contains("k.py:"), "{want}: {text}");
    }
}

#[test]
fn a_fence_prints_and_parses_back() {
    let src = last_cta_sum(true, true, true);
    let k = tirx_script::parse_kernel("k.py", &src).expect("parses");
    let printed = tirx_script::print_kernel(&k);
    assert_eq!(printed.matches("T.cuda.thread_fence()").count(), 2, "{printed}");
    tirx_script::parse_kernel("printed.py", &printed).expect("the printed kernel parses");
}
