# Every elementwise tile primitive on per-thread registers (thread scope, the
# default `Tx.<op>`). One thread, 8 elements; each result row of Out is one op:
#   0 zero  1 fill 2.5  2 reciprocal  3 sqrt(1.5 x + 0.25)  4 exp  5 exp2
#   6 log2  7 silu  8 a + b  9 a - b  10 a * 0.5  11 a / b  12 max(a, b)
#   13 min(a, b)  14 a * b + 1  15 float16(a) (upcast back via a second cast)
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

n = 8
f32, f16 = "float32", "float16"


@T.prim_func
def constructs_elementwise(A_ptr: T.handle, B_ptr: T.handle, Out_ptr: T.handle):
    A = T.match_buffer(A_ptr, (n,), f32)
    B = T.match_buffer(B_ptr, (n,), f32)
    Out = T.match_buffer(Out_ptr, (16, n), f32)
    T.device_entry(); T.cta_id([1]); T.thread_id([1])
    a = T.alloc_local((n,), f32)
    b = T.alloc_local((n,), f32)
    r = T.alloc_local((n,), f32)
    h = T.alloc_local((n,), f16)
    Tx.copy(a[0:n], A[0:n])
    Tx.copy(b[0:n], B[0:n])
    Tx.zero(r); Tx.copy(Out[0, 0:n], r[0:n])
    Tx.fill(r, 2.5); Tx.copy(Out[1, 0:n], r[0:n])
    Tx.reciprocal(r, a); Tx.copy(Out[2, 0:n], r[0:n])
    Tx.sqrt(r, a, bias=0.25, scale=1.5); Tx.copy(Out[3, 0:n], r[0:n])
    Tx.exp(r, a); Tx.copy(Out[4, 0:n], r[0:n])
    Tx.exp2(r, a); Tx.copy(Out[5, 0:n], r[0:n])
    Tx.log2(r, a); Tx.copy(Out[6, 0:n], r[0:n])
    Tx.silu(r, a); Tx.copy(Out[7, 0:n], r[0:n])
    Tx.add(r, a, b); Tx.copy(Out[8, 0:n], r[0:n])
    Tx.sub(r, a, b); Tx.copy(Out[9, 0:n], r[0:n])
    Tx.mul(r, a, 0.5); Tx.copy(Out[10, 0:n], r[0:n])
    Tx.fdiv(r, a, b); Tx.copy(Out[11, 0:n], r[0:n])
    Tx.maximum(r, a, b); Tx.copy(Out[12, 0:n], r[0:n])
    Tx.minimum(r, a, b); Tx.copy(Out[13, 0:n], r[0:n])
    Tx.fma(r, a, b, 1.0); Tx.copy(Out[14, 0:n], r[0:n])
    Tx.cast(h, a); Tx.cast(r, h); Tx.copy(Out[15, 0:n], r[0:n])
