//! Programmatic dependent launch (`T.ptx.griddepcontrol.wait()` / `.launch_dependents()`,
//! docs/tile-primitives.md §9): a kernel that waits for the kernel before it on the stream is
//! launched as its dependent (`LaunchMeta::dependent`), so no thread may touch global memory
//! before its own wait — the simulator reports every such access — and the CUDA is the two
//! instructions.

mod common;
use common::*;
use tirx_ir::Arch;
use tirx_lower::LowerOptions;
use tirx_sim::SimErrorKind;

/// 64 threads: B = 2 A, each thread's element read and written after its wait (`before`: a
/// statement put before the wait instead), then the next kernel let in.
fn doubling(before: &str) -> String {
    format!(
        "from tvm.script import tirx as T

@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), \"float32\")
    B = T.match_buffer(B_ptr, (64,), \"float32\")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([64])
    S = T.alloc_buffer((64,), \"float32\", scope=\"shared\")
    S[tid] = 1.0
{before}    T.ptx.griddepcontrol.wait()
    B[tid] = A[tid] * 2.0 * S[tid]
    T.ptx.griddepcontrol.launch_dependents()
"
    )
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn params() -> Vec<Vec<u8>> {
    let a: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    vec![a, vec![0u8; 256]]
}

#[test]
fn a_dependent_kernel_reads_and_writes_after_its_wait() {
    let src = doubling("");
    let l = lower(&src);
    assert!(l.lir.dependent(), "a kernel with griddepcontrol.wait is launched as a dependent");
    let out = simulate_on(&src, params()).unwrap_or_else(|(_, t)| panic!("{t}"));
    assert_eq!(floats(&out[1]), (0..64).map(|i| 2.0 * i as f32).collect::<Vec<_>>());
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA");
    assert!(cuda.meta.dependent);
    let wait = cuda.source.find("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");").expect("the wait");
    let launch =
        cuda.source.find("asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");").expect("the trigger");
    assert!(wait < cuda.source.find("B[").unwrap() && cuda.source.find("B[").unwrap() < launch, "{}", cuda.source);
    let printed = tirx_script::print_kernel(&parse(&src));
    assert!(
        printed.contains("T.ptx.griddepcontrol.wait()") && printed.contains("T.ptx.griddepcontrol.launch_dependents()")
    );
    tirx_script::parse_kernel("printed.py", &printed).expect("the printed kernel parses");
}

#[test]
fn a_global_access_before_the_wait_is_reported() {
    for (before, verb) in [("    B[tid] = 0.0\n", "write of `B`"), ("    S[tid] = A[tid]\n", "read of `A`")] {
        let Err((e, text)) = simulate_on(&doubling(before), params()) else { panic!("{verb}: expected an error") };
        assert_eq!(e.kind, SimErrorKind::DataRace, "{text}");
        assert!(text.contains(verb) && text.contains("before its `griddepcontrol.wait`"), "{text}");
        assert!(
            text.contains("move the access after `T.ptx.griddepcontrol.wait()`") && text.contains("k.py:"),
            "{text}"
        );
    }
}

#[test]
fn only_a_kernel_that_waits_is_a_dependent() {
    // The trigger alone lets the next kernel in: this one still runs in stream order.
    let src = doubling("").replace("    T.ptx.griddepcontrol.wait()\n", "");
    let l = lower(&src);
    assert!(!l.lir.dependent() && !tirx_cuda::generate(&l.lir).unwrap().meta.dependent);
    let out = simulate_on(&doubling("    B[tid] = 0.0\n").replace("    T.ptx.griddepcontrol.wait()\n", ""), params());
    assert!(out.is_ok(), "no wait: global accesses anywhere");
}

#[test]
fn the_instructions_need_sm_90_and_take_no_arguments() {
    let src = doubling("");
    let d = tirx_lower::lower_kernel(&parse(&src), &LowerOptions::for_arch(Arch::SM_80)).expect_err("sm_80");
    let text = render(&d, &src);
    assert!(text.contains("needs sm_90") && text.contains("griddepcontrol"), "{text}");
    let bad = src.replace("griddepcontrol.wait()", "griddepcontrol.wait(1)");
    let text = match tirx_script::parse_kernel("k.py", &bad) {
        Err(d) => render(&d, &bad),
        Ok(_) => panic!("an argument to griddepcontrol.wait is an error"),
    };
    assert!(text.contains("griddepcontrol.wait") && text.contains("k.py:"), "{text}");
}
