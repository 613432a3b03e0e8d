# RMSNorm with a weight, bfloat16 in and out, one CTA (256 threads) per token of 4096 features
# (examples/python/rmsnorm.py builds it for any size; python/bench/kernels.py times it at
# 32768 x 4096 and x 8192 against torch.nn.functional.rms_norm). Thread t holds the 16-byte
# vectors t and t + 256 of the token and of the weight; everything computes in float32: the sum
# of squares is a thread-local fold then a CTA reduction, rstd = 1 / sqrt(sum / H + eps) once,
# and each element x * rstd * w is rounded once to bfloat16.
# Result: Y[r, :] = bf16(X[r, :] / sqrt(mean(X[r, :]^2) + eps) * W).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, tx

M, H, dtype, eps = 4, 4096, "bfloat16", 1e-6
THREADS, VEC = 256, 8
PER = H // THREADS
ROW = TileLayout(S[(H // (THREADS * VEC), THREADS, VEC) : (VEC, 1 @ tx, 1)])


@T.prim_func
def rmsnorm(X_ptr: T.handle, W_ptr: T.handle, Y_ptr: T.handle):
    X = T.match_buffer(X_ptr, (M, H), dtype)
    W = T.match_buffer(W_ptr, (H,), dtype)
    Y = T.match_buffer(Y_ptr, (M, H), dtype)
    T.device_entry()
    r = T.cta_id([M])
    T.warp_id([THREADS // 32]); T.lane_id([32]); T.thread_id([THREADS])
    x16 = T.alloc_buffer((H,), dtype, scope="local", layout=ROW)
    w16 = T.alloc_buffer((H,), dtype, scope="local", layout=ROW)
    x = T.alloc_buffer((H,), "float32", scope="local", layout=ROW)
    w = T.alloc_buffer((H,), "float32", scope="local", layout=ROW)
    sq = T.alloc_buffer((PER,), "float32", scope="local")
    part = T.alloc_buffer((1,), "float32", scope="local")
    scratch = T.alloc_buffer((THREADS // 32,), "float32", scope="shared")
    Tx.cta.copy(x16[0:H], X[r, 0:H])
    Tx.cta.copy(w16[0:H], W[0:H])
    Tx.cta.cast(x[0:H], x16[0:H])
    Tx.cta.cast(w[0:H], w16[0:H])
    xl = x.local()
    Tx.mul(sq[0:PER], xl[0:PER], xl[0:PER])
    Tx.sum(part[0:1], sq[0:PER])
    s = T.cuda.cta_sum(part[0], THREADS // 32, scratch.ptr_to([0]))
    rstd = 1.0 / T.sqrt(s / float(H) + eps)
    Tx.mul(xl[0:PER], xl[0:PER], rstd)
    Tx.cta.mul(x[0:H], x[0:H], w[0:H])
    Tx.cta.cast(x16[0:H], x[0:H])
    Tx.cta.copy(Y[r, 0:H], x16[0:H])
