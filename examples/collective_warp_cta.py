# Raw collectives: a kernel author's warp and CTA reductions and shuffles on
# scalar values (256 threads, 8 warps). `s = T.cuda.warp_sum(v, width=8)` binds
# a new name: the call lowers to xor shuffles, not to an expression. The CTA
# reductions share one scratch: every warp reads the partials before the
# second barrier, so the max and the sum in a row do not race. Results:
# Out[0, t] = sum of v over t's 8-lane group; Out[1, t] = v of lane t ^ 1;
# Out[2, t] = (v - max v) / sum (v - max v + 1) over the CTA, with v = X[t].
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx


@T.prim_func
def collective_warp_cta(X_ptr: T.handle, Out_ptr: T.handle):
    X = T.match_buffer(X_ptr, (256,), "float32")
    Out = T.match_buffer(Out_ptr, (3, 256), "float32")
    T.device_entry(); T.cta_id([1])
    tid = T.thread_id([256])
    scratch = T.alloc_buffer((8,), "float32", scope="shared")
    v = X[tid]
    s8 = T.cuda.warp_sum(v, width=8)
    nb = T.cuda.shfl_xor(v, 1)
    m = T.cuda.cta_max(v, 8, scratch.ptr_to([0]))
    d = v - m
    z = T.cuda.cta_reduce(d + 1.0, "sum", 8, scratch.ptr_to([0]))
    Out[0, tid] = s8
    Out[1, tid] = nb
    Out[2, tid] = d / z
