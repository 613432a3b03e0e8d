# reduce -> shared at warpgroup scope: two warpgroups of one CTA each reduce
# their own 64x40 float16 half of a tile at the same time, then each ends with
# its own named barrier `bar.sync 1 + wg_id, 128` (a shared id, as the
# reference's fixed barrier 8, would let one warpgroup release the other).
# The sums accumulate in float32 and round once to float16. Results:
# Sm[g, i] = f16(sum A[g, i, :]); Mn[g, i] = min A[g, i, :].
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

fa = (slice(0, 2), slice(0, 64), slice(0, 40))


@T.prim_func
def reduce_warpgroup_shared(A_ptr: T.handle, Sm_ptr: T.handle, Mn_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2, 64, 40), "float16")
    Sm = T.match_buffer(Sm_ptr, (2, 64), "float16")
    Mn = T.match_buffer(Mn_ptr, (2, 64), "float16")
    T.device_entry(); T.cta_id([1]); T.thread_id([256])
    g = T.warpgroup_id([2])
    A_s = T.alloc_buffer((2, 64, 40), "float16", scope="shared")
    S_s = T.alloc_buffer((2, 64), "float16", scope="shared")
    M_s = T.alloc_buffer((2, 64), "float16", scope="shared")
    Tx.cta.copy(A_s[fa], A[fa])
    T.cuda.cta_sync()
    Tx.wg.sum(S_s[g, 0:64], A_s[g, 0:64, 0:40])
    Tx.wg.min(M_s[g, 0:64], A_s[g, 0:64, 0:40])
    T.cuda.cta_sync()
    Tx.cta.copy(Sm[0:2, 0:64], S_s[0:2, 0:64])
    Tx.cta.copy(Mn[0:2, 0:64], M_s[0:2, 0:64])
