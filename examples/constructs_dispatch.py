# Forcing a variant and passing config: `dispatch=` pins the lowering variant,
# keyword config reaches the variants (`cache="nc"`: read-only global loads;
# `rounding_mode=`: packed f32x2 rounding). 32 threads, each owns 4 floats.
# Result: B[t, :] = A[t, :] + A[t, :], C == A (copied by the forced fallback).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

dtype = "float32"


@T.prim_func
def constructs_dispatch(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 4), dtype)
    B = T.match_buffer(B_ptr, (32, 4), dtype)
    C = T.match_buffer(C_ptr, (32, 4), dtype)
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    x = T.alloc_local((4,), dtype)
    Tx.copy(x[0:4], A[tid, 0:4], cache="nc")
    Tx.add(x[0:4], x[0:4], x[0:4], rounding_mode="rn")
    Tx.copy(B[tid, 0:4], x[0:4])
    A_smem = T.alloc_shared((32, 4), dtype)
    Tx.warp.copy(A_smem[0:32, 0:4], A[0:32, 0:4], dispatch="fallback")
    T.cuda.cta_sync()
    Tx.warp.copy(C[0:32, 0:4], A_smem[0:32, 0:4], dispatch="fallback")
