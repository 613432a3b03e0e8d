//! Issue 27 (hardening, round 3): each test is a defect's reproducer, lowered,
//! turned into CUDA and checked by value in the simulator.

mod common;
use common::*;
use tirx_ir::DType;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
";

/// Defect 8: bools in arithmetic and ordering are the integers 0 and 1, and
/// `&`, `|`, `^` of two bools are the logical operators, as in Python (it was an
/// internal error: "Gt on bool operands").
#[test]
fn bools_compute_as_python_does() {
    let exprs = [
        ("T.if_then_else(F[t] > 0, 1, 0)", [1, 0]),
        ("T.if_then_else(F[t] >= F[1 - t], 1, 0)", [1, 0]),
        ("F[t] + 1", [2, 1]),
        ("F[t] * 5 - 1", [4, -1]),
        ("-F[t]", [-1, 0]),
        ("~F[t]", [-2, -1]),
        ("F[t] // 1", [1, 0]),
        ("T.if_then_else(F[t] & F[1 - t], 1, 0)", [0, 0]),
        ("T.if_then_else(F[t] | F[1 - t], 1, 0)", [1, 1]),
        ("T.if_then_else(F[t] ^ True, 1, 0)", [0, 1]),
        ("T.if_then_else(F[t] < 1, 1, 0)", [0, 1]),
    ];
    let body: String = exprs.iter().enumerate().map(|(i, (e, _))| format!("    O[{i}, t] = {e}\n")).collect();
    let n = exprs.len();
    let src = format!(
        r#"{HEAD}def kernel(F_ptr: T.handle, O_ptr: T.handle):
    F = T.match_buffer(F_ptr, (2,), "bool")
    O = T.match_buffer(O_ptr, ({n}, 2), "int32")
    T.device_entry()
    T.cta_id([1])
    t = T.thread_id([2])
{body}"#
    );
    let (_, out) = run(&src, &[(DType::Bool, vec![1.0, 0.0]), (DType::I32, vec![0.0; 2 * n])]);
    for (i, (e, want)) in exprs.iter().enumerate() {
        assert_eq!(out[1][2 * i..2 * i + 2], want.map(f64::from), "{e}");
    }
}
