# A persistent grid draining a queue of rows through an atomic counter (docs/tile-primitives.md
# §8.11, FlashAttention-3's tile scheduler in miniature): 5 CTAs share 64 rows of X (64 x 256
# float32) and write Y = 2 X. Each CTA's first row is its own; thread 0 takes the next from the
# counter C (`T.cuda.atomic_add` returns the value before its addition), hands it to the CTA
# through shared memory and a barrier, and the taker of the last of the 64 values leaves C at 0
# for the next launch. Which CTA gets which row depends on the order the CTAs reach the counter
# (the simulator runs one: CTAs one after another); Y does not.
from tvm.script import tirx as T

ROWS, COLS = 64, 256
CTAS = 5


@T.prim_func
def work_queue(X_ptr: T.handle, Y_ptr: T.handle, C_ptr: T.handle):
    X = T.match_buffer(X_ptr, (ROWS, COLS), "float32")
    Y = T.match_buffer(Y_ptr, (ROWS, COLS), "float32")
    C = T.match_buffer(C_ptr, (1,), "int32")
    T.device_entry()
    bx = T.cta_id([CTAS])
    tid = T.thread_id([128])
    nxt = T.alloc_buffer((1,), "int32", scope="shared")
    row = bx
    while row < ROWS:
        r = row % ROWS  # (row, which the condition bounds; the bounds prover sees the remainder's)
        Y[r, tid] = X[r, tid] * T.float32(2)
        Y[r, tid + 128] = X[r, tid + 128] * T.float32(2)
        if tid == 0:
            taken = T.cuda.atomic_add(C.ptr_to([0]), 1)
            if taken == ROWS - 1:  # the last of the ROWS takes (each CTA's last one misses)
                T.cuda.atomic_add(C.ptr_to([0]), -ROWS)
            nxt[0] = taken + CTAS
        T.cuda.cta_sync()
        row = nxt[0]
        T.cuda.cta_sync()  # (every thread has read nxt before thread 0 writes it again)
