//! `T.cuda.printf` (docs/lir.md §2.15): the simulator prints every thread's lines
//! in thread order (CTA, then thread, then program order), also those printed
//! before an error; the CUDA is device `printf` with the length modifiers and
//! casts C's varargs need; the script checks the format and each value.

mod common;
use common::*;
use tirx_ir::DType;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
";

fn kernel(body: &str) -> String {
    format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, N_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), "float32")
    N = T.match_buffer(N_ptr, (2,), "int64")
    T.device_entry()
    bx = T.cta_id([2]); tid = T.thread_id([32])
{body}
"#
    )
}

fn simulate(src: &str) -> Result<tirx_sim::SimReport, tirx_sim::SimError> {
    let l = lower(src);
    let a: Vec<f64> = (0..64).map(|i| f64::from(i) * 0.5).collect();
    let mut params =
        vec![tirx_sim::value::to_bytes(DType::F32, &a), tirx_sim::value::to_bytes(DType::I64, &[-7.0, 1e12])];
    tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default())
}

#[test]
fn lines_come_in_thread_order_with_c_formatting() {
    // Thread 17 prints before the barrier and thread 0 after it in execution order too:
    // the report sorts by CTA, then thread.
    let body = "    if tid == 17 or tid == 0:
        T.cuda.printf(\"%d.%02d before: %+.2f %x\\n\", bx, tid, A[bx * 32 + tid], tid)
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.printf(\"%d.%02d after: %d %e\\n\", bx, tid, N[1], T.float16(0.25))";
    let src = kernel(body);
    let r = simulate(&src).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        r.printed,
        [
            "0.00 before: +0.00 0\n",
            "0.00 after: 1000000000000 2.500000e-01\n",
            "0.17 before: +8.50 11\n",
            "1.00 before: +16.00 0\n",
            "1.00 after: 1000000000000 2.500000e-01\n",
            "1.17 before: +24.50 11\n",
        ]
    );
    let cuda = tirx_cuda::generate(&lower(&src).lir).expect("cuda").source;
    assert!(
        cuda.contains("printf(\"%d.%02d after: %lld %e\\n\", bx, tid, N[1], (double)(float)(__half(0.25f)));"),
        "{cuda}"
    );
    assert!(cuda.contains("(double)(A[bx * 32 + tid]), tid);"), "{cuda}");
}

#[test]
fn lines_printed_before_an_error_are_kept() {
    let src = kernel(
        "    T.cuda.printf(\"%d\\n\", tid)
    A[tid + 40] = 1.0",
    );
    // 32 threads of CTA 0 write A[40..72): thread 24 leaves the buffer, after every thread printed.
    let e = match tirx_lower::lower_kernel(
        &parse(&src),
        &tirx_lower::LowerOptions { defer_bounds: true, ..Default::default() },
    ) {
        Ok(l) => {
            let mut params = vec![vec![0u8; 256], vec![0u8; 16]];
            tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default()).unwrap_err()
        }
        Err(d) => panic!("{}", render(&d, &src)),
    };
    assert!(e.message.contains("out of bounds") || e.message.contains("outside"), "{}", e.message);
    assert!(!e.printed().is_empty() && e.printed()[0] == "0\n", "{:?}", e.printed());
}

#[test]
fn the_script_checks_the_format_and_each_value() {
    for (call, words) in [
        ("T.cuda.printf(\"%d %d\\n\", tid)", "the format has 2 conversion(s) but 1 value(s) follow it"),
        ("T.cuda.printf(\"%f\\n\", tid)", "`%f` prints a float, but this value is int32"),
        ("T.cuda.printf(\"%d\\n\", A[tid])", "`%d` prints an integer or bool, but this value is float32"),
        (
            "T.cuda.printf(\"%s\\n\", tid)",
            "bad `T.cuda.printf` format: the conversion at byte 0: `%s` is not supported",
        ),
        ("T.cuda.printf(\"%ld\\n\", tid)", "without a length modifier"),
        ("T.cuda.printf(tid)", "expected a format string"),
    ] {
        let src = kernel(&format!("    {call}"));
        let d = tirx_script::parse_kernel("k.py", &src).unwrap_err();
        let text = render(&d, &src);
        assert!(text.contains(words), "{call}:\n{text}");
    }
}
