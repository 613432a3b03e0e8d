# copy -> gmem_smem through dynamic shared memory: a CTA of 128 threads copies
# a 128x128 float32 tile (64 KiB, more than the 48 KiB CUDA allows for static
# `scope="shared"` arrays) global -> shared -> global. `scope="shared.dyn"`
# places it in `extern __shared__` memory; `tirx run` sets the launch attribute
# that allows more than 48 KiB. 128-bit vectors, 32 rounds. Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

shape, dtype = (128, 128), "float32"
fs = (slice(0, 128), slice(0, 128))


@T.prim_func
def copy_shared_dyn(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, shape, dtype)
    B = T.match_buffer(B_ptr, shape, dtype)
    T.device_entry()
    T.cta_id([1]); T.warp_id([4]); T.lane_id([32]); T.thread_id([128])
    A_smem = T.alloc_buffer(shape, dtype, scope="shared.dyn", layout=TileLayout(S[shape]))
    Tx.cta.copy(A_smem[fs], A[fs])  # global -> shared (64 KiB, dynamic)
    T.cuda.cta_sync()
    Tx.cta.copy(B[fs], A_smem[fs])  # shared -> global
