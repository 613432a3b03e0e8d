# Rows split over groups of CTAs that meet through global memory (docs/tile-primitives.md §8.10):
# each row of X (4 x 1024 float32) is held by a group of 4 CTAs, 256 columns each. A CTA sums its
# slice (a CTA reduction), writes the partial sum to P, meets the other CTAs of its group at the
# grid group barrier on its row's word W[row], reads the group's 4 partials and writes its slice of
# Y = X / (the row's sum). The grid is launched cooperatively (all 16 CTAs resident at once, which
# the barrier needs); W starts at 0 and is 0 again, but for its top bit, after every launch.
# The simulator runs the whole grid together and checks that each partial is read only after the
# barrier phase its writer arrived at (try deleting the barrier: a race on P).
from tvm.script import tirx as T

ROWS, COLS = 4, 1024
GROUP = 4
SLICE = COLS // GROUP


@T.prim_func
def grid_group_exchange(X_ptr: T.handle, Y_ptr: T.handle, P_ptr: T.handle, W_ptr: T.handle):
    X = T.match_buffer(X_ptr, (ROWS, COLS), "float32")
    Y = T.match_buffer(Y_ptr, (ROWS, COLS), "float32")
    P = T.match_buffer(P_ptr, (ROWS * GROUP,), "float32")
    W = T.match_buffer(W_ptr, (ROWS,), "int32")
    T.device_entry()
    bx = T.cta_id([ROWS * GROUP])
    tid = T.thread_id([128])
    red = T.alloc_buffer((4,), "float32", scope="shared")
    row = bx // GROUP
    c0 = bx % GROUP * SLICE
    part = T.cuda.cta_sum(X[row, c0 + tid] + X[row, c0 + 128 + tid], 4, red.ptr_to([0]))
    if tid == 0:
        P[bx] = part
    T.cuda.grid_group_sync(W.ptr_to([row]), GROUP)
    total = P[row * GROUP] + P[row * GROUP + 1] + P[row * GROUP + 2] + P[row * GROUP + 3]
    Y[row, c0 + tid] = X[row, c0 + tid] / total
    Y[row, c0 + 128 + tid] = X[row, c0 + 128 + tid] / total
