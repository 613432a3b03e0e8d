//! Atomics (`T.cuda.atomic_add(p, v)`, docs/tile-primitives.md §8.11) and `while` loops: values
//! through the simulator (tickets handed out by a counter, a work queue a CTA drains, a counter
//! left at zero by its last taker), what it reports (an atomic racing a plain access, a plain
//! read after unordered atomics without a barrier, a loop that never ends), the front end's
//! and lowering's rules, and the CUDA (`atomicAdd`, bare when its value is unused; `while`).

mod common;
use common::*;
use tirx_sim::SimErrorKind;

/// `grid` CTAs of 64 threads; C (int32 counters, zero), O (int32 outputs) of 64 each.
fn kernel(grid: usize, body: &str) -> String {
    format!(
        "from tvm.script import tirx as T

@T.prim_func
def k(C_ptr: T.handle, O_ptr: T.handle):
    C = T.match_buffer(C_ptr, (64,), \"int32\")
    O = T.match_buffer(O_ptr, (64,), \"int32\")
    T.device_entry()
    bx = T.cta_id([{grid}])
    tid = T.thread_id([64])
{body}"
    )
}

fn params() -> Vec<Vec<u8>> {
    vec![vec![0u8; 256], vec![0u8; 256]]
}

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn sim(src: &str) -> Vec<Vec<i32>> {
    let out = simulate_on(src, params()).unwrap_or_else(|(_, t)| panic!("{t}"));
    out.iter().map(|b| ints(b)).collect()
}

fn sim_err(src: &str) -> (SimErrorKind, String) {
    match simulate_on(src, params()) {
        Ok(_) => panic!("expected a simulator error"),
        Err((e, text)) => (e.kind, text),
    }
}

#[test]
fn every_thread_takes_its_own_ticket() {
    // 2 CTAs × 64 threads take tickets of one global counter: each ticket once.
    let src = kernel(2, "    t = T.cuda.atomic_add(C.ptr_to([0]), 1)\n    if t < 64:\n        O[t] = bx * 64 + tid\n");
    let out = sim(&src);
    assert_eq!(out[0][0], 128);
    let mut seen: Vec<i32> = out[1].clone();
    seen.sort();
    assert_eq!(seen, (0..64).collect::<Vec<i32>>(), "the first 64 takers, each its own slot");
    let l = lower(&src);
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
    assert!(cuda.contains("const int t = atomicAdd(&C[0], 1);"), "{cuda}");
}

#[test]
fn a_dropped_value_is_a_bare_atomic() {
    let src = kernel(3, "    T.cuda.atomic_add(C.ptr_to([tid % 4]), tid)\n");
    let out = sim(&src);
    // Lanes tid ≡ r (mod 4) of 3 CTAs: 3 · Σ (r + 4i), i < 16.
    for r in 0..4 {
        assert_eq!(out[0][r as usize], 3 * (0..16).map(|i| r + 4 * i).sum::<i32>());
    }
    let l = lower(&src);
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
    assert!(cuda.contains("atomicAdd(&C[tid % 4], tid);"), "{cuda}");
    // An unused binding is the bare call too: no dead variable.
    let src = kernel(1, "    t = T.cuda.atomic_add(C.ptr_to([0]), 1)\n");
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("CUDA").source;
    assert!(cuda.contains("    atomicAdd(&C[0], 1);") && !cuda.contains("const int t"), "{cuda}");
}

/// A persistent CTA's queue: thread 0 takes items from a counter until none is left, writes
/// each to shared memory for the CTA, and the last taker leaves the counter at zero.
fn queue(grid: usize, items: usize) -> String {
    kernel(
        grid,
        &format!(
            "    S = T.alloc_buffer((1,), \"int32\", scope=\"shared\")
    if tid == 0:
        S[0] = bx
    T.cuda.cta_sync()
    item = S[0]
    while item < {items}:
        if tid == 0:
            O[item] = O[item] + bx + 1
        T.cuda.cta_sync()
        if tid == 0:
            n = T.cuda.atomic_add(C.ptr_to([0]), 1)
            if n == {items} - 1:
                T.cuda.atomic_add(C.ptr_to([0]), -{items})
            S[0] = n + {grid}
        T.cuda.cta_sync()
        item = S[0]
"
        ),
    )
}

#[test]
fn ctas_drain_a_queue_and_leave_its_counter_at_zero() {
    let src = queue(3, 40);
    let out = sim(&src);
    assert_eq!(out[0][0], 0, "the last taker resets the counter");
    // Every item taken exactly once (by some CTA: O[i] = that CTA + 1).
    assert!(out[1][..40].iter().all(|&v| (1..=3).contains(&v)), "{:?}", out[1]);
    assert!(out[1][40..].iter().all(|&v| v == 0));
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("CUDA").source;
    assert!(cuda.contains("while (item[0] < 40) {"), "{cuda}");
}

#[test]
fn a_plain_access_racing_an_atomic_is_reported() {
    // Thread 0 adds atomically, thread 32 stores: unordered.
    let src = kernel(
        1,
        "    S = T.alloc_buffer((1,), \"int32\", scope=\"shared\")
    if tid == 0:
        S[0] = 0
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.atomic_add(S.ptr_to([0]), 1)
    if tid == 32:
        S[0] = 7
",
    );
    let (kind, text) = sim_err(&src);
    assert_eq!(kind, SimErrorKind::DataRace, "{text}");
    assert!(text.contains("atomically"), "{text}");
}

#[test]
fn atomics_of_several_threads_then_a_read_need_a_cta_barrier() {
    let body = |barrier: &str| {
        format!(
            "    S = T.alloc_buffer((1,), \"int32\", scope=\"shared\")
    if tid == 0:
        S[0] = 0
    T.cuda.cta_sync()
    T.cuda.atomic_add(S.ptr_to([0]), 1)
{barrier}    if tid == 0:
        O[0] = S[0]
"
        )
    };
    // With the barrier: every thread's addition is in.
    let out = sim(&kernel(1, &body("    T.cuda.cta_sync()\n")));
    assert_eq!(out[1][0], 64);
    // Without: thread 0 reads while other threads' atomics are unordered with it.
    let (kind, text) = sim_err(&kernel(1, &body("")));
    assert_eq!(kind, SimErrorKind::DataRace, "{text}");
    // A warp barrier orders the warp's lanes only: the other warp's atomics still race.
    let (kind, text) = sim_err(&kernel(1, &body("    T.cuda.warp_sync()\n")));
    assert_eq!(kind, SimErrorKind::DataRace, "{text}");
}

#[test]
fn a_loop_waiting_for_another_thread_is_reported_not_run_forever() {
    // Thread 0 spins on a flag thread 32 would set: the simulator runs thread 0 first.
    let src = kernel(
        1,
        "    F = T.alloc_buffer((1,), \"int32\", scope=\"local\")
    if tid == 0:
        F[0] = 0
        while F[0] == 0:
            f = T.cuda.atomic_add(C.ptr_to([1]), 0)
            F[0] = f
    if tid == 32:
        T.cuda.atomic_add(C.ptr_to([1]), 1)
",
    );
    let (kind, text) = sim_err(&src);
    assert_eq!(kind, SimErrorKind::Deadlock, "{text}");
    assert!(text.contains("without ending") && text.contains("barrier"), "{text}");
}

#[test]
fn the_front_end_says_what_an_atomic_takes() {
    let cases = [
        (
            "    L = T.alloc_buffer((1,), \"int32\", scope=\"local\")\n    T.cuda.atomic_add(L.ptr_to([0]), 1)\n",
            "local buffer",
        ),
        (
            "    F = T.alloc_buffer((1,), \"float32\", scope=\"shared\")\n    T.cuda.atomic_add(F.ptr_to([0]), 1)\n",
            "atomics take int32, uint32, uint64",
        ),
        ("    x = T.cuda.atomic_add(C.ptr_to([0]), T.float32(1))\n", "adds a float32 value to a int32 element"),
        ("    x = C[0] + T.cuda.atomic_add(C.ptr_to([0]), 1)\n", "not a value inside an expression"),
        ("    T.cuda.atomic_add(C[0], 1)\n", "an element's address"),
        ("    while True:\n        O[0] = 1\n", "compile-time value"),
        ("    x: T.float32 = T.cuda.atomic_add(C.ptr_to([0]), 1)\n", "returns int32, not float32"),
        (
            "    x = 0\n    x = T.cuda.atomic_add(C.ptr_to([0]), 1)\n",
            "binds a new name; the kernel assigns `x` elsewhere too",
        ),
    ];
    for (body, want) in cases {
        let src = kernel(1, body);
        let text = match tirx_script::parse_kernel("k.py", &src) {
            Err(d) => render(&d, &src),
            Ok(_) => render(&lower_errors(&src), &src),
        };
        assert!(text.contains(want), "{body}\n{text}");
    }
}

#[test]
fn a_while_loop_of_a_mutable_scalar_counts() {
    // Collatz steps of 27: a loop whose trip count only the data says.
    let src = kernel(
        1,
        "    if tid == 0:
        x = 27
        n = 0
        while x != 1:
            if x % 2 == 0:
                x = x // 2
            else:
                x = 3 * x + 1
            n = n + 1
        O[0] = n
",
    );
    let out = sim(&src);
    assert_eq!(out[1][0], 111);
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("CUDA").source;
    assert!(cuda.contains("while ("), "{cuda}");
}

#[test]
fn a_remainder_of_data_bounds_an_index() {
    // A loaded value taken modulo a constant, directly or through a `let`, is proven inside
    // [0, n): no warning, and no launch check; a `let` of data alone is not.
    for (bind, want) in
        [("r = row % 64", 0), ("r0 = row\n        r = r0 % 64", 0), ("r = T.max(T.min(row, 63), 0)", 0), ("r = row", 1)]
    {
        let src = kernel(
            1,
            &format!(
                "    row = C[0]
    while row < 64:
        {bind}
        O[r] = r
        row = row + 64
"
            ),
        );
        let l = lower(&src);
        assert_eq!(l.warnings.len(), want, "{bind}: {}", render(&l.warnings, &src));
    }
}
