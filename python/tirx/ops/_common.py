"""What the ops share: array kinds, row views, choosing threads, the registered torch ops."""

import contextvars
import math
from typing import Callable, Dict, Optional

import numpy as np

from ..device import ARRAY_ALIGN  # (the start every kernel assumes of its arrays; a launch refuses others)
from ..torch_op import compiling  # noqa: F401  (the ops' test: through the registered op or not)
from ..torch_op import loaded_torch

_DTYPES = ("float32", "float16", "bfloat16")
_ops: Dict[str, object] = {}


_SM_COUNT = {}


def sm_count(x) -> int:
    """The SMs of the GPU that holds the CUDA tensor ``x`` (asked once per device)."""
    dev = x.get_device()
    if dev not in _SM_COUNT:
        import torch

        _SM_COUNT[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _SM_COUNT[dev]


def gpu_sms(x) -> int:
    """The SMs of the GPU holding ``x``: 0 for NumPy arrays and CPU tensors (the simulator)."""
    return sm_count(x) if is_torch(x) and x.is_cuda else 0


# `torch.Tensor` once torch is loaded (`is_torch`: an op's call asks it of each argument).
_Tensor = None


def is_torch(x) -> bool:
    global _Tensor
    if _Tensor is None:
        torch = loaded_torch()
        if torch is None:
            return False
        _Tensor = torch.Tensor
    return isinstance(x, _Tensor)


# Names by dtype object, filled as dtypes are met (every op call asks); torch's apart from
# NumPy's, so that torch.compile, tracing a call, only hashes torch dtypes.
_names: Dict[object, str] = {}
_torch_names: Dict[object, str] = {}
_torch_filled = False  # (`_fill_torch_caches`)


def acc_col_layout(cols: int):
    """A column vector (1 x ``cols``) of `wgmma_acc_layout(cols)`: each thread holds its columns'
    values, replicated over the warps and the quads' rows (a bias row, per-column scales)."""
    from ..layout import R, S, TileLayout, laneid, wid_in_wg

    return TileLayout(S[(1, cols // 8, 4, 2) : (1, 2, 1 @ laneid, 1)] + R[(4, 8) : (1 @ wid_in_wg, 4 @ laneid)])


def dtype_name(x) -> str:
    """`float32`, `bfloat16`, ... of a NumPy array (ml_dtypes included) or a torch tensor."""
    return _name_of(_torch_names if is_torch(x) else _names, x.dtype)


def dtype_arg(dt) -> str:
    """The name of a dtype argument (``torch.bfloat16``, ``"bfloat16"``, a NumPy dtype), looked
    up once per object: ``str(torch.bfloat16)`` costs a microsecond a call."""
    torch = loaded_torch()
    return _name_of(_torch_names if torch is not None and isinstance(dt, torch.dtype) else _names, dt)


def _name_of(names: Dict[object, str], dt) -> str:
    name = names.get(dt)
    if name is None:
        name = names[dt] = str(dt).replace("torch.", "")
    return name


def rows_of(x, n: int):
    """``x`` as a 2-D (rows, n) view (itself when it is one already: no reshape per call)."""
    return x if len(x.shape) == 2 else x.reshape(-1, n)


def check_dtype(op: str, x) -> str:
    name = dtype_name(x)
    if name not in _DTYPES:
        raise TypeError(f"tirx.ops.{op}: {name} input; the kernel takes float32, float16 or bfloat16")
    return name


# The configurations the row kernels are tuned over: a CTA per row, the row in registers ...
THREAD_CONFIGS = [{"threads": t} for t in (32, 64, 128, 256, 512, 1024)]
# ... or streamed through them in tiles (rows too wide for registers, and mid-size rows where a
# second read from L2 beats fewer threads) ...
STREAM_CONFIGS = [{"threads": t, "stream": True} for t in (256, 512, 1024)]
# ... and, for short rows, a group of `tpr` lanes per row (`RowGroupTile`).
GROUP_CONFIGS = [{"threads": t, "tpr": p} for t in (128, 256) for p in (2, 4, 8, 16, 32)]
ROW_CONFIGS = THREAD_CONFIGS + STREAM_CONFIGS + GROUP_CONFIGS
# ... and, for wide rows, a cluster of `cluster` CTAs per row, each holding a slice of it in
# registers, the row's statistics exchanged through distributed shared memory (`cluster_exchange`).
CLUSTER_CONFIGS = [{"threads": t, "cluster": n} for t in (512, 1024) for n in (2, 4, 8)]
WIDE_ROW_CONFIGS = ROW_CONFIGS + CLUSTER_CONFIGS
# ... or each holding its slice in shared memory (`SharedSlice`): no registers for the row, so
# several CTAs per SM, one's loads in flight while another reduces or writes. 16 CTAs is Hopper's
# non-portable cluster (QuACK's for rows past 128k): a 262,144-column bf16 row in 32 KB slices.
SHARED_CLUSTER_CONFIGS = [{"threads": t, "cluster": n, "shared": True} for t in (256, 512) for n in (2, 4, 8, 16)]
# Rows shorter than this are not split over a cluster (a CTA or two per SM hold them whole).
CLUSTER_MIN = 16384
# The shared-memory slices of a CTA, at most: two CTAs per SM (of 227 KB) at least.
SLICE_SHARED_MAX = 100 * 1024


FP8 = ("float8_e4m3fn", "float8_e5m2")  # the 8-bit float types the tensor cores take
SMEM_BYTES = 227 * 1024  # the shared memory a CTA may have on sm_90
# setmaxnreg's budgets (the producer warpgroup's, each consumer's) by consumer warpgroups: the
# registers a thread of each warpgroup holds, summing to at most 512 over the CTA (64K registers,
# 128 threads a warpgroup). Two consumers: FlashAttention-3's 24 + 2 x 240 (a producer issuing
# TMA loads fits 24 in every kernel here; CUTLASS's 40 + 2 x 232 left FP8 attention at head dim
# 256 over 128-key tiles 48 bytes of spills and its wgmmas serialized by ptxas).
WARPGROUP_REGISTERS = {1: (40, 256), 2: (24, 240), 3: (24, 160)}


def swizzle_for(cols: int, eb: int) -> int:
    """The widest swizzle (3: 128 bytes, 2: 64, 1: 32) whose atom rows of ``cols`` elements of
    ``eb`` bytes are whole numbers of (a shared tile's layout for wgmma and TMA)."""
    return next(sw for sw in (3, 2, 1) if cols * eb % (16 << sw) == 0)


def elem_bytes(dtype: str) -> int:
    """Bytes an element of a float dtype."""
    return 4 if dtype == "float32" else 1 if dtype in FP8 else 2


def strides(t):
    """A torch tensor's or NumPy array's strides in elements."""
    return tuple(t.stride()) if is_torch(t) else tuple(x // t.itemsize for x in t.strides)


# Elements per thread of a streamed tile, at most.
CHUNK = 32


def row_capacity(threads: int, dtype: str, tiles: float) -> int:
    """Elements of a row a thread of a ``threads``-thread CTA keeps in registers when its kernel
    holds ``tiles`` float32 tiles of them (a 16-bit row adds half a tile: its staging copy; a
    float32 row a quarter: its 16-byte vectors' addresses and guards, which nvcc showed spilling
    a streamed float32 softmax at 1,024 threads without it), in whole 16-byte vectors: the
    registers a thread can have with the CTA alone on its SM (the 64K register file, at most 255
    each) less 32 for addresses, counters and statistics. Over it, the compiler spills."""
    vec = 16 // elem_bytes(dtype)
    regs = min(255, 65536 // threads) - 32
    held = tiles + (0.5 if dtype != "float32" else 0.25)
    return max(vec, int(regs / held) // vec * vec)


class RowTile:
    """How a row kernel of ``threads`` threads holding ``tiles`` float32 tiles holds a row of
    ``n`` elements of ``dtype``: thread t owns the 16-byte vectors t, t + threads, ... of a tile
    of ``width`` elements (the row rounded up to whole vectors of every thread; the tail past
    ``n`` is guarded by ``clip=True``), ``per`` of them its registers. A row over the thread's
    `row_capacity` (or any row, with ``stream``) is ``streamed``: tiles of up to ``CHUNK`` per
    thread, ``chunks`` of them per row."""

    def __init__(self, n: int, dtype: str, threads: int, tiles: float = 1, stream: bool = False):
        from ..layout import S, TileLayout, tx

        self.vec = 16 // elem_bytes(dtype)
        self.warps = threads // 32
        round_ = threads * self.vec
        cap = row_capacity(threads, dtype, tiles)
        self.streamed = stream or -(-n // round_) * self.vec > cap
        self.width = threads * min(CHUNK, cap) if self.streamed else -(-n // round_) * round_
        self.chunks = -(-n // self.width)
        self.per = self.width // threads
        self.layout = TileLayout(S[(self.width // round_, threads, self.vec) : (self.vec, 1 @ tx, 1)])


class RowGroupTile:
    """How a CTA of ``threads`` threads holds ``rows = threads // tpr`` short rows of ``n``
    elements: the lanes of each aligned group of ``tpr`` (a power of two, 2 to 32) hold one row,
    lane g the 16-byte vectors g, g + tpr, ... of a tile of ``width`` elements (the row rounded
    up to whole vectors of every lane of the group), ``per`` registers each. Row statistics are
    warp shuffles over the group (`T.cuda.warp_sum(v, width=tpr)`): no shared memory, no
    barrier, and many rows in flight per CTA where a row is too short to feed a CTA."""

    def __init__(self, n: int, dtype: str, threads: int, tpr: int):
        from ..layout import S, TileLayout, tx

        self.vec = 16 // elem_bytes(dtype)
        self.tpr, self.rows, self.warps = tpr, threads // tpr, threads // 32
        round_ = tpr * self.vec
        self.width = -(-n // round_) * round_
        self.per = self.width // tpr
        self.layout = TileLayout(S[(self.rows, self.width // round_, tpr, self.vec) : (tpr @ tx, self.vec, 1 @ tx, 1)])


def group_io(g: "RowGroupTile", dtype: str, fill: float = 0.0):
    """`row_io` for a CTA's group of rows: ``load(dst, src, stage)`` reads the rows' region
    ``src`` (rows past the tensor's last and columns past the row's end read as ``fill``);
    ``store(dst, src, stage)`` writes nothing past them."""
    from .. import T, Tx

    rows, width, widen = g.rows, g.width, dtype != "float32"

    @T.macro
    def load(dst, src, stage):
        if widen:
            Tx.cta.copy(stage[0:rows, 0:width], src, clip=True, other=fill)
            Tx.cta.cast(dst[0:rows, 0:width], stage[0:rows, 0:width])
        else:
            Tx.cta.copy(dst[0:rows, 0:width], src, clip=True, other=fill)

    @T.macro
    def store(dst, src, stage):
        if widen:
            Tx.cta.cast(stage[0:rows, 0:width], src[0:rows, 0:width])
            Tx.cta.copy(dst, stage[0:rows, 0:width], clip=True)
        else:
            Tx.cta.copy(dst, src[0:rows, 0:width], clip=True)

    return load, store


LOG2E = 1.4426950408889634
NEG_INF = -float("inf")
# A softmax output exp2(y), y <= 0 (y one fma of x), stored as bfloat16: ex2.approx.ftz(y + 32) *
# 2^-32 (the lift folded into the fma, the 2^-32 into the normalisation's multiplication where
# there is one): two instructions where `exp2f` spends four (its subnormal results by a test, a
# halving and a squaring), its subnormal results kept (every y >= -158 lifts to a normal result,
# exact to scale). The lift's rounding (|32 - shift| against |shift|) is ~2^-19 of a result: far
# below a bfloat16 ulp, not a float32 one, so float32 outputs keep `exp2f`; float16 outputs flush
# below 2^-24 when they round, so they take `ex2.approx.ftz` unlifted.
EXP2_LIFT = 32.0


def exp2_output_form(out_dtype: str) -> tuple:
    """``(ftz, lift)`` of a softmax's exponentials stored as ``out_dtype`` (`EXP2_LIFT`)."""
    return {"float32": (False, 0.0), "float16": (True, 0.0)}.get(out_dtype, (True, EXP2_LIFT))


def exp2_of(ftz: bool = False, lift: float = 0.0):
    """A macro ``exp_(dst, src, shift)``: ``dst = 2^(src log2 e - shift + lift)`` (``shift`` in
    log2 units) as one fma (one rounding, one instruction: `Tx.exp2`'s ``scale=``/``bias=`` are a
    multiply and an add under NVRTC's ``--fmad=false``) and `ex2.approx.ftz` (``ftz``) or
    `exp2f`: the softmaxes' exponentials (`online_softmax_step`, `exp2_output_form`)."""
    from .. import T, Tx

    @T.macro
    def exp_(dst, src, shift):
        if lift:
            Tx.fma(dst, src, LOG2E, lift - shift)
        else:
            Tx.fma(dst, src, LOG2E, -shift)
        Tx.exp2(dst, dst, ftz=ftz)

    return exp_


def online_softmax_step():
    """A macro ``step(run, part, x, per)``: folds a tile of a row (``x``, this thread's ``per``
    registers) into the thread's running max ``run[0]`` and sum of exponentials ``run[1]``
    (rescaled by exp2 of the max's change); ``x`` is left holding ``exp(x - max)`` with values
    below 2^-126 flushed to 0: an fma and one MUFU.EX2 (`ex2.approx.ftz`) per value, where
    exp2's ``scale``/``bias`` and `exp2f` take six instructions. The sum is unchanged by the
    flush: it holds 1 (the max's term, this tile's or an earlier one's) and 32 terms below
    2^-126 are far below half its ulp. ``part``: a register of scratch. An all-padding tile
    (-inf) keeps the max at -inf, its exponents taken against 0."""
    from .. import T, Tx

    exp_ = exp2_of(ftz=True)

    @T.macro
    def step(run, part, x, per):
        Tx.max(part[0:1], x[0:per])
        new_max = T.max(run[0], part[0])
        base = T.if_then_else(new_max == NEG_INF, 0.0, new_max)
        exp_(x[0:per], x[0:per], base * LOG2E)
        Tx.sum(part[0:1], x[0:per])
        run[1] = run[1] * T.exp2((run[0] - base) * LOG2E) + part[0]
        run[0] = new_max

    return step


def row_sum_pass(g: "RowTile", load):
    """A macro ``row_sum(acc, part, x, X, r, stage)``: this thread's sum of row ``r`` of ``X``,
    read tile by tile into ``x`` with ``load`` (`row_io`), left in ``acc[0]`` (the CTA's sum is
    then `T.cuda.cta_sum(acc[0], ...)`); with one tile, ``x`` keeps the row. ``part``: a
    register of scratch."""
    from .. import T, Tx

    width, per, chunks = g.width, g.per, g.chunks

    @T.macro
    def row_sum(acc, part, x, X, r, stage):
        acc[0] = 0.0
        for k in T.serial(chunks):
            load(x, X[r, k * width : k * width + width], stage)
            Tx.sum(part[0:1], x.local()[0:per])
            acc[0] = acc[0] + part[0]

    return row_sum


def group_vector(g: "RowGroupTile", n: int):
    """A lane group's share of a vector of ``n`` (a norm's weight or bias), as a macro
    ``vector(dst, V, lane)``: the float32 registers ``dst`` get the elements of ``V`` at this
    lane's columns of the row (0 past ``n``), in the order of its row registers: scalar loads (a
    vector the lane groups share cannot be a register tile: its elements would have several
    owners), from L1 after the SM's first CTA; where no lane's columns pass ``n``, a thread copy of
    each run of ``vec`` (16-byte loads where scalar ones took 16 instructions a lane)."""
    from .. import T, Tx

    round_, vec = g.tpr * g.vec, g.vec
    slots = [(cc * vec + e, cc * round_ + e) for cc in range(g.width // round_) for e in range(vec)]

    @T.macro
    def vector(dst, V, lane):
        for i, col in slots:
            dst[i] = T.if_then_else(col + lane * vec < n, T.cast(V[col + lane * vec], "float32"), 0.0)

    @T.macro
    def whole(dst, V, lane):  # (no column past n: each lane's runs of ``vec`` in one load each)
        run = T.alloc_buffer((vec,), V.dtype, scope="local")
        for cc in T.unroll(g.width // round_):
            Tx.thread.copy(run[0:vec], V[cc * round_ + lane * vec : cc * round_ + lane * vec + vec])
            Tx.thread.cast(dst[cc * vec : cc * vec + vec], run[0:vec])

    return whole if n == g.width else vector


def alternating_sums(count: int, warps: int, first: int = 0):
    """A macro ``sums(acc, scratch, wid, lane, parity)`` for a loop that reduces once per
    iteration: every thread's ``acc[first:first + count]`` replaced by the CTA's sums of them, ``count``
    values in one exchange with one barrier (a warp butterfly each; lane 0 of warp w stores its
    partials in row ``parity`` of ``scratch``, shared ``(2, warps * count)`` float32; a barrier;
    every thread adds the warps' partials in order). ``parity`` alternates with the iterations
    (``i % 2``): a row is written again two iterations later, after the next iteration's
    barrier, which every thread reaches only once it has read this one's partials, so no
    barrier follows the read (`T.cuda.cta_sum` takes two per value)."""
    from .. import T

    @T.macro
    def sums(acc, scratch, wid, lane, parity):
        for k in range(count):
            v = T.cuda.warp_sum(acc[first + k])
            acc[first + k] = v
        if lane == 0:
            for k in range(count):
                scratch[parity, wid * count + k] = acc[first + k]
        T.cuda.cta_sync()
        for k in range(count):
            acc[first + k] = 0.0
            for w in range(warps):
                acc[first + k] = acc[first + k] + scratch[parity, w * count + k]

    return sums


def cluster_tile(n: int, dtype: str, threads: int, cluster: int, tiles: float) -> "RowTile":
    """The `RowTile` of a CTA's slice of a row of ``n`` split over ``cluster`` CTAs (a slice of
    ``ceil(n / cluster)`` columns rounded up to whole vectors of every thread); the slice must fit
    the registers (`prune_rows` keeps only such configurations)."""
    g = RowTile(-(-n // cluster), dtype, threads, tiles)
    if g.streamed:
        raise ValueError(
            f"a row of {n} {dtype} over a cluster of {cluster} CTAs of {threads} threads: a slice of "
            f"{-(-n // cluster)} does not fit the registers of {tiles} float32 tiles; use a larger cluster or more threads"
        )
    return g


class SharedSlice:
    """How a CTA of ``threads`` threads holds its slice of a row of ``n`` elements split over a
    cluster of ``cluster`` CTAs in shared memory: the slice, ``part = n / cluster`` columns, is
    copied whole by `cp.async` (`io`'s ``fetch``), then read in register tiles of ``tile`` (a `RowTile`
    of ``tile.width`` columns dividing the slice, at most ``most`` per thread, `CHUNK` unless
    given, and at least a 16-byte vector), ``chunks`` of
    them. The slices must tile the row in whole 16-byte vectors of every thread (`cp.async` has
    no per-vector guard); `prune_rows` keeps only such configurations."""

    def __init__(self, n: int, dtype: str, threads: int, cluster: int, most: int = CHUNK):
        vec = 16 // elem_bytes(dtype)
        if n % (cluster * threads * vec):
            raise ValueError(
                f"a row of {n} over a cluster of {cluster} CTAs of {threads} threads in shared memory: the "
                f"slices must be whole 16-byte vectors of every thread ({cluster * threads * vec} divides the row)"
            )
        self.part = n // cluster
        rounds = self.part // (threads * vec)
        per = max(d for d in range(1, max(most, vec) // vec + 1) if rounds % d == 0) * vec
        self.tile = RowTile(threads * per, dtype, threads)
        self.chunks = self.part // self.tile.width
        self.bytes = self.part * elem_bytes(dtype)

    def io(self, dtype: str):
        """Macros over slices held as rows of a shared buffer ``S`` (``(slots, part)``: one slot,
        or a ring): ``fetch(S, slot, A, r, c0)`` starts copying the slice (row ``r`` of ``A`` from
        column ``c0``) into row ``slot`` of ``S``; ``landed()`` waits for every slice fetched
        (every thread's copies, then a CTA barrier); ``chunk(dst, S, slot, k, stage)`` reads tile
        ``k`` of row ``slot`` into the float32 registers ``dst`` (16-bit rows through ``stage``)."""
        from .. import T, Tx

        part, width, widen = self.part, self.tile.width, dtype != "float32"

        @T.macro
        def fetch(S, slot, A, r, c0):
            Tx.cta.copy_async(S[slot, 0:part], A[r, c0 : c0 + part])
            T.ptx.cp_async.commit_group()

        @T.macro
        def landed():
            T.ptx.cp_async.wait_group(0)
            T.cuda.cta_sync()

        @T.macro
        def chunk(dst, S, slot, k, stage):
            if widen:
                Tx.cta.copy(stage[0:width], S[slot, k * width : k * width + width])
                Tx.cta.cast(dst[0:width], stage[0:width])
            else:
                Tx.cta.copy(dst[0:width], S[slot, k * width : k * width + width])

        return fetch, landed, chunk


def slice_fetch(part: int):
    """A macro ``fetch(S, slot, A, r, c0, valid)``: where ``valid``, starts copying the slice
    ``A[r, c0 : c0 + part]`` into row ``slot`` of ``S`` (`cp.async`, thread t the 16-byte vectors
    t, t + threads, ..., the vectors its register tiles read: no barrier on the ring); one
    `cp.async` group either way."""
    from .. import T, Tx

    @T.macro
    def fetch(S, slot, A, r, c0, valid):
        if valid:
            Tx.cta.copy_async(S[slot, 0:part], A[r, c0 : c0 + part])
        T.ptx.cp_async.commit_group()

    return fetch


def cluster_exchange(n: int, one_row: bool = False):
    """Macros for rows split over a cluster of ``n`` CTAs, each CTA publishing four float32
    statistics of its slice of a row to every CTA of the cluster (distributed shared memory).
    The kernel allocates ``stats`` (n, 4) and ``mine`` (4,) float32 and an `MBarrier` ``bar`` of
    depth 1 in its shared pool; row i of a CTA (the first: 0) uses the barrier's phase ``i % 2``:

    - ``open_(bar)`` before the loads: initialises the barrier and arrives on the cluster barrier;
    - ``publish(stats, mine, bar, rank, tid, phase, v0, v1, v2, v3)``: waits on the cluster
      barrier (every peer's barrier initialised; every peer done reading the last row's
      ``stats``), then thread 0 writes ``(v0, .., v3)`` into row ``rank`` of its ``stats`` and
      sends them into that row of every other CTA's (a 16-byte bulk copy each, completing on that
      CTA's barrier: compute-sanitizer rejects a bulk copy to the CTA itself); every thread
      returns once its own ``stats`` is whole;
    - ``release()`` once the row's ``stats`` are read: arrives on the cluster barrier (with
      ``one_row``, a CTA's only row, whose phase orders execution only, ``.relaxed``: no release,
      so no ``MEMBAR.ALL.GPU`` mid-row; the simulator holds a kernel to it);
    - ``close()`` at the end: waits on it (no CTA exits while a copy out of its ``mine`` may
      still be reading it)."""
    from .. import T, Tx

    @T.macro
    def open_(bar):
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.barrier.cluster.arrive()

    @T.macro
    def publish(stats, mine, bar, rank, tid, phase, v0, v1, v2, v3):
        T.ptx.barrier.cluster.wait()
        if tid == 0:  # (`mine` only now: the last row's copies out of it completed before the wait)
            mine[0] = v0
            mine[1] = v1
            mine[2] = v2
            mine[3] = v3
            T.ptx.fence.proxy.async_.shared__cta()
            stats[rank, 0] = v0  # its own row directly (the barrier's arrive releases it)
            stats[rank, 1] = v1
            stats[rank, 2] = v2
            stats[rank, 3] = v3
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), (n - 1) * 16)
            for q in range(1, n):
                Tx.copy_async(stats[rank, 0:4], mine[0:4], dispatch="dsmem", mbar=bar.ptr_to([0]), remote_cta_id=(rank + q) % n)
        bar.wait(0, phase)

    @T.macro
    def release():
        if one_row:
            T.ptx.barrier.cluster.arrive.relaxed()
        else:
            T.ptx.barrier.cluster.arrive()

    @T.macro
    def close():
        T.ptx.barrier.cluster.wait()

    return open_, publish, release, close


def chain_slots(ahead: int) -> int:
    """The slots a `chained_exchange` needs when a CTA sends row i + ``ahead`` before it reads row
    i's slot (0: it reads row i's first; 1: the pipelined designs, the next row's sums sent
    first). A peer sends row i + slots into row i's slot once it received this CTA's row
    i + slots - 1 - ahead (its last wait before that send, in the same order), and that row
    must have been sent after a CTA barrier following every thread's read of row i's slot: the
    first such row is i + 1 + ahead, so slots = 2 + 2 ahead. With one slot fewer the simulator
    reports the race (a peer's row landing before the slot was read)."""
    return 2 + 2 * ahead


def chained_exchange(n: int, slots: int = 2):
    """`cluster_exchange` for a persistent kernel's rows with no cluster barrier per row: the
    kernel allocates ``stats`` (slots n, 4) and ``mine`` (slots, 4) float32 and an `MBarrier`
    ``bar`` of depth ``slots``, and row i uses slot ``s = i % slots`` (rows ``s n ..`` of
    ``stats``, ``mine[s]``, ``bar[s]`` in phase ``i // slots % 2``). A peer writes a slot again
    ``slots`` rows on, after it waited for this CTA's copies of a row sent after a CTA barrier
    that follows every thread's reads of the slot — the caller's to provide, with `chain_slots`
    slots: a CTA barrier between reading row i's slot and sending the next row sent after it
    (the row sums' exchange). That chain of exchanges orders them (the simulator follows it), and
    nothing else: no cluster barrier, whose per-row release arrive costs a `MEMBAR.ALL.GPU`.
    ``mine[s]`` is written again once the peers received its copies (the chain again).

    - ``open_(bar)``: initialises the barriers, then a cluster barrier (every peer's initialised);
    - ``send(stats, mine, bar, rank, tid, i, v0, v1, v2, v3)``: thread 0 writes row i's four
      statistics into its own row of slot ``i % slots`` and sends them into that row of every
      other CTA's;
    - ``receive(bar, i)``: returns once row i's slot is whole;
    - ``close()``: a cluster barrier (no CTA exits while a peer may still copy into it; every
      copy was waited for, so its arrive is ``.relaxed``: execution only)."""
    from .. import T, Tx

    @T.macro
    def open_(bar):
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()

    @T.macro
    def send(stats, mine, bar, rank, tid, i, v0, v1, v2, v3):
        s = i % slots
        if tid == 0:
            mine[s, 0] = v0
            mine[s, 1] = v1
            mine[s, 2] = v2
            mine[s, 3] = v3
            T.ptx.fence.proxy.async_.shared__cta()
            stats[s * n + rank, 0] = v0
            stats[s * n + rank, 1] = v1
            stats[s * n + rank, 2] = v2
            stats[s * n + rank, 3] = v3
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([s]), (n - 1) * 16)
            for q in range(1, n):
                Tx.copy_async(
                    stats[s * n + rank, 0:4], mine[s, 0:4], dispatch="dsmem", mbar=bar.ptr_to([s]), remote_cta_id=(rank + q) % n
                )

    @T.macro
    def receive(bar, i):
        bar.wait(i % slots, i // slots % 2)

    @T.macro
    def close():
        T.ptx.barrier.cluster.arrive.relaxed()
        T.ptx.barrier.cluster.wait()

    return open_, send, receive, close


def check_lanes(n: int):
    """The slices' combines below give slice p to lane p (lanes past the ``n`` slices read the
    last one's, in bounds of the slot, and add nothing): at most a warp's 32."""
    if not 1 <= n <= 32:
        raise ValueError(f"a cluster of {n} CTAs: its slices' statistics are combined by a warp's lanes (at most 32)")


def lane_groups(n: int) -> bool:
    """Whether ``n`` slices' combine takes groups of ``n`` lanes: a power of two, so lane l reads
    slice ``l % n`` and a butterfly of width ``n`` (log2 n shuffles, not 5) leaves every lane the
    total; the same bits as the whole warp's butterfly over zeros past the ``n`` (adding a zero is
    exact)."""
    return n & (n - 1) == 0


def slot_sum(n: int):
    """A macro ``sum_(stats, s, col, out, j, lane)``: ``out[j]`` = the sum over the ``n`` slices
    of the statistic ``stats[s n + p, col]`` that each published into slot ``s``
    (`cluster_exchange`: 0; `chained_exchange`: ``i % slots``): lane p reads slice p's, then a
    warp's butterfly sums them (pairwise; every lane, every warp the same bits), one
    shared-memory read and five shuffles a thread where a sum in slice order took ``n`` reads
    (`lane_groups`: log2 n shuffles)."""
    from .. import T

    check_lanes(n)

    @T.macro
    def sum_(stats, s, col, out, j, lane):
        slot_total = T.cuda.warp_sum(T.if_then_else(lane < n, stats[s * n + T.min(lane, n - 1), col], 0.0))
        out[j] = slot_total

    @T.macro
    def grouped(stats, s, col, out, j, lane):
        slot_total = T.cuda.warp_sum(stats[s * n + lane % n, col], width=n)
        out[j] = slot_total

    return grouped if lane_groups(n) else sum_


def slice_moments(n: int, width: int, h: int, full: bool = True):
    """A macro ``moments(stats, out, s, lane)`` combining the statistics that the ``n`` slices of
    ``width`` columns of a row of ``h`` published into slot ``s`` (`cluster_exchange`: 0;
    `chained_exchange`: ``i % slots``; slice p's ``stats[s n + p]`` = its sum, its sum of squared
    deviations about its own mean ``m_p``, and, with ``full``, ``sum(g)`` and ``sum(g (x -
    m_p))``) exactly about the row's mean, as Chan et al. combine partial variances: ``out[0]``
    the row's mean, ``out[1] = sum_p M2_p + n_p (m_p - mean)^2``, and with ``full`` ``out[2] =
    sum_p sum(g)``, ``out[3] = sum_p [sum g (x - m_p) + (m_p - mean) sum(g)] = sum g (x -
    mean)``. Lane p takes slice p's terms and a warp's butterfly sums them (`slot_sum`).
    ``n_p``: the slice's columns inside the row (the last ones may hold none); where every slice
    has as many, a constant, so the mean of a slice is a multiply by ``1 / n_p`` (exact for the
    power-of-two slices of wide rows), not a division per row."""
    from .. import T

    check_lanes(n)
    counts = [max(min(h - p * width, width), 0) for p in range(n)]
    uniform = len(set(counts)) == 1

    @T.macro
    def moments(stats, out, s, lane):
        lane_own = lane < n
        lane_slot = s * n + T.min(lane, n - 1)
        lane_total = T.if_then_else(lane_own, stats[lane_slot, 0], 0.0)
        slices_total = T.cuda.warp_sum(lane_total)
        out[0] = slices_total / float(h)
        if uniform:
            lane_gap = lane_total * (1.0 / float(counts[0])) - out[0]
            lane_spread = T.if_then_else(lane_own, stats[lane_slot, 1] + float(counts[0]) * lane_gap * lane_gap, 0.0)
        else:
            lane_cols = T.cast(T.max(T.min(h - T.min(lane, n - 1) * width, width), 0), "float32")
            lane_gap = T.if_then_else(lane_cols > 0.0, lane_total / T.max(lane_cols, 1.0), 0.0) - out[0]
            lane_spread = T.if_then_else(lane_own, stats[lane_slot, 1] + lane_cols * lane_gap * lane_gap, 0.0)
        slices_spread = T.cuda.warp_sum(lane_spread)
        out[1] = slices_spread
        if full:
            lane_g = T.if_then_else(lane_own, stats[lane_slot, 2], 0.0)
            slices_g = T.cuda.warp_sum(lane_g)
            slices_gx = T.cuda.warp_sum(T.if_then_else(lane_own, stats[lane_slot, 3] + lane_gap * lane_g, 0.0))
            out[2] = slices_g
            out[3] = slices_gx

    @T.macro
    def grouped(stats, out, s, lane):  # (`lane_groups`: lane l takes slice l % n)
        lane_slot = s * n + lane % n
        lane_total = stats[lane_slot, 0]
        slices_total = T.cuda.warp_sum(lane_total, width=n)
        out[0] = slices_total / float(h)
        if uniform:
            lane_gap = lane_total * (1.0 / float(counts[0])) - out[0]
            lane_spread = stats[lane_slot, 1] + float(counts[0]) * lane_gap * lane_gap
        else:
            lane_cols = T.cast(T.max(T.min(h - lane % n * width, width), 0), "float32")
            lane_gap = T.if_then_else(lane_cols > 0.0, lane_total / T.max(lane_cols, 1.0), 0.0) - out[0]
            lane_spread = stats[lane_slot, 1] + lane_cols * lane_gap * lane_gap
        slices_spread = T.cuda.warp_sum(lane_spread, width=n)
        out[1] = slices_spread
        if full:
            lane_g = stats[lane_slot, 2]
            slices_g = T.cuda.warp_sum(lane_g, width=n)
            slices_gx = T.cuda.warp_sum(stats[lane_slot, 3] + lane_gap * lane_g, width=n)
            out[2] = slices_g
            out[3] = slices_gx

    return grouped if lane_groups(n) else moments


def tile_moments(per: int, keep_mean: bool = False):
    """A macro ``step(run, part, x, t, k)``: folds tile ``k`` of a row (this thread's ``per``
    registers ``x``, left centered about the tile's mean) into the thread's running mean
    ``run[0]`` and sum of squared deviations about it ``run[1]``, as Chan et al. combine partial
    variances (no cancellation); ``t``: a tile of scratch (``x`` itself where ``x`` is not read
    again). With ``keep_mean``, leaves the tile's mean in ``part[0]`` (for callers folding more
    statistics about it).
    The squared deviations are summed in pairs, ``fma(x[i + per/2], x[i + per/2], x[i]^2)``, then
    the ``per / 2`` pairs in order: three floating-point instructions for two columns where a
    square and an add took four (the row norms' forwards issue-bound at 262k)."""
    from .. import T, Tx

    half = per // 2 if per % 2 == 0 else 0

    @T.macro
    def step(run, part, x, t, k):
        Tx.sum(part[0:1], x[0:per])
        tile_mean = part[0] * (1.0 / per)
        Tx.add(x[0:per], x[0:per], -tile_mean)
        if half:
            Tx.mul(t[0:half], x[0:half], x[0:half])
            Tx.fma(t[0:half], x[half:per], x[half:per], t[0:half])
            Tx.sum(part[0:1], t[0:half])
        else:
            Tx.mul(t[0:per], x[0:per], x[0:per])
            Tx.sum(part[0:1], t[0:per])
        seen = T.cast(k, "float32") * float(per)
        d = tile_mean - run[0]
        run[1] = run[1] + part[0] + d * d * (seen * float(per) / (seen + float(per)))
        run[0] = run[0] + d * (float(per) / (seen + float(per)))
        if keep_mean:
            part[0] = tile_mean

    return step


# Above this many warps a CTA, `cta_moments` merges the warps' pairs across a warp's lanes.
LANE_MERGE_WARPS = 8


def cta_moments(warps: int, count: int):
    """A macro ``moments(run, scratch, wid, lane, parity)``: every thread's ``run`` = (mean, sum
    of squared deviations about it) of its ``count`` elements becomes the CTA's, of ``warps * 32
    * count``, combined exactly as Chan et al. combine partial variances, in two levels: each
    warp's mean (a butterfly sum of its threads' means) and squared deviations about it (a
    butterfly sum of each thread's plus ``count (mean_t - mean_w)^2``); lane 0 of warp w stores
    that pair in row ``parity`` of ``scratch`` (shared, ``(2, 2 * warps)`` float32); one barrier;
    every thread combines the warps' pairs the same way: in order, or over more than
    `LANE_MERGE_WARPS` warps lane w taking warp w's pair into two butterflies (in order, every
    thread held all the pairs at once: 64 registers at 32 warps, LayerNorm's 1,024-thread
    designs spilled). One barrier where the mean
    and then the deviations about it took a `T.cuda.cta_sum` each (two barriers each);
    ``parity`` alternates as `alternating_sums`' does (one warp: no barrier, no ``scratch``)."""
    from .. import T

    lanes = float(32 * count)

    @T.macro
    def moments(run, scratch, wid, lane, parity):
        means = T.cuda.warp_sum(run[0])
        wmean = means * (1.0 / 32.0)
        d = run[0] - wmean
        wdev = T.cuda.warp_sum(run[1] + d * d * float(count))
        if warps > 1:
            if lane == 0:
                scratch[parity, 2 * wid] = wmean
                scratch[parity, 2 * wid + 1] = wdev
            T.cuda.cta_sync()
            if warps > LANE_MERGE_WARPS:  # lane w takes warp w's pair; two butterflies
                lane_own = lane < warps
                lane_warp = T.min(lane, warps - 1)
                lane_mean = T.if_then_else(lane_own, scratch[parity, 2 * lane_warp], 0.0)
                warp_means = T.cuda.warp_sum(lane_mean)
                run[0] = warp_means * (1.0 / float(warps))
                dw = lane_mean - run[0]
                warp_devs = T.cuda.warp_sum(T.if_then_else(lane_own, scratch[parity, 2 * lane_warp + 1] + dw * dw * lanes, 0.0))
                run[1] = warp_devs
            else:
                run[0] = 0.0
                for w in list(range(warps)):
                    run[0] = run[0] + scratch[parity, 2 * w]
                run[0] = run[0] * (1.0 / float(warps))
                run[1] = 0.0
                for w in list(range(warps)):
                    dw = scratch[parity, 2 * w] - run[0]
                    run[1] = run[1] + scratch[parity, 2 * w + 1] + dw * dw * lanes
        else:
            run[0] = wmean
            run[1] = wdev

    return moments


def tiles_layout(g: "RowTile", chunks: int):
    """The layout of ``chunks`` register tiles of ``g`` held at once (tile k at a thread's registers
    ``[k * per, (k + 1) * per)``): partial sums over a streamed row or slice, a slice's bias."""
    from ..layout import S, TileLayout, tx

    return TileLayout(S[(chunks, g.width // (g.warps * 32 * g.vec), g.warps * 32, g.vec) : (g.per, g.vec, 1 @ tx, 1)])


def shared_planes(chunks: int, threads: int, per: int):
    """The layout of a float32 slice in shared memory, ``(chunks, threads * per)``, read in
    register tiles of ``per`` columns a thread (a multiple of 4): a thread's 16-byte quarters of a
    tile in ``per / 4`` planes, so that each 16-byte read of a warp is 512 contiguous bytes (a
    thread's 32 contiguous bytes would take two wavefronts a read)."""
    from ..layout import S, TileLayout

    return TileLayout(S[(chunks, threads, per // 4, 4) : (threads * per, 4, threads * 4, 1)])


def row_io(g: "RowTile", dtype: str, fill: float = 0.0):
    """The row kernels' guarded load and store, as macros: ``load(dst, src, stage)`` reads the
    region ``src`` into the float32 tile ``dst``, the padding past the row's end read as ``fill``;
    ``store(dst, src, stage)`` writes ``src`` to the region ``dst``, nothing past the row's end.
    16-bit rows go through ``stage`` (registers of the row's dtype); float32 rows pass the tile
    itself."""
    from .. import T, Tx

    width, widen = g.width, dtype != "float32"

    @T.macro
    def load(dst, src, stage):
        if widen:
            Tx.cta.copy(stage[0:width], src, clip=True, other=fill)
            Tx.cta.cast(dst[0:width], stage[0:width])
        else:
            Tx.cta.copy(dst[0:width], src, clip=True, other=fill)

    @T.macro
    def store(dst, src, stage):
        if widen:
            Tx.cta.cast(stage[0:width], src[0:width])
            Tx.cta.copy(dst, stage[0:width], clip=True)
        else:
            Tx.cta.copy(dst, src[0:width], clip=True)

    return load, store


def weight_dtype(dtype: str, w_dtype: str, shared: bool = False) -> str:
    """A norm's weight's (and bias's) dtype: the rows' (``w_dtype`` ""), or float32 beside 16-bit
    rows (PyTorch's mixed-precision norms: float32 parameters, bf16/f16 activations); not in the
    designs that keep the weight's slices in shared memory (``shared``: of the rows' dtype)."""
    wd = w_dtype or dtype
    if wd not in (dtype, "float32") or (wd != dtype and shared):
        raise ValueError(f"w_dtype={w_dtype!r}: the rows' dtype ({dtype}) or float32 (not where the weight's slices are in shared memory)")
    return wd


def weight_dtype_arg(dtype: str, weight) -> dict:
    """A norm kernel's ``w_dtype`` argument for a ``weight`` (an array) beside rows of ``dtype``:
    none where it has their dtype (the kernels' default, `weight_dtype`)."""
    wd = dtype_name(weight)
    return {} if wd == dtype else {"w_dtype": wd}


def weight_loader(g: "RowTile", dtype: str, wd: str, load):
    """A row tile's loader (`row_io`) of a weight of dtype ``wd``: ``load``, the rows' own, where
    it has their dtype."""
    return load if wd == dtype else row_io(g, wd)[0]


def residual_add(g: "RowTile", dtype: str):
    """The fused residual add of the norms, as a macro ``add(x, t, src, dst, stage)``: the tile
    ``x`` becomes ``x + r`` (``r``: the region ``src``, read into the scratch tile ``t``), rounded to
    ``dtype`` as the unfused add would round it, and is written to the region ``dst`` (the new
    residual); nothing past the row's end is read or written (`row_io`)."""
    from .. import T, Tx

    width, widen = g.width, dtype != "float32"
    load, store = row_io(g, dtype)

    @T.macro
    def add(x, t, src, dst, stage):
        load(t, src, stage)
        Tx.cta.add(x[0:width], x[0:width], t[0:width])
        store(dst, x, stage)
        if widen:  # the rounded sum, as the next op would read it
            Tx.cta.cast(x[0:width], stage[0:width])

    return add


def _target_has_clusters() -> bool:
    """Whether the default target (`runtime.default_target`: the GPU's, or `$TIRX_TARGET`) launches
    thread-block clusters: sm_90 and newer."""
    from ..runtime import default_target

    digits = "".join(ch for ch in default_target().split("_", 1)[-1] if ch.isdigit())
    return bool(digits) and int(digits) >= 90


# The clusters a ``persist`` design's rows are spread over in the simulator.
SIM_CLUSTERS = 2


def persist_args(kernel, args) -> tuple:
    """A ``persist`` design's arguments (`autotune`'s ``launch_args``): the call's, and after them
    the rows per cluster (its last parameter, ``per_cluster``) that spread the ``m`` rows evenly
    over the clusters the GPU holds at once (`Kernel.resident_ctas`: a second wave's clusters
    would start only as the first's finish); in the simulator over `SIM_CLUSTERS`. Other
    designs' arguments unchanged."""
    params = kernel.params
    if params[-1].name != "per_cluster":
        return tuple(args)
    m, x = next(a for a, p in zip(args, params) if p.name == "m"), args[0]
    on_gpu = is_torch(x) and x.is_cuda
    clusters = kernel.resident_ctas(x.get_device()) // kernel.cluster_size if on_gpu else SIM_CLUSTERS
    return (*args, max(1, -(-m // max(1, clusters))))


# More than 4^(ROWS_CLASS_TOP - 1) rows (65,536) are one size class (`rows_class`).
ROWS_CLASS_TOP = 9


def rows_class(args) -> int:
    """A row kernel's size class (`autotune`'s ``size``): its rows (the first operand's leading
    extent; a grouped GEMM's: all groups' rows) in powers of four, ceil(log4(rows)), up to
    `ROWS_CLASS_TOP`. Its candidates' times depend on the rows as much as on the row length: at a
    few rows each one is a launch's cost and the choice is noise (H200: a LayerNorm of 4,096
    columns tuned on a test's rows ran a 131,072-row batch at 0.82 of a copy, and at 262,144
    columns at 0.56, where its tuning on the batch gives 0.98 and 0.93)."""
    rows = args[0].shape[0]
    return min((max(rows, 1) - 1).bit_length() + 1 >> 1, ROWS_CLASS_TOP)


def prune_rows(length: str = "n", tiles: Callable = lambda dtype, key: 1) -> Callable:
    """The autotuner's pruning of `ROW_CONFIGS` for a row kernel keyed by its row length (the
    factory argument ``length``) and ``dtype``; ``tiles(dtype, key)``: the float32 tiles it
    holds (`row_capacity`). Kept: a CTA per row where the row fits its threads' registers
    without leaving more than half of the first round of vectors idle; streamed where a row
    takes at least two tiles; a lane group per row where the row fits the group's registers
    and half its first round is busy; a cluster per row (`CLUSTER_CONFIGS`, where the op has
    that design) for rows of `CLUSTER_MIN` or more whose slices fit the CTAs' registers, on a
    target with clusters (sm_90+), or, with ``shared`` (`SHARED_CLUSTER_CONFIGS`), whose slices
    tile the row and fit `SLICE_SHARED_MAX`. Rows too wide for any register tile keep the
    streamed configurations."""

    def prune(configs, dtype, **key):
        n, held = key[length], tiles(dtype, key)
        vec = 16 // elem_bytes(dtype)
        clusters = _target_has_clusters()

        def fits(cfg):
            t, cap = cfg["threads"], row_capacity(cfg["threads"], dtype, held)
            if cfg.get("shared"):
                cn = cfg["cluster"]
                fit = n % (cn * t * vec) == 0 and n // cn * elem_bytes(dtype) <= SLICE_SHARED_MAX
                return clusters and n >= CLUSTER_MIN and fit
            if cfg.get("cluster"):
                part = -(-n // cfg["cluster"])
                return clusters and n >= CLUSTER_MIN and -(-part // (t * vec)) * vec <= cap and t * vec // 2 < part
            if cfg.get("tpr"):
                p = cfg["tpr"]
                return -(-n // (p * vec)) * vec <= cap and p * vec // 2 < n
            if cfg.get("stream"):
                return n > t * min(CHUNK, cap)
            return -(-n // (t * vec)) * vec <= cap and (t == 32 or t * vec // 2 < n)

        return [cfg for cfg in configs if fits(cfg)]

    return prune


# The torch path's decisions per call signature (`signature_plan`), bounded: a model calls a few
# shapes over and over, each call's checks, operand views and kernel lookups made once.
PLANS: Dict[tuple, Callable] = {}
PLANS_MAX = 4096


def signature(tensors) -> tuple:
    """What a plan is made for: each tensor's shape, strides, dtype and device, and whether it
    starts on `ARRAY_ALIGN` bytes (a plan launches unchecked: `aligned` copies the others first)."""
    return tuple((t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % ARRAY_ALIGN == 0) for t in tensors)


def aligned(tensors: tuple) -> tuple:
    """``tensors`` with each CUDA tensor that starts off `ARRAY_ALIGN` bytes (a view of a flat
    buffer at an offset) copied, strides kept: what an op's kernels may read."""
    for t in tensors:  # (a loop, not a generator: a decoding step's host time)
        if t is not None and t.data_ptr() % ARRAY_ALIGN:
            break
    else:
        return tensors
    return tuple(t if t is None or t.data_ptr() % ARRAY_ALIGN == 0 or not t.is_cuda else t.clone() for t in tensors)


def signature_plan(tensors, extra: tuple, new: Callable) -> Callable:
    """``run(...)`` for tensors of these shapes, strides, dtypes and devices (and the op's
    ``extra`` arguments): ``new()``'s, made on the first call of a signature (its checks and
    errors then, as every call's would be); a call after that allocates the outputs and launches
    the tuned kernels (the host time of a small op is most of its time). An op may look its plan
    up in ``PLANS`` under ``extra + signature(tensors)`` first, making ``new`` only on a miss."""
    key = extra + signature(tensors)
    plan = PLANS.get(key)
    if plan is None:
        if len(PLANS) >= PLANS_MAX:
            PLANS.clear()
        plan = PLANS[key] = new()
    return plan


def empty_like(x):
    if is_torch(x):
        import torch

        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty(x.shape, dtype=x.dtype)


def new_array(like, shape, dtype=None, fill=None):
    """A new array beside ``like`` (a torch tensor: on its device; else NumPy) of ``shape`` and
    ``dtype`` (a name; default ``like``'s), filled with ``fill`` unless None (uninitialised)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if is_torch(like):
        import torch

        dt = like.dtype if dtype is None else getattr(torch, dtype)
        if fill is None:  # (`new_empty`: a third less host time than torch.empty's arguments)
            return like.new_empty(shape, dtype=dt)
        return torch.full(shape, fill, dtype=dt, device=like.device)
    dt = like.dtype if dtype is None else np.dtype(dtype)
    return np.empty(shape, dtype=dt) if fill is None else np.full(shape, fill, dtype=dt)


# The largest work buffer a plan keeps per stream (`scratch`); a larger one is allocated per call,
# whose cost is nothing beside a launch that large.
SCRATCH_HELD_BYTES = 32 << 20
# The views of a held buffer kept, one per shape met (`scratch`), at most.
SCRATCH_VIEWS = 64
# Element bytes by dtype name (`scratch`: np.dtype per call costs more than the rest of it).
_ITEMSIZE: Dict[str, int] = {}


def scratch(like, shape, dtype: str, held: dict, fill: Optional[float] = None, init: Optional[Callable] = None):
    """A work buffer of ``shape`` and ``dtype`` (a NumPy name) beside ``like`` that one launch
    writes and the same or the next launch on its stream reads (split-K's parts, split-KV's
    partial outputs): on a CUDA device a view (kept per shape) of one flat buffer per stream and
    dtype, kept in ``held`` (one per role: a call's buffers live together come from different
    ones) and reused, grown where a call needs more, by the stream's later calls of any shape,
    which run after this one's kernels (cuBLAS keeps its workspace per stream so): the memory
    held is the largest call's, not one buffer per shape met; a new one while a CUDA graph is
    being captured (the graph's own memory), past `SCRATCH_HELD_BYTES`, or for NumPy arrays.
    Its contents on entry are undefined, or with ``fill`` that value when made (kept by a buffer
    kernels only read, `constant_vector`; stream-K's grid group barrier word, made 0, is left
    with its low 31 bits 0 by every launch, all the barrier needs), or ``init(flat)``'s, given
    the new flat array (of at least ``shape``'s elements) when made."""
    shape = tuple(shape)
    size = math.prod(shape)
    itemsize = _ITEMSIZE.get(dtype) or _ITEMSIZE.setdefault(dtype, _numpy_dtype(dtype).itemsize)
    if is_torch(like) and like.is_cuda and size * itemsize <= SCRATCH_HELD_BYTES:
        torch_c = loaded_torch()._C  # (an op's every call: no import statement)
        if not torch_c._cuda_isCurrentStreamCapturing():
            dev = like.get_device()
            key = (dev, torch_c._cuda_getCurrentRawStream(dev), dtype)
            flat, views = held.get(key, (None, None))
            if flat is None or flat.numel() < size:
                flat, views = held[key] = (new_array(like, size, dtype, fill), {})
                if init is not None:
                    init(flat)
            view = views.get(shape)
            if view is None:  # (a view made per call costs more host time than the rest of it)
                if len(views) >= SCRATCH_VIEWS:
                    views.clear()
                view = views[shape] = flat[:size].view(shape)
            return view
    made = new_array(like, shape, dtype, fill)
    if init is not None:
        init(made.reshape(-1))
    return made


def _numpy_dtype(name: str):
    from ..runtime import numpy_dtype  # (bfloat16 and FP8 through ml_dtypes)

    return numpy_dtype(name)


# The filled vectors `constant_vector` keeps, a `scratch` role per value.
_CONSTANTS: Dict[float, dict] = {}


def constant_vector(like, n: int, dtype: str, value: float):
    """A vector of ``n`` ``value``s of ``dtype`` (a name) beside ``like`` that kernels only read
    (an absent weight's ones, an absent bias's zeros): a `scratch` buffer filled with ``value``
    (per stream and dtype, grown where a call needs more; its fill a launch on that stream, before
    every kernel of the stream that reads it), where a new one cost every call a fill kernel."""
    return scratch(like, (n,), dtype, _CONSTANTS.setdefault(value, {}), fill=value)


def contiguous(x):
    """``x`` row-major, and (a CUDA tensor) starting on `ARRAY_ALIGN` bytes: a view of a flat
    buffer at another offset is copied."""
    if is_torch(x):
        x = x.contiguous()
        # (a traced call's fake tensors have no address: the op they trace realigns when it runs)
        return x.clone() if x.is_cuda and not compiling() and x.data_ptr() % ARRAY_ALIGN else x
    return np.ascontiguousarray(x)


def torch_op(name: str, build: Callable, autograd: Optional[Callable] = None):
    """`torch.ops.tirx.<name>`, registered on the first call: ``build()`` gives the op's
    function (its annotations are the schema) and its fake implementation; ``autograd(op)``
    registers its backward."""
    op = _ops.get(name)
    if op is None:
        import torch

        if torch.compiler.is_compiling():
            # Dynamo cannot trace a registration; `tirx.ops` registers at import when torch is loaded.
            raise RuntimeError(
                f"tirx.ops.{name} inside torch.compile before its op exists: import torch before tirx.ops "
                "(the ops are registered then), or call it once outside the compiled function"
            )
        _fill_torch_caches(torch)
        schema_fn, fake = build()
        op = _ops[name] = torch.library.custom_op(f"tirx::{name}", schema_fn, mutates_args=())
        op.register_fake(fake)
        if autograd is not None:
            autograd(op)
    return op


# Set while an eager autograd.Function's backward runs (`differentiable`): the ops its formula
# calls run their kernels directly (`inner_op`) instead of through their registered ops.
_eager_backward = contextvars.ContextVar("tirx_eager_backward", default=False)
_functions: Dict[str, Callable] = {}
_direct: Dict[str, Callable] = {}


def differentiable(name: str, build: Callable, autograd: Callable) -> Callable:
    """Op ``name``'s callable where autograd records: under torch.compile the registered op (its
    backward registered with it); eagerly a `torch.autograd.Function` with the op's function and
    the very ``setup_context`` / ``backward`` that ``autograd(op)`` registers — the op's dispatch
    costs host time the Function does not (a matmul's forward and backward: ~100 µs of Python
    through the ops, ~33 µs through the Function, measured on CPU tensors with the kernels
    stubbed)."""
    op = torch_op(name, build, autograd)  # (registered by the first eager call, for a later compiled one)
    if compiling():
        return op
    fn = _functions.get(name)
    if fn is None:
        fn = _functions[name] = _eager_function(build()[0], autograd)
    return fn


def _eager_function(forward: Callable, autograd: Callable) -> Callable:
    import torch

    parts: Dict[str, Callable] = {}

    class _Recorded:  # what `autograd(op)` registers on an op
        def register_autograd(self, backward, *, setup_context):
            parts.update(backward=backward, setup_context=setup_context)

    autograd(_Recorded())

    class Function(torch.autograd.Function):
        # (`forward(ctx, ...)` calling setup_context itself: a separate `setup_context` makes
        # every call bind the arguments through `inspect.signature`, ~20 µs)
        @staticmethod
        def forward(ctx, *args):
            output = forward(*args)
            parts["setup_context"](ctx, args, output)
            return output

        @staticmethod
        def backward(ctx, *grads):
            token = _eager_backward.set(True)
            try:
                return parts["backward"](ctx, *grads)
            finally:
                _eager_backward.reset(token)

    return Function.apply


def inner_op(name: str, build: Callable, autograd: Optional[Callable] = None) -> Callable:
    """Op ``name`` as a backward formula calls it: its function itself in an eager backward
    (`differentiable`), else the registered op (what torch.compile traces)."""
    if _eager_backward.get():
        fn = _direct.get(name)
        if fn is None:
            fn = _direct[name] = build()[0]
        return fn
    return torch_op(name, build, autograd)


def _fill_torch_caches(torch) -> None:
    """The caches the ops read (the torch module, its is_compiling, torch dtype names), filled
    outside any trace (at an op's registration): filled first while Dynamo traces a call, each would
    be a global store or a dict insertion it then guards on (an AssertionError building or checking
    the guard)."""
    global _torch_filled
    if _torch_filled:
        return
    _torch_filled = True
    loaded_torch()
    compiling()
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool):
        _torch_names[dt] = str(dt).replace("torch.", "")


def refuse_grad(op: str, *tensors) -> None:
    """An op without a backward called where autograd records: an error, not a result silently
    without gradient."""
    if any(is_torch(t) and wants_grad(t) for t in tensors if t is not None):
        raise NotImplementedError(f"tirx.ops.{op}: no backward yet; call it under torch.no_grad() (or on detached tensors)")


def wants_grad(x) -> bool:
    """A torch tensor whose result autograd records (the call goes through the registered op)."""
    import torch

    return x.requires_grad and torch.is_grad_enabled()
