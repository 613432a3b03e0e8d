# Numerics (docs/numerics.md): a warp on 32x8 float32 tiles (lane i owns row i).
# fma rounds once (__fmaf_rn); rounding_mode= directs float32 arithmetic
# (__fadd_rz, __fmaf_rd) and narrowing casts (__float2bfloat16_ru, one per
# element: the pair conversion rounds to nearest only).
# Result: C = rm(rz(A + B) * B + A); H = bf16_rp(fma(C, 0.5, A)).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

fs = (slice(0, 32), slice(0, 8))
lay = TileLayout(S[(32, 8) : (1 @ laneid, 1)])


@T.prim_func
def ewise_rounding(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, H_ptr: T.handle):
    Ag = T.match_buffer(A_ptr, (32, 8), "float32")
    Bg = T.match_buffer(B_ptr, (32, 8), "float32")
    Cg = T.match_buffer(C_ptr, (32, 8), "float32")
    Hg = T.match_buffer(H_ptr, (32, 8), "bfloat16")
    T.device_entry(); T.cta_id([1]); T.thread_id([32])
    A = T.alloc_buffer((32, 8), "float32", scope="local", layout=lay)
    B = T.alloc_buffer((32, 8), "float32", scope="local", layout=lay)
    F = T.alloc_buffer((32, 8), "float32", scope="local", layout=lay)
    H = T.alloc_buffer((32, 8), "bfloat16", scope="local", layout=lay)
    Tx.warp.copy(A[fs], Ag[fs])
    Tx.warp.copy(B[fs], Bg[fs])
    Tx.warp.add(F[fs], A[fs], B[fs], rounding_mode="rz")  # __fadd_rz
    Tx.warp.fma(F[fs], F[fs], B[fs], A[fs], rounding_mode="rm")  # __fmaf_rd
    Tx.warp.copy(Cg[fs], F[fs])
    Tx.warp.fma(F[fs], F[fs], 0.5, A[fs])  # __fmaf_rn
    Tx.warp.cast(H[fs], F[fs], rounding_mode="rp")  # __float2bfloat16_ru
    Tx.warp.copy(Hg[fs], H[fs])
