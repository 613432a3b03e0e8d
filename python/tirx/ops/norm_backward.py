"""The backward of `rms_norm` and `layer_norm` in TIRx: ``dx`` per row, and the weight's and
bias's gradients summed over rows without atomics.

A persistent grid of ``ctas`` CTAs walks the rows, CTA b taking rows b, b + ctas, ... (a
run-time size, per design: eight per SM, two for wide rows or slices, at most one per row, and
no more than the GPU holds at once, `Kernel.resident_ctas`, in whole clusters: a CTA of a
second wave would take its rows after the first wave's); each row's statistics are
LayerNorm's forward's saved mean and rstd (``saved``, as autograd calls it: its two sums below
then take one pass, as RMSNorm's), or recomputed from ``x`` (RMSNorm's sum of squares comes in the
same pass as its other sum) and, with ``xhat = (x - mean) * rstd`` (mean 0 for RMSNorm) and
``g = w * dy``,

    RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat))
    LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))

A CTA's partial sums of ``dy * xhat`` (dW) and ``dy`` (dB) over its rows stay in registers
beside the row and are written once, a float32 row of ``DWP``/``DBP`` per CTA; a second kernel
sums those ``ctas`` rows per column (`column_sums_kernel`): the two-pass reduction. The designs,
tuned per row length and dtype:

- a CTA per row in registers, the row's three sums in one CTA exchange (`_common.alternating_sums`);
- the same with the next row's x and dy prefetched into a two-row shared-memory ring by
  `cp.async` while a row is computed (``prefetch``: twice the bytes in flight, no more registers);
- short rows in lane groups, several rows per CTA at a time (each row slot keeps its own sums,
  and the CTA adds its slots through shared memory before writing its row);
- a cluster of CTAs per row for wide rows (``cluster``: each CTA a slice, its partial sums in
  registers, one DSMEM exchange of four statistics per row; with ``shared``, the slices of x, dy
  (a ring of 1-4 rows, the next ones prefetched; each thread reads only the vectors it copied,
  so no barrier guards the ring) and w and the partial sums in shared memory, or, with
  ``hold``, a slice of one tile read from shared memory once per row, or, with ``regs``, the
  partial sums in registers and shared memory the slices' alone, a deeper ring of rows, and with
  ``pipe`` the next row's sums sent before a row's dx pass (the exchange in flight while the CTA
  computes); with ``stream``, slices too wide for shared memory streamed through register tiles
  twice, the second time from L2);
- rows streamed through register tiles: one pass for the statistics (two for LayerNorm where
  the row is not whole tiles: the mean, then the deviations about it; over whole tiles one, each
  thread's statistics combined tile by tile about its running mean, as Chan et al. do), a
  last one that writes dx and adds the row's share into the CTA's partial sums, in shared
  memory where they fit (`SHARED_PARTIALS` bytes; each thread only ever touches its own columns
  there, so no barrier), else in the CTA's partial row in global memory, which only that CTA
  touches.

Everything computes in float32; dx, dW and dB are rounded once to the input's dtype."""

from .. import MBarrier, T, Tx
from ..autotune import autotune
from . import _common as c


def _tiles(dtype, key) -> int:
    """Float32 tiles held: x, dy, w, a product, dW (and dB for LayerNorm)."""
    return 6 if key.get("centered") else 5


# Bytes of a CTA's float32 partial sums (dW, and dB) of streamed rows kept in shared memory; past
# it they live in global memory (rows of 40k+ for RMSNorm, 20k+ for LayerNorm).
SHARED_PARTIALS = 160 * 1024


# The ring of the prefetching design (two rows of x and dy), at most: its CTAs stay several per SM.
PREFETCH_RING = 64 * 1024
PREFETCH_CONFIGS = [{"threads": t, "prefetch": True} for t in (64, 128, 256, 512)]


# The shared memory of the cluster design's slices (`_cluster_shared_rows`: x's and dy's ring of
# rows, the weight's, the float32 partial sums), at most: one CTA per SM (of 227 KB, the rest for
# the statistics' slots: RMSNorm's rows of 262,144 over 16 CTAs in a ring of two rows take 224 KB).
CLUSTER_SLICES = 224 * 1024


def cluster_slice_bytes(
    h: int, dtype: str, cluster: int, centered: bool, ring: int = 2, hold: bool = False, regs: bool = False, w32: bool = False
) -> int:
    """Shared memory of `_cluster_shared_rows`'s slices of a row of ``h`` over ``cluster`` CTAs
    (``hold``: LayerNorm's dB partial sums in registers; ``regs``: every partial sum there;
    ``w32``: the weight's slice in float32)."""
    partials = 0 if regs else 4 * (2 if centered and not hold else 1)
    weight = 4 if w32 else c.elem_bytes(dtype)
    return h // cluster * (2 * ring * c.elem_bytes(dtype) + weight + partials)


def partial_registers(h: int, threads: int, cluster: int, centered: bool) -> int:
    """A thread's registers of the ``regs`` design's partial sums: its columns of the slice, for
    dW (and dB)."""
    return h // (cluster * threads) * (2 if centered else 1)


# The ``regs`` design's partial sums take at most this share of a thread's registers (the CTA
# alone on its SM): the rest holds a tile of x, dy, w and dx (one vector each), addresses and sums.
PARTIAL_REGISTERS = 0.55


def _streams_slices(h: int, dtype: str, centered: bool, cfg: dict) -> bool:
    """Whether `_cluster_streamed_rows` applies: rows of `CLUSTER_MIN` or more on a target with
    clusters, split into slices of two or more whole tiles (`cluster_stream_tile`)."""
    if h < c.CLUSTER_MIN or not c._target_has_clusters():
        return False
    try:
        cluster_stream_tile(h, dtype, cfg["threads"], cfg["cluster"], centered)
    except ValueError:
        return False
    return True


def _prune(configs, dtype, **key):
    """`_common.prune_rows`, the prefetching design only where a row is whole vectors of every
    thread (the `cp.async` copies have no guard) and its ring fits `PREFETCH_RING`, the cluster
    design's slices in shared memory only where they fit `CLUSTER_SLICES`, the streamed
    cluster design where its slices are whole tiles (`_streams_slices`), and the chained exchange
    where a row's statistics are two sums (not LayerNorm's recomputed four)."""
    h, vec = key["h"], 16 // c.elem_bytes(dtype)
    if key["centered"] and not key.get("saved"):
        configs = [cfg for cfg in configs if not cfg.get("chain")]
    streamed = [cfg for cfg in configs if cfg.get("cluster") and cfg.get("stream")]
    kept = c.prune_rows("h", _tiles)([cfg for cfg in configs if cfg not in streamed], dtype, **key)
    kept += [cfg for cfg in streamed if _streams_slices(h, dtype, key["centered"], cfg)]

    def fits(cfg):
        if cfg.get("shared") and key.get("w_dtype", "") not in ("", dtype):
            return False  # (their weight slices in shared memory are of the rows' dtype)
        if cfg.get("prefetch"):
            return h % (cfg["threads"] * vec) == 0 and 4 * h * c.elem_bytes(dtype) <= PREFETCH_RING
        if cfg.get("shared"):
            if cfg.get("hold") and c.SharedSlice(h, dtype, cfg["threads"], cfg["cluster"]).chunks != 1:
                return False
            ring, hold, regs = cfg.get("ring", 2), cfg.get("hold", False), cfg.get("regs", False)
            held = partial_registers(h, cfg["threads"], cfg["cluster"], key["centered"])
            if regs and held > PARTIAL_REGISTERS * min(255, 65536 // cfg["threads"]):
                return False
            if cfg.get("w32") and dtype == "float32":
                return False  # (its weight is float32 already)
            return cluster_slice_bytes(h, dtype, cfg["cluster"], key["centered"], ring, hold, regs, cfg.get("w32", False)) <= CLUSTER_SLICES
        return True

    return [cfg for cfg in kept if fits(cfg)]


# The cluster design with its slices in shared memory, also with a deeper ring (more rows in
# flight), or holding a slice of one tile in registers (fewer reads of shared memory).
SHARED_RING_CONFIGS = (
    c.SHARED_CLUSTER_CONFIGS
    + [{"threads": 256, "cluster": n, "shared": True, **more} for n in (2, 4, 8) for more in ({"ring": 1}, {"ring": 3}, {"hold": True})]
    # A cluster of 16 fits a 262,144-column row in shared memory with a one-row ring only (160 KB).
    + [{"threads": t, "cluster": 16, "shared": True, "ring": 1} for t in (256, 512)]
)


# The cluster design streaming its slices through register tiles (rows too wide for shared memory).
# LayerNorm's dB partial sums are held in registers where a thread has at most this many columns.
DB_REGISTERS = 64
STREAM_CLUSTER_CONFIGS = [{"threads": t, "cluster": n, "stream": True} for t in (256, 512) for n in (4, 8, 16)]


# The cluster designs with the statistics exchanged over slots used in turn, no cluster barrier
# per row (`_common.chained_exchange`; RMSNorm, LayerNorm from saved statistics): H200, bf16,
# RMSNorm's backward at 16k 0.87 -> 0.94 of a copy and at 65k 0.83 -> 0.94 (slices of one tile
# held in registers), LayerNorm's at 65k 0.50 -> 0.80. Slices in shared memory (held, in a ring
# of two or three rows), a ring of one or two over 16 CTAs at 262k, or streamed.
CHAINED_CONFIGS = (
    [{"threads": 256, "cluster": n, "shared": True, "chain": True, **more} for n in (2, 4, 8) for more in ({}, {"hold": True})]
    + [{"threads": 256, "cluster": n, "shared": True, "hold": True, "chain": True, "ring": 3} for n in (4, 8, 16)]
    + [{"threads": 256, "cluster": 16, "shared": True, "hold": True, "chain": True}]
    + [{"threads": 256, "cluster": 16, "shared": True, "chain": True, "ring": r} for r in (1, 2)]
    + [{"threads": t, "cluster": n, "stream": True, "chain": True} for t, n in ((256, 16), (512, 8))]
)


# The chained cluster designs with their partial sums in registers and the shared memory for a
# ring of slices (`_cluster_shared_rows`'s ``regs``), or for a ring of two and the weight's slice
# in float32 (``w32``: fewer instructions a row; the tuner's choice at 16k and 65k, H200).
# Pairs of CTAs (16k: a row's exchange waits for one peer, not three; 256 threads hold 32 columns
# each in 119-128 registers, two CTAs an SM; 512 threads 16 in 80-86, one) are not yet timed.
REGS_CONFIGS = [
    {"threads": t, "cluster": n, "shared": True, "regs": True, "chain": True, "ring": r} for t in (256, 512) for n in (2, 4, 8, 16) for r in (2, 3)
] + [{"threads": t, "cluster": n, "shared": True, "regs": True, "chain": True, "w32": True} for t in (256, 512) for n in (2, 4, 8, 16)]
# ... and with the next row's sums sent before a row's dx pass (``pipe``, `_cluster_shared_rows`).
PIPE_CONFIGS = [
    {"threads": t, "cluster": n, "shared": True, "regs": True, "chain": True, "ring": 3, "pipe": True} for t in (256, 512) for n in (2, 4, 8, 16)
]


@autotune(
    configs=c.ROW_CONFIGS
    + PREFETCH_CONFIGS
    + c.CLUSTER_CONFIGS
    + SHARED_RING_CONFIGS
    + STREAM_CLUSTER_CONFIGS
    + CHAINED_CONFIGS
    + REGS_CONFIGS
    + PIPE_CONFIGS,
    key=["h", "dtype", "centered", "saved", "w_dtype"],
    prune=_prune,
    launch_args=lambda kernel, args: _own_grid(kernel, args),  # (defined below)
    size=c.rows_class,
)
def norm_backward_kernel(
    h: int,
    dtype: str,
    threads: int,
    centered: bool = False,
    saved: bool = False,
    tpr: int = 0,
    stream: bool = False,
    prefetch: bool = False,
    cluster: int = 0,
    shared: bool = False,
    ring: int = 2,
    hold: bool = False,
    chain: bool = False,
    regs: bool = False,
    w32: bool = False,
    pipe: bool = False,
    shared_limit: int = SHARED_PARTIALS,
    w_dtype: str = "",
):
    """``DX`` of ``m`` rows of ``h`` elements from ``X``, the weight ``W`` and ``DY``, and the
    float32 partial sums ``DWP[b]`` (and ``DBP[b]``, ``centered``: LayerNorm) of CTA b's rows;
    ``ctas`` CTAs (a run-time argument). ``saved``: LayerNorm's row statistics are the forward's,
    ``MEAN`` and ``RSTD`` (float32 per row; then no ``eps``), not recomputed. ``tpr``: a group of
    that many lanes per row; ``stream``: the rows in register tiles however short; ``prefetch``: the next row's ``x`` and ``dy`` copied into shared
    memory (`cp.async`) while this one is computed; ``shared_limit``: the bytes of streamed rows'
    partial sums kept in shared memory, at most; ``cluster``: a cluster of that many CTAs per row
    (``ctas`` a multiple of it; ``shared``: each CTA's slices in shared memory, x and dy in a ring
    of ``ring`` rows; ``hold``: a slice of one register tile read from it once per row; ``chain``:
    the statistics exchanged over two slots with no cluster barrier per row,
    `_common.chained_exchange`; RMSNorm, or LayerNorm from saved statistics; ``regs``: the shared
    design's partial sums in registers, its tiles one 16-byte vector a thread; ``w32``: its
    weight's slice widened to float32 in shared memory once; ``pipe``: with ``regs``, ``chain`` and
    a ring of 3, the next row's sums sent before this row's dx pass);
    ``w_dtype``: W's
    (`_common.weight_dtype`; the partial sums are float32 whatever it is)."""
    wd = c.weight_dtype(dtype, w_dtype, bool(cluster and shared))
    if chain and not cluster:
        raise ValueError("chain: the cluster designs' exchange (give cluster=)")
    if regs and not (cluster and shared):
        raise ValueError("regs: the partial sums of the cluster design's slices in shared memory (give cluster= and shared=True)")
    if pipe and not (cluster and shared and regs and chain and ring == 3):
        raise ValueError("pipe: the cluster design's regs, chain and a ring of 3 rows (give cluster=, shared=True, regs=True, chain=True, ring=3)")
    if w32 and not (cluster and shared) or w32 and hold:
        raise ValueError("w32: the weight's slice of the cluster design in shared memory, read every pass (give cluster= and shared=True, not hold)")
    if saved and not centered:
        raise ValueError("saved: the forward's statistics are LayerNorm's (centered=True)")
    if tpr:
        rows = _groups(h, dtype, threads, c.RowGroupTile(h, dtype, threads, tpr), centered, saved)
    elif cluster and stream:
        g = cluster_stream_tile(h, dtype, threads, cluster, centered)
        rows = _cluster_streamed_rows(h, dtype, threads, g, cluster, centered, shared_limit, saved, wd, chain)
    elif cluster and shared:
        sl = c.SharedSlice(h, dtype, threads, cluster, 16 // c.elem_bytes(dtype) if regs else c.CHUNK)
        rows = _cluster_shared_rows(h, dtype, threads, sl, cluster, centered, ring, hold, saved, chain, regs, w32, pipe)
    elif cluster:
        rows = _cluster_rows(h, dtype, threads, cluster, centered, saved, wd, chain)
    else:
        g = c.RowTile(h, dtype, threads, _tiles(dtype, {"centered": centered}), stream)
        if prefetch and (g.streamed or g.width != h):
            raise ValueError(f"prefetch: a row of {h} must be whole 16-byte vectors of every one of {threads} threads, in registers")
        rows = _rows(h, dtype, threads, g, centered, shared_limit, prefetch, saved, wd)

    if saved:

        @T.prim_func
        def layer_norm_backward_rows(
            X_ptr: T.handle,
            W_ptr: T.handle,
            DY_ptr: T.handle,
            DX_ptr: T.handle,
            DWP_ptr: T.handle,
            DBP_ptr: T.handle,
            m: T.int32,
            ctas: T.int32,
            MEAN_ptr: T.handle,
            RSTD_ptr: T.handle,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            DY = T.match_buffer(DY_ptr, (m, h), dtype)
            DX = T.match_buffer(DX_ptr, (m, h), dtype)
            DWP = T.match_buffer(DWP_ptr, (ctas, _padded(h)), "float32")
            DBP = T.match_buffer(DBP_ptr, (ctas, _padded(h)), "float32")
            MEAN = T.match_buffer(MEAN_ptr, (m,), "float32")
            RSTD = T.match_buffer(RSTD_ptr, (m,), "float32")
            rows(X, W, DY, DX, DWP, DBP, MEAN, RSTD, m, ctas, None)

        return layer_norm_backward_rows

    @T.prim_func
    def norm_backward_rows(
        X_ptr: T.handle,
        W_ptr: T.handle,
        DY_ptr: T.handle,
        DX_ptr: T.handle,
        DWP_ptr: T.handle,
        DBP_ptr: T.handle,
        m: T.int32,
        ctas: T.int32,
        eps: T.float32,
    ):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), wd)
        DY = T.match_buffer(DY_ptr, (m, h), dtype)
        DX = T.match_buffer(DX_ptr, (m, h), dtype)
        DWP = T.match_buffer(DWP_ptr, (ctas, _padded(h)), "float32")
        DBP = T.match_buffer(DBP_ptr, (ctas, _padded(h)), "float32")
        rows(X, W, DY, DX, DWP, DBP, None, None, m, ctas, eps)

    return norm_backward_rows


def _row_math(per: int, centered: bool, saved: bool = False):
    """The row designs' arithmetic on a thread's ``per`` registers of a tile, as macros:
    ``add_sums(acc, part, x, w, dy, t)`` adds the tile's sums of ``x^2`` (``x`` centered, for
    LayerNorm; not where the statistics are ``saved``), ``g`` (LayerNorm only) and ``g x`` to
    ``acc[0:3]`` (``g = w dy``); ``dx(t, xhat, w, dy, rstd, c_gx, mean_g)`` sets ``t = rstd * (g
    - xhat * c_gx - mean_g)`` (``mean_g``: LayerNorm's ``mean(g)``; ``c_gx = mean(g xhat)``).
    ``part`` and ``t``: scratch."""

    @T.macro
    def add_sums(acc, part, xl, wl, dyl, tl):
        if not saved:
            Tx.mul(tl[0:per], xl[0:per], xl[0:per])
            Tx.sum(part[0:1], tl[0:per])
            acc[0] = acc[0] + part[0]
        Tx.mul(tl[0:per], wl[0:per], dyl[0:per])  # g
        if centered:
            Tx.sum(part[0:1], tl[0:per])
            acc[1] = acc[1] + part[0]
        Tx.mul(tl[0:per], tl[0:per], xl[0:per])
        Tx.sum(part[0:1], tl[0:per])
        acc[2] = acc[2] + part[0]

    @T.macro
    def dx(tl, xl, wl, dyl, rstd, c_gx, mean_g):
        # rstd g - rstd mean(g), then - (rstd c_gx) xhat: an fma each (NVRTC contracts nothing)
        Tx.mul(tl[0:per], wl[0:per], dyl[0:per])
        if centered:
            Tx.fma(tl[0:per], tl[0:per], rstd, -mean_g * rstd)
        else:
            Tx.mul(tl[0:per], tl[0:per], rstd)
        Tx.fma(tl[0:per], xl[0:per], -c_gx * rstd, tl[0:per])

    return add_sums, dx


def _row_sums(warps: int, saved: bool):
    """The row designs' CTA exchange of their sums (`_row_math`'s ``acc``): all three, or, where the
    statistics are ``saved``, ``acc[1:3]`` (no ``x^2``)."""
    return c.alternating_sums(2, warps, first=1) if saved else c.alternating_sums(3, warps)


def _add_tile(chunks: int, per: int):
    """A macro ``add(acc, k, t)``: ``acc`` tile ``k`` (registers ``[k * per, (k + 1) * per)``) +=
    ``t[0:per]`` for a run-time ``k``: registers take constant indices, so a branch per tile
    (unrolling the loop around it instead, nvcc hoists every tile's loads and spills)."""

    @T.macro
    def add(acc, k, t):
        for kk in list(range(chunks)):
            if k == kk:
                Tx.add(acc[kk * per : kk * per + per], acc[kk * per : kk * per + per], t[0:per])

    return add


def _saved_ahead():
    """A macro ``ahead(st, cur, MEAN, RSTD, r, m)``: ``cur[0:2]`` (None: nothing) = ``st[0:2]``,
    the row loaded before, then ``st[0:2]`` = row ``r``'s saved mean and rstd (0 past the last
    row): loaded a row before they are used, the loads' latency hides behind that row (read where
    the row starts, they stalled it: LayerNorm at 4,096 columns 0.96 -> 0.85 of a copy)."""

    @T.macro
    def ahead(st, cur, MEAN, RSTD, r, m):
        if cur is not None:
            cur[0] = st[0]
            cur[1] = st[1]
        st[0] = T.if_then_else(r < m, MEAN[r], 0.0)
        st[1] = T.if_then_else(r < m, RSTD[r], 0.0)

    return ahead


def _saved_shared():
    """Macros passing the saved mean and rstd through shared memory, for the cluster designs
    whose rows meet at a CTA barrier each (`alternating_sums`): ``first(st, sst, MEAN, RSTD, q,
    step, m, tid)`` before the rows puts row ``q``'s in ``sst[0]`` and thread 0's ``st`` = row ``q
    + step``'s (then a CTA barrier); ``row(st, sst, mom, MEAN, RSTD, r, i, step, m, tid)`` at row
    ``i`` (``r``) reads this row's into ``mom[0:2]`` from ``sst[i % 2]``, and thread 0 stores
    the next row's (loaded a row ago) into ``sst[(i + 1) % 2]``, before the row's barrier, and
    loads the row after it. Loaded into every thread a row ahead (`_saved_ahead`), nvcc moved
    the uniform value into uniform registers within the row, every warp waiting on the load
    there (LayerNorm at 16k: 3.8 of the 9.2 cycles between a warp's instructions)."""

    @T.macro
    def first(st, sst, MEAN, RSTD, q, step, m, tid):
        if tid == 0:
            sst[0, 0] = T.if_then_else(q < m, MEAN[q], 0.0)
            sst[0, 1] = T.if_then_else(q < m, RSTD[q], 0.0)
            st[0] = T.if_then_else(q + step < m, MEAN[q + step], 0.0)
            st[1] = T.if_then_else(q + step < m, RSTD[q + step], 0.0)
        T.cuda.cta_sync()

    @T.macro
    def row(st, sst, mom, MEAN, RSTD, r, i, step, m, tid):
        mom[0] = sst[i % 2, 0]
        mom[1] = sst[i % 2, 1]
        if tid == 0:  # (row i - 1's barrier ordered the others' reads of this slot before it)
            sst[(i + 1) % 2, 0] = st[0]
            sst[(i + 1) % 2, 1] = st[1]
            st[0] = T.if_then_else(r + 2 * step < m, MEAN[r + 2 * step], 0.0)
            st[1] = T.if_then_else(r + 2 * step < m, RSTD[r + 2 * step], 0.0)

    return first, row


def _ring_io(width: int, widen: bool):
    """The prefetching designs' rings of rows in shared memory, as macros: ``fetch(xs, dys, X, DY,
    slot, r, c0, m)`` starts copying columns ``[c0, c0 + width)`` of row ``r`` of x and dy into
    ``slot`` (nothing past the last row; one `cp.async` group either way); ``from_ring(dst, ring,
    slot, stage)`` reads a slot into the float32 tile ``dst`` (16-bit rows through ``stage``)."""

    @T.macro
    def fetch(xs, dys, X, DY, slot, r, c0, m):
        if (r >= 0) & (r < m):  # (r >= 0 too: a run-time stride has no known sign)
            Tx.cta.copy_async(xs[slot, 0:width], X[r, c0 : c0 + width])
            Tx.cta.copy_async(dys[slot, 0:width], DY[r, c0 : c0 + width])
        T.ptx.cp_async.commit_group()

    @T.macro
    def from_ring(dst, ring, slot, stage):
        if widen:
            Tx.cta.copy(stage[0:width], ring[slot, 0:width])
            Tx.cta.cast(dst[0:width], stage[0:width])
        else:
            Tx.cta.copy(dst[0:width], ring[slot, 0:width])

    return fetch, from_ring


def _partial_adder(width: int, per: int, shared: bool):
    """A macro ``add_partial(acc, P, a, b2, first)``: ``P += a * b2`` (b2 None: ``P += a``)
    through the register tile ``acc``, ``P`` a tile of a CTA's partial sums (``shared``: in shared
    memory; else its row in global memory, guarded at the row's end; overwritten when ``first``)."""

    @T.macro
    def add_partial(acc, P, a, b2, first):
        al = acc.local()
        if first:
            if b2 is None:
                Tx.add(al[0:per], a[0:per], 0.0)
            else:
                Tx.mul(al[0:per], a[0:per], b2[0:per])
        else:
            if shared:
                Tx.cta.copy(acc[0:width], P)
            else:
                Tx.cta.copy(acc[0:width], P, clip=True, other=0.0)
            if b2 is None:
                Tx.add(al[0:per], al[0:per], a[0:per])
            else:
                Tx.fma(al[0:per], a[0:per], b2[0:per], al[0:per])
        if shared:
            Tx.cta.copy(P, acc[0:width])
        else:
            Tx.cta.copy(P, acc[0:width], clip=True)

    return add_partial


def _chan_step(per: int):
    """A macro ``step(run, part, xl, wl, dyl, tl, k)``: tile ``k`` (the thread's ``per``
    registers ``xl``, ``wl``, ``dyl``; ``xl`` left centred on the tile's mean) added to the
    thread's running LayerNorm statistics ``run``: its mean and squared deviations about it
    (`_common.tile_moments`), ``sum(g)`` and ``sum(g (x - mean))`` (``g = w dy``), each tile
    combined about the running mean as Chan et al. combine partial variances. ``part``, ``tl``:
    scratch."""
    moments = c.tile_moments(per, keep_mean=True)

    @T.macro
    def step(run, part, xl, wl, dyl, tl, k):
        old_mean = run[0]
        moments(run, part, xl, tl, k)
        tile_mean = part[0]
        Tx.mul(tl[0:per], wl[0:per], dyl[0:per])  # g
        Tx.sum(part[0:1], tl[0:per])
        tile_g = part[0]
        Tx.mul(tl[0:per], tl[0:per], xl[0:per])
        Tx.sum(part[0:1], tl[0:per])
        run[3] = run[3] + (old_mean - run[0]) * run[2] + part[0] + (tile_mean - run[0]) * tile_g
        run[2] = run[2] + tile_g

    return step


def _chan_pass(g: c.RowTile, load, cols: int, row_total, load_w=None):
    """A macro ``stats(run, part, acc, x, dy, w, tmp, stage, X, DY, W, r, c0, scratch, wid, lane,
    parity)``: LayerNorm's statistics of the ``cols`` columns of row ``r`` from column ``c0`` (the
    row, or a CTA's slice of it; whole tiles of ``g``) in one pass over register tiles: each
    thread's `_chan_step` tile by tile, then the threads' combined about their columns' mean
    (``row_total``: an `alternating_sums` of one value, at ``parity``). Leaves ``part[0]`` that
    mean and ``acc`` = (squared deviations about it, sum(g), sum(g (x - mean))), ``g = w dy``
    (``load_w``: W's loader, where it is not the rows')."""
    width, per, threads, chunks = g.width, g.per, g.warps * 32, cols // g.width
    load_w = load_w or load
    chan_step = _chan_step(per)

    @T.macro
    def stats(run, part, acc, x, dy, w, tmp, stage, X, DY, W, r, c0, scratch, wid, lane, parity):
        run[0] = 0.0  # this thread's mean, squared deviations, sum(g), sum(g (x - mean))
        run[1] = 0.0
        run[2] = 0.0
        run[3] = 0.0
        for k in T.serial(chunks):
            load(x, X[r, c0 + k * width : c0 + k * width + width], stage)
            load(dy, DY[r, c0 + k * width : c0 + k * width + width], stage)
            load_w(w, W[c0 + k * width : c0 + k * width + width], stage)
            chan_step(run, part, x.local(), w.local(), dy.local(), tmp.local(), k)
        part[0] = run[0]
        row_total(part, scratch, wid, lane, parity)
        part[0] = part[0] / float(threads)  # every thread holds cols / threads columns
        off = run[0] - part[0]
        acc[0] = run[1] + float(cols // threads) * off * off
        acc[1] = run[2]
        acc[2] = run[3] + off * run[2]

    return stats


def _rows(h: int, dtype: str, threads: int, g: c.RowTile, centered: bool, shared_limit: int, prefetch: bool, saved: bool, wd: str):
    """A CTA per row, the CTAs walking the rows with a stride of ``ctas``; with ``prefetch``, row
    i + 1's ``x`` and ``dy`` are in flight (`cp.async` into the other half of a two-row ring in
    shared memory) while row i is computed: twice the bytes in flight per CTA, no more registers.
    With ``saved`` statistics, a row's sums take one pass, as RMSNorm's do. A streamed row's
    partial sums live in shared memory where they fit ``shared_limit``: LayerNorm's dB in registers
    where a thread's columns are at most `DB_REGISTERS` (dW and dB in shared memory together kept
    one CTA per SM at 16k columns)."""
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    padded = chunks * width > h
    load, store = c.row_io(g, dtype)  # the padding reads 0: it adds nothing to any sum
    load_w = c.weight_loader(g, dtype, wd, load)
    row_sum = c.row_sum_pass(g, load)
    sums = _row_sums(warps, saved)
    row_total = c.alternating_sums(1, warps)
    add_sums, dx_tile = _row_math(per, centered, saved)
    fetch, from_ring = _ring_io(width, widen)
    ahead = _saved_ahead()
    db_regs = centered and chunks > 1 and chunks * per <= DB_REGISTERS and chunks * width * 4 <= shared_limit
    shared = chunks > 1 and (2 if centered and not db_regs else 1) * chunks * width * 4 <= shared_limit
    add_partial = _partial_adder(width, per, shared)
    if db_regs:
        db_layout = c.tiles_layout(g, chunks)
        add_db = _add_tile(chunks, per)
    # LayerNorm's streamed whole-tile rows: the statistics in one pass, each thread's combined
    # tile by tile about its running mean (Chan et al.), then over the threads about the row's.
    chan = centered and chunks > 1 and not padded and not saved
    if chan:
        chan_stats = _chan_pass(g, load, h, row_total, load_w)
    meaned = centered and not saved  # a row's mean taken here (saved: the forward's)

    @T.macro
    def rows(X, W, DY, DX, DWP, DBP, MEAN, RSTD, m, ctas, eps):
        T.device_entry()
        b = T.cta_id([ctas])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        T.thread_id([threads])
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        tmp = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dw = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if centered:
            db = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = tmp
        if shared:  # the CTA's partial sums, each thread's columns its own: zeroed before the rows
            dws = T.alloc_buffer((chunks * width,), "float32", scope="shared.dyn")
            if centered and not db_regs:
                dbs = T.alloc_buffer((chunks * width,), "float32", scope="shared.dyn")
            Tx.fill(dw.local()[0:per], 0.0)
            for k in T.serial(chunks):
                Tx.cta.copy(dws[k * width : k * width + width], dw[0:width])
                if centered and not db_regs:
                    Tx.cta.copy(dbs[k * width : k * width + width], dw[0:width])
        if db_regs:
            dbr = T.alloc_buffer((chunks, width), "float32", scope="local", layout=db_layout)
            dbl = dbr.local()
            Tx.fill(dbl[0 : chunks * per], 0.0)
        part = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((3,), "float32", scope="local")
        if chan:
            run = T.alloc_buffer((4,), "float32", scope="local")
        scratch = T.alloc_buffer((2, warps), "float32", scope="shared")
        sums_scratch = T.alloc_buffer((2, warps * 3), "float32", scope="shared")
        xl, dyl, wl, tl, dwl = x.local(), dy.local(), w.local(), tmp.local(), dw.local()
        if chunks == 1:  # the weight and the partial sums stay in registers across rows
            load_w(w, W[0:width], stage)
            Tx.fill(dwl[0:per], 0.0)
            if centered:
                Tx.fill(db.local()[0:per], 0.0)
        if prefetch:  # a two-row ring; the first row in flight before the loop
            xs = T.alloc_buffer((2, width), dtype, scope="shared.dyn")
            dys = T.alloc_buffer((2, width), dtype, scope="shared.dyn")
            fetch(xs, dys, X, DY, 0, b, 0, m)
        if saved:  # the next row's mean and rstd
            st = T.alloc_buffer((2,), "float32", scope="local")
            ahead(st, None, MEAN, RSTD, b, m)
        for i in T.serial((m - b + ctas - 1) // ctas):
            r = b + i * ctas
            if saved:
                mean = st[0]
                saved_rstd = st[1]
                ahead(st, None, MEAN, RSTD, r + ctas, m)
            if prefetch:  # the next row into the other slot, then this row's slot into registers
                # (no barrier: each thread reads exactly the vectors it copied, `_cluster_shared_rows`)
                fetch(xs, dys, X, DY, 1 - i % 2, r + ctas, 0, m)
                T.ptx.cp_async.wait_group(1)
                from_ring(x, xs, i % 2, stage)
                from_ring(dy, dys, i % 2, stage)
            if meaned and prefetch:
                Tx.sum(part[0:1], xl[0:per])
                row_total(part, scratch, wid, lane, i % 2)
                mean = part[0] / float(h)
            elif meaned and not chan:  # the mean first, then deviations about it (as the forward)
                row_sum(acc, part, x, X, r, stage)
                row_total(acc, scratch, wid, lane, i % 2)
                mean = acc[0] / float(h)
            if chan:
                chan_stats(run, part, acc, x, dy, w, tmp, stage, X, DY, W, r, 0, scratch, wid, lane, i % 2)
                mean = part[0]
            if not chan:  # sums of (x - mean)^2 (unless saved), g and g * (x - mean), g = w * dy
                if not saved:
                    acc[0] = 0.0
                acc[1] = 0.0
                acc[2] = 0.0
                for k in T.serial(chunks):
                    if (chunks > 1 or not centered or saved) and not prefetch:
                        load(x, X[r, k * width : k * width + width], stage)
                    if not prefetch:
                        load(dy, DY[r, k * width : k * width + width], stage)
                    if chunks > 1:
                        load_w(w, W[k * width : k * width + width], stage)
                    if centered:
                        Tx.add(xl[0:per], xl[0:per], -mean)
                        if padded and not saved:  # the padding's deviation is 0 (saved: its g is)
                            Tx.cta.masked_fill(x[0:width], x[0:width], lambda j: k * width + j >= h, 0.0)
                    add_sums(acc, part, xl, wl, dyl, tl)
            sums(acc, sums_scratch, wid, lane, i % 2)  # the sums in one exchange
            if saved:
                rstd = saved_rstd
            else:
                rstd = 1.0 / T.sqrt(acc[0] / float(h) + eps)
            sum_g = acc[1]
            # mean(g * xhat) = rstd * mean(g * (x - mean))
            c_gx = acc[2] / float(h) * rstd
            for j in T.serial(chunks):  # last tile first: the tiles read last are the likeliest in L2
                k = chunks - 1 - j
                if chunks > 1:
                    load(x, X[r, k * width : k * width + width], stage)
                    load(dy, DY[r, k * width : k * width + width], stage)
                    load_w(w, W[k * width : k * width + width], stage)
                if centered and chunks > 1:  # xhat = (x - mean) rstd, one fma
                    Tx.fma(xl[0:per], xl[0:per], rstd, -mean * rstd)
                else:  # (a row of one tile: x - mean already)
                    Tx.mul(xl[0:per], xl[0:per], rstd)  # xhat (the padding: 0 times rstd, or masked)
                if centered and padded and chunks > 1:
                    Tx.cta.masked_fill(x[0:width], x[0:width], lambda j2: k * width + j2 >= h, 0.0)
                dx_tile(tl, xl, wl, dyl, rstd, c_gx, sum_g / float(h))
                store(DX[r, k * width : k * width + width], tmp, stage)
                if chunks == 1:
                    Tx.fma(dwl[0:per], dyl[0:per], xl[0:per], dwl[0:per])
                    if centered:
                        Tx.add(db.local()[0:per], db.local()[0:per], dyl[0:per])
                elif shared:
                    add_partial(dw, dws[k * width : k * width + width], dyl, xl, False)
                    if db_regs:
                        add_db(dbl, k, dyl)
                    elif centered:
                        add_partial(db, dbs[k * width : k * width + width], dyl, None, False)
                else:  # this CTA's partial row, in global memory: written whole by its first row
                    add_partial(dw, DWP[b, k * width : k * width + width], dyl, xl, i == 0)
                    if centered:
                        add_partial(db, DBP[b, k * width : k * width + width], dyl, None, i == 0)
        if prefetch:  # the last (empty) group
            T.ptx.cp_async.wait_group(0)
        if chunks == 1:
            Tx.cta.copy(DWP[b, 0:width], dw[0:width], clip=True)
            if centered:
                Tx.cta.copy(DBP[b, 0:width], db[0:width], clip=True)
        elif shared:  # each thread's own columns, from shared to the CTA's partial row
            for k in T.serial(chunks):
                Tx.cta.copy(dw[0:width], dws[k * width : k * width + width])
                Tx.cta.copy(DWP[b, k * width : k * width + width], dw[0:width], clip=True)
                if centered and not db_regs:
                    Tx.cta.copy(dw[0:width], dbs[k * width : k * width + width])
                    Tx.cta.copy(DBP[b, k * width : k * width + width], dw[0:width], clip=True)
            if db_regs:
                for k in T.unroll(chunks):
                    Tx.cta.copy(DBP[b, k * width : k * width + width], dbr[k, 0:width], clip=True)
        else:
            if m <= b:  # no row: the partial rows are zero
                for k in T.serial(chunks):
                    Tx.fill(dwl[0:per], 0.0)
                    Tx.cta.copy(DWP[b, k * width : k * width + width], dw[0:width], clip=True)
                    if centered:
                        Tx.cta.copy(DBP[b, k * width : k * width + width], dw[0:width], clip=True)

    return rows


def _row_exchange(cn: int, part: int, h: int, centered: bool, saved: bool, chain: bool, slots: int):
    """Macros for the cluster designs' row ``i`` of a CTA: ``exchange(stats, mine, bar, rank,
    tid, lane, i, acc, mom, eps)`` publishes this CTA's slice statistics to the cluster
    (`_common.cluster_exchange`, or with ``chain`` `_common.chained_exchange` over ``slots``: no
    cluster barrier per row; the two sums of RMSNorm, or of LayerNorm from saved statistics, only;
    ``acc``: the CTA's sums of (x - m_p)^2 (RMSNorm: x^2), g and g (x - m_p); LayerNorm's slice
    sum in ``mom[0]`` on entry), combines the slices' (`_common.slice_moments`, or sums), releases
    the exchange and leaves the row's ``mom = (mean, rstd, mean(g), mean(g xhat))`` (RMSNorm: mean
    and mean(g) 0). With ``saved`` statistics (the row's mean and rstd in ``mom[0:2]`` on entry,
    ``acc[1:3]`` sums about that mean), the slices' two sums only. With ``chain`` its halves too:
    ``send(stats, mine, bar, rank, tid, i, acc)`` and ``finish(stats, bar, lane, i, acc, mom,
    eps)`` (receives row i's sums, then ``mom`` as above), for a row sent ahead of its finish."""
    if chain and centered and not saved:
        raise ValueError("chain: the exchange of two sums (RMSNorm, or LayerNorm from the forward's saved statistics)")
    publish, release = c.cluster_exchange(cn)[1:3]
    moments = c.slice_moments(cn, part, h)
    send_, receive = c.chained_exchange(cn, slots)[1:3]
    slot_sum = c.slot_sum(cn)
    first = 1 if saved else 0  # the first sum's place in acc: g (saved) or x^2

    @T.macro
    def row_moments(acc, mom, eps):  # mom[2:4] (and RMSNorm's rstd) from the row's two sums
        if saved:
            mom[2] = acc[1] / float(h)
        else:
            mom[0] = 0.0
            mom[1] = 1.0 / T.sqrt(acc[0] / float(h) + eps)
            mom[2] = 0.0
        mom[3] = acc[2] / float(h) * mom[1]

    @T.macro
    def send(stats, mine, bar, rank, tid, i, acc):
        send_(stats, mine, bar, rank, tid, i, acc[first], acc[2], 0.0, 0.0)

    @T.macro
    def finish(stats, bar, lane, i, acc, mom, eps):
        receive(bar, i)
        slot_sum(stats, i % slots, 0, acc, first, lane)
        slot_sum(stats, i % slots, 1, acc, 2, lane)
        row_moments(acc, mom, eps)

    @T.macro
    def exchange(stats, mine, bar, rank, tid, lane, i, acc, mom, eps):
        parity = i % 2
        if centered and not saved:  # four statistics, combined about the row's mean
            publish(stats, mine, bar, rank, tid, parity, mom[0], acc[0], acc[1], acc[2])
            moments(stats, mom, 0, lane)
            release()
            mom[1] = 1.0 / T.sqrt(mom[1] / float(h) + eps)
            mom[2] = mom[2] / float(h)
            mom[3] = mom[3] / float(h) * mom[1]
        elif chain:  # two sums: g (saved) or x^2, and g x
            send(stats, mine, bar, rank, tid, i, acc)
            finish(stats, bar, lane, i, acc, mom, eps)
        else:
            publish(stats, mine, bar, rank, tid, parity, acc[first], acc[2], 0.0, 0.0)
            slot_sum(stats, 0, 0, acc, first, lane)
            slot_sum(stats, 0, 1, acc, 2, lane)
            release()
            row_moments(acc, mom, eps)

    return exchange, send, finish


def _slice_partials(width: int, per: int, chunks: int, centered: bool, hold: bool, regs: bool = False):
    """The shared-slice cluster designs' float32 partial sums of a CTA's slice, as macros:
    ``add(tmp, dws, dbs, db, xl, dyl, k)`` adds tile ``k``'s ``dy * xhat`` to dW's (``dws``, shared
    memory, through the scratch tile ``tmp``) and, for LayerNorm, ``dy`` to dB's (``dbs``; with
    ``hold`` the registers ``db``); ``write(tmp, dws, dbs, db, DWP, DBP, q, c0)`` writes them to
    partial row ``q`` from column ``c0``. With ``regs``, ``dws`` and ``dbs`` are register tiles of
    every chunk of the slice (`_common.tiles_layout`: tile ``k`` at a thread's ``[k * per, (k + 1) *
    per)``), ``k`` a constant (the chunks' loops unrolled)."""

    @T.macro
    def add_regs(tmp, dws, dbs, db, xl, dyl, k):
        dwl = dws.local()
        Tx.fma(dwl[k * per : k * per + per], dyl[0:per], xl[0:per], dwl[k * per : k * per + per])
        if centered:
            dbl = dbs.local()
            Tx.add(dbl[k * per : k * per + per], dbl[k * per : k * per + per], dyl[0:per])

    @T.macro
    def write_regs(tmp, dws, dbs, db, DWP, DBP, q, c0):
        for k in T.unroll(chunks):
            Tx.cta.copy(DWP[q, c0 + k * width : c0 + k * width + width], dws[k, 0:width])
            if centered:
                Tx.cta.copy(DBP[q, c0 + k * width : c0 + k * width + width], dbs[k, 0:width])

    if regs:
        return add_regs, write_regs

    @T.macro
    def add(tmp, dws, dbs, db, xl, dyl, k):
        tl = tmp.local()
        Tx.cta.copy(tmp[0:width], dws[k * width : k * width + width])
        Tx.fma(tl[0:per], dyl[0:per], xl[0:per], tl[0:per])
        Tx.cta.copy(dws[k * width : k * width + width], tmp[0:width])
        if centered and hold:
            Tx.add(db.local()[0:per], db.local()[0:per], dyl[0:per])
        elif centered:
            Tx.cta.copy(tmp[0:width], dbs[k * width : k * width + width])
            Tx.add(tl[0:per], tl[0:per], dyl[0:per])
            Tx.cta.copy(dbs[k * width : k * width + width], tmp[0:width])

    @T.macro
    def write(tmp, dws, dbs, db, DWP, DBP, q, c0):
        for k in T.serial(chunks):
            Tx.cta.copy(tmp[0:width], dws[k * width : k * width + width])
            Tx.cta.copy(DWP[q, c0 + k * width : c0 + k * width + width], tmp[0:width])
            if centered and hold:
                Tx.cta.copy(DBP[q, c0 + k * width : c0 + k * width + width], db[0:width])
            elif centered:
                Tx.cta.copy(tmp[0:width], dbs[k * width : k * width + width])
                Tx.cta.copy(DBP[q, c0 + k * width : c0 + k * width + width], tmp[0:width])

    return add, write


def _exchange_ends(cn: int, chain: bool):
    """``(open_, close)`` of the cluster designs' exchange: `_common.cluster_exchange`'s, or with
    ``chain`` `_common.chained_exchange`'s (stats in two slots, no cluster barrier per row)."""
    if chain:
        open_, _, _, close = c.chained_exchange(cn)
    else:
        open_, _, _, close = c.cluster_exchange(cn)
    return open_, close


def _cluster_rows(h: int, dtype: str, threads: int, cn: int, centered: bool, saved: bool, wd: str, chain: bool = False):
    """Wide rows: a cluster of ``cn`` CTAs per row, the clusters walking the rows (cluster q of
    ``ctas / cn`` takes rows q, q + ctas / cn, ...). CTA ``rank`` holds the slice ``[rank * width,
    (rank + 1) * width)`` of x, dy and w in registers and its dW (and dB) partial sums there
    across rows; the slices' statistics meet through distributed shared memory
    (`_common.cluster_exchange`), one exchange per row: RMSNorm sends ``sum(x^2)`` and
    ``sum(g x)``; LayerNorm its slice's sum, sum of squared deviations about the slice's mean
    ``m_p``, ``sum(g)`` and ``sum(g (x - m_p))``, which combine exactly about the row's mean
    (`_common.slice_moments`). Where
    the slices tile the row exactly, the next row's slices are prefetched (`cp.async`, a two-row
    ring). The CTAs of cluster q write partial row q together, each its slice's columns: the
    design writes ``ctas / cn`` partial rows, not ``ctas`` (`partial_rows`). With ``saved``
    statistics, LayerNorm's slices send ``sum(g)`` and ``sum(g (x - mean))`` only."""
    g = c.cluster_tile(h, dtype, threads, cn, _tiles(dtype, {"centered": centered}))
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    exact = cn * width == h
    load, store = c.row_io(g, dtype)  # the padding reads 0
    load_w = c.weight_loader(g, dtype, wd, load)
    open_, close = _exchange_ends(cn, chain)
    sums = _row_sums(warps, saved)
    slice_total = c.alternating_sums(1, warps)
    add_sums, dx_tile = _row_math(per, centered, saved)
    fetch, from_ring = _ring_io(width, widen)
    ahead = _saved_ahead()
    slots = c.chain_slots(0) if chain else 1
    exchange = _row_exchange(cn, width, h, centered, saved, chain, slots)[0]
    mine_shape = (slots, 4) if chain else (4,)  # (cluster_exchange's: one row's)

    @T.macro
    def rows(X, W, DY, DX, DWP, DBP, MEAN, RSTD, m, ctas, eps):
        T.device_entry()
        b = T.cta_id([ctas])
        rank = T.cta_id_in_cluster([cn])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        stats = pool.alloc((slots * cn, 4), "float32")
        mine = pool.alloc(mine_shape, "float32")
        bar = MBarrier(pool, slots)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        tmp = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dw = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if centered:
            db = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = tmp
        part = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((3,), "float32", scope="local")
        mom = T.alloc_buffer((4,), "float32", scope="local")
        scratch = T.alloc_buffer((2, warps), "float32", scope="shared")
        sums_scratch = T.alloc_buffer((2, warps * 3), "float32", scope="shared")
        xl, dyl, wl, tl, dwl = x.local(), dy.local(), w.local(), tmp.local(), dw.local()
        open_(bar)
        q = b // cn
        clusters = ctas // cn
        c0 = rank * width
        load_w(w, W[c0 : c0 + width], stage)
        Tx.fill(dwl[0:per], 0.0)
        if centered:
            Tx.fill(db.local()[0:per], 0.0)
        if exact:  # a two-row ring; the first row in flight before the loop
            xs = T.alloc_buffer((2, width), dtype, scope="shared.dyn")
            dys = T.alloc_buffer((2, width), dtype, scope="shared.dyn")
            fetch(xs, dys, X, DY, 0, q, c0, m)
        if centered and not saved:  # the slice's columns inside the row
            count = T.cast(T.max(T.min(h - c0, width), 0), "float32")
        if saved:  # the next row's mean and rstd
            st = T.alloc_buffer((2,), "float32", scope="local")
            ahead(st, None, MEAN, RSTD, q, m)
        for i in T.serial((m - q + clusters - 1) // clusters):
            r = q + i * clusters
            if saved:  # this row's mean and rstd into mom[0:2], the next row's loads
                ahead(st, mom, MEAN, RSTD, r + clusters, m)
            if exact:  # (no barrier: each thread reads exactly the vectors it copied, `_cluster_shared_rows`)
                fetch(xs, dys, X, DY, 1 - i % 2, r + clusters, c0, m)
                T.ptx.cp_async.wait_group(1)
                from_ring(x, xs, i % 2, stage)
                from_ring(dy, dys, i % 2, stage)
            else:
                load(x, X[r, c0 : c0 + width], stage)
                load(dy, DY[r, c0 : c0 + width], stage)
            if saved:  # deviations about the row's mean (the padding's g is 0)
                Tx.add(xl[0:per], xl[0:per], -mom[0])
            elif centered:  # the slice's mean, then deviations about it (the padding: none)
                Tx.sum(part[0:1], xl[0:per])
                slice_total(part, scratch, wid, lane, i % 2)
                total = part[0]
                slice_mean = total / T.max(count, 1.0)
                Tx.add(xl[0:per], xl[0:per], -slice_mean)
                if not exact:
                    Tx.cta.masked_fill(x[0:width], x[0:width], lambda j: c0 + j >= h, 0.0)
            if not saved:
                acc[0] = 0.0
            acc[1] = 0.0
            acc[2] = 0.0
            add_sums(acc, part, xl, wl, dyl, tl)
            sums(acc, sums_scratch, wid, lane, i % 2)
            if centered and not saved:
                mom[0] = total
            exchange(stats, mine, bar, rank, tid, lane, i, acc, mom, eps)
            rstd = mom[1]
            if centered and not saved:  # xhat = (x - mean) rstd (x - m_p in registers)
                Tx.fma(xl[0:per], xl[0:per], rstd, (slice_mean - mom[0]) * rstd)
                if not exact:
                    Tx.cta.masked_fill(x[0:width], x[0:width], lambda j: c0 + j >= h, 0.0)
            else:
                Tx.mul(xl[0:per], xl[0:per], rstd)  # xhat
            dx_tile(tl, xl, wl, dyl, rstd, mom[3], mom[2])
            store(DX[r, c0 : c0 + width], tmp, stage)
            Tx.fma(dwl[0:per], dyl[0:per], xl[0:per], dwl[0:per])
            if centered:
                Tx.add(db.local()[0:per], db.local()[0:per], dyl[0:per])
        if exact:  # the last (empty) group
            T.ptx.cp_async.wait_group(0)
        # Partial row q, the cluster's: this slice's columns of it.
        Tx.cta.copy(DWP[q, c0 : c0 + width], dw[0:width], clip=True)
        if centered:
            Tx.cta.copy(DBP[q, c0 : c0 + width], db[0:width], clip=True)
        close()

    return rows


def _cluster_shared_rows(
    h: int,
    dtype: str,
    threads: int,
    sl: c.SharedSlice,
    cn: int,
    centered: bool,
    ring: int,
    hold: bool,
    saved: bool,
    chain: bool = False,
    regs: bool = False,
    w32: bool = False,
    pipe: bool = False,
):
    """`_cluster_rows` with each CTA's slices in shared memory (`_common.SharedSlice`): the
    weight's, copied once; x's and dy's in a ring of ``ring`` rows, the next ``ring - 1`` rows'
    copied (`cp.async`) while this one is computed; the dW (and dB) partial sums in float32, each thread's columns
    its own. A row is read in register tiles: (for LayerNorm, the slice's sum first, then) the
    four statistics of `_cluster_rows`, one DSMEM exchange, then dx and the partial sums. With
    ``hold``, a slice of one tile is read from shared memory once per row, and the weight's once:
    they stay in registers (shared memory's bandwidth limited LayerNorm's re-reading passes), at
    the cost of the registers that keep a second CTA off the SM where shared memory would not;
    LayerNorm's dB partial sums too (a tile of registers: no read-modify-write of shared memory).
    With ``saved`` statistics, no slice's sum: the row's sums in one pass, about its mean. A ring
    of one row refills its slot once the row is read: its CTA is small enough for two to share an
    SM, one's row in flight while the other computes (LayerNorm at 65k: 112 KB a CTA, against
    144 KB with two rows). With ``regs``, the partial sums are registers, every tile of the slice
    (the chunks' loops unrolled: registers take constant indices), and shared memory holds the
    slices only: a deeper ring where the partial sums took its room (LayerNorm at 262k over 16
    CTAs: three rows, against one), and no read-modify-write of them per row. With ``w32``, the
    weight's slice is widened to float32 once, into shared memory, each thread its own columns
    (what it reads back: no barrier): two 16-byte reads a tile where one read and a widening of
    every value took nine instructions a vector, twice a row (LayerNorm's backward at 262k over
    256 threads: 0.879 -> 0.866 ms, H200; the exchange, below, was what bound it). With ``pipe`` (``regs``, ``chain`` and a ring of three; RMSNorm or saved
    statistics), row i + 1's sums are taken and sent before row i's statistics are read and its
    dx pass run, so each CTA works on while the slowest peer's sums travel (every CTA waited for
    it each row: LayerNorm's backward at 262k 0.879 -> 0.780 ms, H200). Its exchange takes four
    slots (`_common.chain_slots`: row i + 1 is sent before row i's slot is read)."""
    if ring not in (1, 2, 3, 4):
        raise ValueError(f"ring: {ring} rows; the cluster design's rings hold 1, 2, 3 or 4")
    if hold and ring == 1:
        raise ValueError("hold: a ring of 2-4 rows (the weight's slice is read once, its copy's group waited for before the rows)")
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    if hold and regs:
        raise ValueError("regs: the partial sums of every tile in registers; hold keeps the slice's one tile there instead")
    if hold and chunks != 1:
        raise ValueError(f"hold: a slice of {part} is {chunks} register tiles of {g.width}; only a slice of one stays in registers")
    reread = not hold  # the tiles read from shared memory in every pass
    meaned = centered and not saved  # a pass for the slice's mean first
    width, per, warps = g.width, g.per, g.warps
    load, store = c.row_io(g, dtype)
    tile = sl.io(dtype)[2]  # tile k of a ring row (or of the weight's slice) into registers
    if w32:  # a thread's 16-byte halves of a tile in two planes: 16-byte reads without bank conflicts
        w32_layout = c.shared_planes(chunks, threads, per)

        @T.macro
        def w32_tile(dst, ws, slot, k, stage):
            Tx.cta.copy(dst[0:width], ws[k, 0:width])

    tile_w = w32_tile if w32 else tile  # tile k of the weight's slice
    fetch = _ring_io(part, widen)[0]  # x's and dy's slices of a row into a ring slot
    open_, close = _exchange_ends(cn, chain)
    sums = _row_sums(warps, saved)
    slice_total = c.alternating_sums(1, warps)
    add_sums, dx_tile = _row_math(per, centered, saved)
    slots = c.chain_slots(1 if pipe else 0) if chain else 1
    exchange, send_sums, finish = _row_exchange(cn, part, h, centered, saved, chain, slots)
    add_partials, write_partials = _slice_partials(width, per, chunks, centered, hold, regs)
    first_saved, row_saved = _saved_shared()
    mine_shape = (slots, 4) if chain else (4,)  # (cluster_exchange's: one row's)
    dx_loop = T.unroll if regs else T.serial  # (register partials take constant indices)

    @T.macro
    def row_sums(bufs, mom, slot, i, slice_mean, wid, lane):
        """Sums of (x - m_p)^2 (RMSNorm: x^2), g and g * (x - m_p), g = w * dy (saved: g and
        g * (x - mean)) of the row in ``slot``, the CTA's. A slice of one tile is read from shared
        memory once: its x, dy (and w) stay in registers."""
        x, dy, w, tmp, stage, xs, dys, ws, part_, acc, sums_scratch = bufs
        xl, dyl, wl, tl = x.local(), dy.local(), w.local(), tmp.local()
        if not saved:
            acc[0] = 0.0
        acc[1] = 0.0
        acc[2] = 0.0
        for k in T.serial(chunks):
            if reread or not meaned:
                tile(x, xs, slot, k, stage)
            tile(dy, dys, slot, k, stage)
            if reread:
                tile_w(w, ws, 0, k, stage)
            if saved:
                Tx.add(xl[0:per], xl[0:per], -mom[0])
            elif centered:
                Tx.add(xl[0:per], xl[0:per], -slice_mean)
            add_sums(acc, part_, xl, wl, dyl, tl)
        sums(acc, sums_scratch, wid, lane, i % 2)

    @T.macro
    def rows(X, W, DY, DX, DWP, DBP, MEAN, RSTD, m, ctas, eps):
        T.device_entry()
        b = T.cta_id([ctas])
        rank = T.cta_id_in_cluster([cn])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        xs = pool.alloc((ring, part), dtype)
        dys = pool.alloc((ring, part), dtype)
        if w32:
            ws = pool.alloc((chunks, width), "float32", layout=w32_layout)  # (a row a tile)
        else:
            ws = pool.alloc((1, part), dtype)
        if not regs:
            dws = pool.alloc((part,), "float32")
        if centered and reread and not regs:
            dbs = pool.alloc((part,), "float32")
        elif not regs:
            dbs = dws  # (a name for `add_partials`, unused: no dB, or dB in registers)
        stats = pool.alloc((slots * cn, 4), "float32")
        mine = pool.alloc(mine_shape, "float32")
        if saved:  # this row's and the next one's mean and rstd (`_saved_shared`)
            sst = pool.alloc((2, 2), "float32")
        bar = MBarrier(pool, slots)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        tmp = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = tmp
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((3,), "float32", scope="local")
        mom = T.alloc_buffer((4,), "float32", scope="local")
        scratch = T.alloc_buffer((2, warps), "float32", scope="shared")
        sums_scratch = T.alloc_buffer((2, warps * 3), "float32", scope="shared")
        xl, dyl, wl, tl = x.local(), dy.local(), w.local(), tmp.local()
        open_(bar)
        q = b // cn
        clusters = ctas // cn
        c0 = rank * part
        if not w32:
            Tx.cta.copy_async(ws[0, 0:part], W[c0 : c0 + part])  # the weight's slice: with the first row's group
        fetch(xs, dys, X, DY, 0, q, c0, m)  # rows 0 .. max(ring - 2, 0) in flight before the loop
        if ring >= 3:
            fetch(xs, dys, X, DY, 1, q + clusters, c0, m)
        if ring >= 4:
            fetch(xs, dys, X, DY, 2, q + 2 * clusters, c0, m)
        if regs:  # the partial sums, every tile of the thread's columns
            dws = T.alloc_buffer((chunks, width), "float32", scope="local", layout=c.tiles_layout(g, chunks))
            Tx.fill(dws.local()[0 : chunks * per], 0.0)
            dbs = dws  # (a name for `add_partials`, unused: no dB)
            if centered:
                dbs = T.alloc_buffer((chunks, width), "float32", scope="local", layout=c.tiles_layout(g, chunks))
                Tx.fill(dbs.local()[0 : chunks * per], 0.0)
        else:
            Tx.fill(tl[0:per], 0.0)
            for k in T.serial(chunks):  # the partial sums, each thread's columns: zeroed before the rows
                Tx.cta.copy(dws[k * width : k * width + width], tmp[0:width])
                if centered and reread:
                    Tx.cta.copy(dbs[k * width : k * width + width], tmp[0:width])
        if centered and hold:
            db = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
            Tx.fill(db.local()[0:per], 0.0)
        else:
            db = tmp  # (a name for `add_partials`, unused: no dB, or dB in shared memory)
        # No barrier guards the ring: each thread copies (`cp.async`, thread t the 16-byte vectors
        # t, t + threads, ...) exactly the vectors of a slot that it reads into its register tiles
        # (the tiles' layout), so its own `wait_group` orders its reads after its copies, and its
        # reads of a slot before its next copies into it (the simulator's race check holds us to it).
        if w32:  # the weight's slice widened once, each thread writing the columns it reads
            for k in T.serial(chunks):
                load(w, W[c0 + k * width : c0 + k * width + width], stage)
                Tx.cta.copy(ws[k, 0:width], w[0:width])
        if hold:  # the weight's slice stays in registers (its group: the oldest)
            T.ptx.cp_async.wait_group(ring - 2)
            tile(w, ws, 0, 0, stage)
        if saved:  # row q's mean and rstd in shared memory, the next row's in thread 0's st
            st = T.alloc_buffer((2,), "float32", scope="local")
            first_saved(st, sst, MEAN, RSTD, q, clusters, m, tid)
        bufs = (x, dy, w, tmp, stage, xs, dys, ws, part_, acc, sums_scratch)
        n_rows = (m - q + clusters - 1) // clusters
        cur = mom  # (the finished row's statistics: with pipe, beside the next row's in mom)
        if pipe:  # row 0's sums, sent before the loop
            cur = T.alloc_buffer((4,), "float32", scope="local")
            if n_rows > 0:
                T.ptx.cp_async.wait_group(1)
                if saved:
                    row_saved(st, sst, mom, MEAN, RSTD, q, 0, clusters, m, tid)
                row_sums(bufs, mom, 0, 0, None, wid, lane)
                send_sums(stats, mine, bar, rank, tid, 0, acc)
        for i in T.serial(n_rows):
            r = q + i * clusters
            slot = i % ring
            if pipe and saved:  # row i's mean and rstd, before row i + 1's take their place
                cur[0] = mom[0]
                cur[1] = mom[1]
            if saved and not pipe:  # this row's mean and rstd into mom[0:2]; the next rows' on their way
                row_saved(st, sst, mom, MEAN, RSTD, r, i, clusters, m, tid)
            if ring >= 2:  # the row ring - 1 ahead (a ring of one refills its slot at the row's end)
                fetch(xs, dys, X, DY, (i + ring - 1) % ring, r + (ring - 1) * clusters, c0, m)
            slice_mean = None
            if pipe:  # row i + 1 landed; its sums sent before row i's are read
                T.ptx.cp_async.wait_group(1)
                if i + 1 < n_rows:
                    if saved:
                        row_saved(st, sst, mom, MEAN, RSTD, r + clusters, i + 1, clusters, m, tid)
                    row_sums(bufs, mom, (i + 1) % ring, i + 1, None, wid, lane)
                    send_sums(stats, mine, bar, rank, tid, i + 1, acc)
                finish(stats, bar, lane, i, acc, cur, eps)
            else:
                T.ptx.cp_async.wait_group(ring - 1)
                if meaned:  # the slice's mean, then deviations about it
                    acc[0] = 0.0
                    for k in T.serial(chunks):
                        tile(x, xs, slot, k, stage)
                        Tx.sum(part_[0:1], xl[0:per])
                        acc[0] = acc[0] + part_[0]
                    slice_total(acc, scratch, wid, lane, i % 2)
                    total = acc[0]
                    slice_mean = total / float(part)
                row_sums(bufs, mom, slot, i, slice_mean, wid, lane)
                if meaned:
                    mom[0] = total
                exchange(stats, mine, bar, rank, tid, lane, i, acc, mom, eps)
            mean, rstd, mean_g, c_gx = cur[0], cur[1], cur[2], cur[3]
            for k in dx_loop(chunks):
                if reread:
                    tile(x, xs, slot, k, stage)
                    tile(dy, dys, slot, k, stage)
                    tile_w(w, ws, 0, k, stage)
                if reread and centered:  # xhat = (x - mean) rstd, one fma
                    Tx.fma(xl[0:per], xl[0:per], rstd, -mean * rstd)
                elif meaned:  # x - m_p in registers
                    Tx.fma(xl[0:per], xl[0:per], rstd, (slice_mean - mean) * rstd)
                else:  # (saved: x - mean already)
                    Tx.mul(xl[0:per], xl[0:per], rstd)
                dx_tile(tl, xl, wl, dyl, rstd, c_gx, mean_g)
                store(DX[r, c0 + k * width : c0 + k * width + width], tmp, stage)
                add_partials(tmp, dws, dbs, db, xl, dyl, k)
            if ring == 1:  # the next row into the slot this one was read from
                fetch(xs, dys, X, DY, 0, r + clusters, c0, m)
        T.ptx.cp_async.wait_group(0)  # the last (empty) groups, or the weight's with no row
        # Partial row q, the cluster's: this slice's columns of it (each thread its own).
        write_partials(tmp, dws, dbs, db, DWP, DBP, q, c0)
        close()

    return rows


def cluster_stream_tile(h: int, dtype: str, threads: int, cn: int, centered: bool) -> c.RowTile:
    """The register tile of `_cluster_streamed_rows`: a CTA's slice of ``h / cn`` columns streamed
    in whole tiles of ``threads`` threads, two or more."""
    vec = 16 // c.elem_bytes(dtype)
    g = c.RowTile(h // cn, dtype, threads, _tiles(dtype, {"centered": centered}), stream=True)
    if h % (cn * threads * vec) or g.chunks * g.width != h // cn or g.chunks < 2:
        raise ValueError(
            f"stream over a cluster: a row of {h} over {cn} CTAs of {threads} threads must split into slices of "
            f"two or more whole tiles of {g.width}"
        )
    return g


def _cluster_streamed_rows(
    h: int, dtype: str, threads: int, g: c.RowTile, cn: int, centered: bool, shared_limit: int, saved: bool, wd: str, chain: bool = False
):
    """Rows too wide for a cluster's slices to stay in shared memory (262,144 columns): a cluster
    of ``cn`` CTAs per row, the clusters walking the rows, each CTA streaming its slice through
    register tiles twice: the statistics (LayerNorm's each thread's, tile by tile about its
    running mean, then the slice's, as `_rows` does), one DSMEM exchange (`_cluster_rows`'s), then
    dx and the partial sums (in shared memory where they fit ``shared_limit``, else in the
    cluster's partial row in global memory, this CTA's columns of it; LayerNorm's dB in registers
    where dW alone fits and a thread's columns are at most `DB_REGISTERS`). The second pass reads the
    slice last tile first, from L2: a cluster's rows in flight are a few MB, where the streamed
    design's CTA per row keeps more rows in flight than L2 holds. With ``saved`` statistics, the
    first pass takes LayerNorm's two sums about the row's mean, as RMSNorm's."""
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    part = h // cn
    load, store = c.row_io(g, dtype)
    load_w = c.weight_loader(g, dtype, wd, load)
    sums = _row_sums(warps, saved)
    add_sums, dx_tile = _row_math(per, centered, saved)
    chan = centered and not saved
    if chan:
        chan_stats = _chan_pass(g, load, part, c.alternating_sums(1, warps), load_w)
    open_, close = _exchange_ends(cn, chain)
    ahead = _saved_ahead()
    slots = c.chain_slots(0) if chain else 1
    exchange = _row_exchange(cn, part, h, centered, saved, chain, slots)[0]
    mine_shape = (slots, 4) if chain else (4,)  # (cluster_exchange's: one row's)
    shared = (2 if centered else 1) * part * 4 <= shared_limit
    db_regs = centered and not shared and part * 4 <= shared_limit and chunks * per <= DB_REGISTERS
    dw_shared = shared or db_regs
    add_partial = _partial_adder(width, per, dw_shared)
    db_layout = c.tiles_layout(g, chunks)
    add_db = _add_tile(chunks, per)

    @T.macro
    def rows(X, W, DY, DX, DWP, DBP, MEAN, RSTD, m, ctas, eps):
        T.device_entry()
        b = T.cta_id([ctas])
        rank = T.cta_id_in_cluster([cn])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        if dw_shared:  # the CTA's partial sums, each thread's columns its own
            dws = pool.alloc((part,), "float32")
        if centered and shared:
            dbs = pool.alloc((part,), "float32")
        stats = pool.alloc((slots * cn, 4), "float32")
        mine = pool.alloc(mine_shape, "float32")
        bar = MBarrier(pool, slots)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        tmp = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dw = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if centered:
            db = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if chan:
            run = T.alloc_buffer((4,), "float32", scope="local")
        if db_regs:
            dbr = T.alloc_buffer((chunks, width), "float32", scope="local", layout=db_layout)
            dbl = dbr.local()
            Tx.fill(dbl[0 : chunks * per], 0.0)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = tmp
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((3,), "float32", scope="local")
        mom = T.alloc_buffer((4,), "float32", scope="local")
        scratch = T.alloc_buffer((2, warps), "float32", scope="shared")
        sums_scratch = T.alloc_buffer((2, warps * 3), "float32", scope="shared")
        xl, dyl, wl, tl, dwl = x.local(), dy.local(), w.local(), tmp.local(), dw.local()
        open_(bar)
        q = b // cn
        clusters = ctas // cn
        c0 = rank * part
        if dw_shared:
            Tx.fill(tl[0:per], 0.0)
            for k in T.serial(chunks):
                Tx.cta.copy(dws[k * width : k * width + width], tmp[0:width])
                if centered and shared:
                    Tx.cta.copy(dbs[k * width : k * width + width], tmp[0:width])
        if saved:  # the next row's mean and rstd
            st = T.alloc_buffer((2,), "float32", scope="local")
            ahead(st, None, MEAN, RSTD, q, m)
        for i in T.serial((m - q + clusters - 1) // clusters):
            r = q + i * clusters
            if saved:  # this row's mean and rstd into mom[0:2], the next row's loads
                ahead(st, mom, MEAN, RSTD, r + clusters, m)
            if chan:
                chan_stats(run, part_, acc, x, dy, w, tmp, stage, X, DY, W, r, c0, scratch, wid, lane, i % 2)
                slice_mean = part_[0]
            else:  # sums of x^2 and g x (saved: g and g (x - mean))
                if not saved:
                    acc[0] = 0.0
                acc[1] = 0.0
                acc[2] = 0.0
                for k in T.serial(chunks):
                    load(x, X[r, c0 + k * width : c0 + k * width + width], stage)
                    load(dy, DY[r, c0 + k * width : c0 + k * width + width], stage)
                    load_w(w, W[c0 + k * width : c0 + k * width + width], stage)
                    if saved:
                        Tx.add(xl[0:per], xl[0:per], -mom[0])
                    add_sums(acc, part_, xl, wl, dyl, tl)
            sums(acc, sums_scratch, wid, lane, i % 2)
            if chan:
                mom[0] = slice_mean * float(part)
            exchange(stats, mine, bar, rank, tid, lane, i, acc, mom, eps)
            mean, rstd, mean_g, c_gx = mom[0], mom[1], mom[2], mom[3]
            for j in T.serial(chunks):  # last tile first: the tiles read last are the likeliest in L2
                k = chunks - 1 - j
                load(x, X[r, c0 + k * width : c0 + k * width + width], stage)
                load(dy, DY[r, c0 + k * width : c0 + k * width + width], stage)
                load_w(w, W[c0 + k * width : c0 + k * width + width], stage)
                if centered:  # xhat = (x - mean) rstd, one fma
                    Tx.fma(xl[0:per], xl[0:per], rstd, -mean * rstd)
                else:
                    Tx.mul(xl[0:per], xl[0:per], rstd)
                dx_tile(tl, xl, wl, dyl, rstd, c_gx, mean_g)
                store(DX[r, c0 + k * width : c0 + k * width + width], tmp, stage)
                if dw_shared:
                    add_partial(dw, dws[k * width : k * width + width], dyl, xl, False)
                if db_regs:
                    add_db(dbl, k, dyl)
                elif centered and shared:
                    add_partial(db, dbs[k * width : k * width + width], dyl, None, False)
                if not dw_shared:  # the cluster's partial row, this slice's columns: written whole by its first row
                    add_partial(dw, DWP[q, c0 + k * width : c0 + k * width + width], dyl, xl, i == 0)
                    if centered:
                        add_partial(db, DBP[q, c0 + k * width : c0 + k * width + width], dyl, None, i == 0)
        # Partial row q, the cluster's: this slice's columns of it (each thread its own).
        if dw_shared:
            for k in T.serial(chunks):
                Tx.cta.copy(tmp[0:width], dws[k * width : k * width + width])
                Tx.cta.copy(DWP[q, c0 + k * width : c0 + k * width + width], tmp[0:width])
                if centered and shared:
                    Tx.cta.copy(tmp[0:width], dbs[k * width : k * width + width])
                    Tx.cta.copy(DBP[q, c0 + k * width : c0 + k * width + width], tmp[0:width])
        if db_regs:
            for k in T.unroll(chunks):
                Tx.cta.copy(DBP[q, c0 + k * width : c0 + k * width + width], dbr[k, 0:width])
        if not dw_shared:
            if m <= q:  # no row: zeros
                Tx.fill(dwl[0:per], 0.0)
                for k in T.serial(chunks):
                    Tx.cta.copy(DWP[q, c0 + k * width : c0 + k * width + width], dw[0:width])
                    if centered:
                        Tx.cta.copy(DBP[q, c0 + k * width : c0 + k * width + width], dw[0:width])
        close()

    return rows


def _groups(h: int, dtype: str, threads: int, g: c.RowGroupTile, centered: bool, saved: bool):
    """Short rows: lane groups of ``tpr`` lanes, ``rows_`` rows per CTA at a time, the CTAs
    walking the row groups with a stride of ``ctas``. Each lane keeps dW (and dB) of its row
    slot's columns in registers; at the end the CTA sums its slots through shared memory into
    its partial row. With ``saved`` statistics, each lane reads its row's mean and rstd."""
    rows_, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    load, store = c.group_io(g, dtype)  # rows past the last and the padding read 0
    weights = c.group_vector(g, h)
    cols = [cc * threads for cc in range(-(-width // threads))]  # the column sums' rounds

    @T.macro
    def rows(X, W, DY, DX, DWP, DBP, MEAN, RSTD, m, ctas, eps):
        T.device_entry()
        b = T.cta_id([ctas])
        T.warp_id([g.warps])
        T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        tmp = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        dw = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        if centered:
            db = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows_, width), dtype, scope="local", layout=g.layout)
        else:
            stage = tmp
        w = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        slots = T.alloc_buffer((rows_, width), "float32", scope="shared")
        xl, dyl, tl, dwl = x.local(), dy.local(), tmp.local(), dw.local()
        weights(w, W, tid % tpr)
        Tx.fill(dwl[0:per], 0.0)
        if centered:
            Tx.fill(db.local()[0:per], 0.0)
        for i in T.serial(((m + rows_ - 1) // rows_ - b + ctas - 1) // ctas):
            r0 = (b + i * ctas) * rows_
            load(x, X[r0 : r0 + rows_, 0:width], stage)
            load(dy, DY[r0 : r0 + rows_, 0:width], stage)
            if saved:  # this lane's row's (none past the last row; the padding's g is 0)
                mine = r0 + tid // tpr
                Tx.add(xl[0:per], xl[0:per], -T.if_then_else(mine < m, MEAN[mine], 0.0))
                rstd = T.if_then_else(mine < m, RSTD[mine], 0.0)
            else:
                if centered:  # the mean, then deviations about it; the padding's deviation 0
                    Tx.sum(part[0:1], xl[0:per])
                    total = T.cuda.warp_sum(part[0], width=tpr)
                    Tx.add(xl[0:per], xl[0:per], -total / float(h))
                    if width > h:
                        Tx.cta.masked_fill(x[0:rows_, 0:width], x[0:rows_, 0:width], lambda i2, j: j >= h, 0.0)
                Tx.mul(tl[0:per], xl[0:per], xl[0:per])
                Tx.sum(part[0:1], tl[0:per])
                sq = T.cuda.warp_sum(part[0], width=tpr)
                rstd = 1.0 / T.sqrt(sq / float(h) + eps)
            Tx.mul(tl[0:per], w[0:per], dyl[0:per])  # g = w * dy
            if centered:
                Tx.sum(part[0:1], tl[0:per])
                sum_g = T.cuda.warp_sum(part[0], width=tpr)
            Tx.mul(xl[0:per], xl[0:per], rstd)  # xhat
            Tx.fma(dwl[0:per], dyl[0:per], xl[0:per], dwl[0:per])
            if centered:
                Tx.add(db.local()[0:per], db.local()[0:per], dyl[0:per])
            Tx.mul(dyl[0:per], tl[0:per], xl[0:per])
            Tx.sum(part[0:1], dyl[0:per])
            sum_gx = T.cuda.warp_sum(part[0], width=tpr)
            # dx = rstd * (g - xhat * mean(g * xhat) - mean(g))
            Tx.fma(tl[0:per], xl[0:per], -sum_gx / float(h), tl[0:per])
            if centered:
                Tx.add(tl[0:per], tl[0:per], -sum_g / float(h))
            Tx.mul(tl[0:per], tl[0:per], rstd)
            store(DX[r0 : r0 + rows_, 0:width], tmp, stage)
        # The CTA's row slots summed per column into its partial row.
        Tx.cta.copy(slots[0:rows_, 0:width], dw[0:rows_, 0:width])
        T.cuda.cta_sync()
        for c0 in cols:
            part[0] = 0.0
            for s in T.serial(rows_):  # columns past the tile sum to 0 (inside the padded partial row)
                part[0] = part[0] + T.if_then_else(tid < width - c0, slots[s, c0 + tid], 0.0)
            DWP[b, c0 + tid] = part[0]
        if centered:
            T.cuda.cta_sync()
            Tx.cta.copy(slots[0:rows_, 0:width], db[0:rows_, 0:width])
            T.cuda.cta_sync()
            for c0 in cols:
                part[0] = 0.0
                for s in T.serial(rows_):  # columns past the tile sum to 0 (inside the padded partial row)
                    part[0] = part[0] + T.if_then_else(tid < width - c0, slots[s, c0 + tid], 0.0)
                DBP[b, c0 + tid] = part[0]

    return rows



def _padded(h: int) -> int:
    """The partial rows' width: h rounded up to 256 columns (whole CTAs of the column sums and
    whole 1 KiB rows; the padding's partial sums are 0: the rows read 0 there)."""
    return -(-h // 256) * 256


# Columns per CTA of the column sums: a lane each, `SPAN` times over where the grid stays this
# many CTAs or more (a CTA of a few columns over a few partial rows is mostly its launch: at
# 262,144 columns over 7 partial rows, 8,192 CTAs of 32 warps took ~45 us for 7 MB); and its
# warps, at most (each summing every warps-th partial row), no more than there are rows.
COLUMNS = 32
SPAN = 4
SPAN_CTAS = 512
COLUMN_WARPS = 32


def column_shape(h: int, rows: int) -> tuple:
    """``(span, warps)`` of the column sums of ``rows`` partial rows of ``h`` columns: `SPAN`
    columns a lane where the grid keeps `SPAN_CTAS` CTAs, and warps the rows' power of two up to
    `COLUMN_WARPS`."""
    span = SPAN if _padded(h) // (COLUMNS * SPAN) >= SPAN_CTAS else 1
    warps = 1
    while warps < min(rows, COLUMN_WARPS):
        warps *= 2
    return span, warps


# Rows a warp of the column sums reads per iteration (loads in flight; the order unchanged).
COLUMN_UNROLL = 4


def column_sums_kernel(h: int, dtype: str, span: int = 1, warps: int = COLUMN_WARPS, parts: int = 1):
    """``O[j] = sum_i P[i, j]`` over the ``rows`` float32 rows of ``P`` (``h`` columns padded to
    whole CTAs), rounded once to ``dtype``: the second pass of the dW/dB reduction. A CTA takes
    ``span`` x 32 columns, a lane ``span`` of them 32 apart (a warp reads 128 contiguous bytes of a
    row each time); its warp w sums the rows w, w + warps, ... in order (`COLUMN_UNROLL` of them
    an iteration), then warp 0 adds the warps' sums in order: a fixed order for a given number
    of rows (`column_shape`), the same result every run. ``parts=2``: ``(P, Q) -> (O, U)`` in one
    launch (dW's and dB's), the first half of the CTAs P's columns, the second Q's."""
    hp = _padded(h)
    width = COLUMNS * span
    blocks = hp // width

    @T.macro
    def sums_of(P, O, bx, rows, wid, lane, acc, sums):
        for j in T.unroll(span):
            acc[j] = 0.0
        for i in T.serial((rows + warps * COLUMN_UNROLL - 1) // (warps * COLUMN_UNROLL)):
            for u in T.unroll(COLUMN_UNROLL):
                r = wid + (i * COLUMN_UNROLL + u) * warps
                for j in T.unroll(span):
                    acc[j] = acc[j] + T.if_then_else(r < rows, P[r, bx * width + j * COLUMNS + lane], 0.0)
        for j in T.unroll(span):
            sums[wid, j * COLUMNS + lane] = acc[j]
        T.cuda.cta_sync()
        if wid == 0:
            for j in T.unroll(span):
                acc[j] = 0.0
                for w in T.serial(warps):
                    acc[j] = acc[j] + sums[w, j * COLUMNS + lane]
                O[bx * width + j * COLUMNS + lane] = T.cast(acc[j], dtype)

    if parts == 1:

        @T.prim_func
        def column_sums(P_ptr: T.handle, O_ptr: T.handle, rows: T.int32):
            P = T.match_buffer(P_ptr, (rows, hp), "float32")
            O = T.match_buffer(O_ptr, (hp,), dtype)
            T.device_entry()
            bx = T.cta_id([blocks])
            wid = T.warp_id([warps])
            lane = T.lane_id([32])
            T.thread_id([32 * warps])
            acc = T.alloc_buffer((span,), "float32", scope="local")
            sums = T.alloc_buffer((warps, width), "float32", scope="shared")
            sums_of(P, O, bx, rows, wid, lane, acc, sums)

        return column_sums

    @T.prim_func
    def column_sums_pair(P_ptr: T.handle, Q_ptr: T.handle, O_ptr: T.handle, U_ptr: T.handle, rows: T.int32):
        P = T.match_buffer(P_ptr, (rows, hp), "float32")
        Q = T.match_buffer(Q_ptr, (rows, hp), "float32")
        O = T.match_buffer(O_ptr, (hp,), dtype)
        U = T.match_buffer(U_ptr, (hp,), dtype)
        T.device_entry()
        bx = T.cta_id([2 * blocks])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        T.thread_id([32 * warps])
        acc = T.alloc_buffer((span,), "float32", scope="local")
        sums = T.alloc_buffer((warps, width), "float32", scope="shared")
        if bx < blocks:
            sums_of(P, O, bx, rows, wid, lane, acc, sums)
        else:
            sums_of(Q, U, bx - blocks, rows, wid, lane, acc, sums)

    return column_sums_pair


_column_sums = {}


def _sum_columns(parts, h: int, dtype: str, like):
    """The column sums of the partial rows ``parts`` (one array, or two summed in one launch): a
    new vector of ``h`` of ``dtype`` per array."""
    rows = parts[0].shape[0]
    key = (h, dtype, *column_shape(h, rows), len(parts))
    k = _column_sums.get(key)
    if k is None:
        import tirx

        k = _column_sums[key] = tirx.compile(column_sums_kernel(*key))
    outs = [c.new_array(like, _padded(h), dtype) for _ in parts]
    k(*parts, *outs, rows)
    return [o[:h] for o in outs]


# CTAs per SM of the backward's grid, at most ...
CTAS_PER_SM = 8
# ... and as many as keep float32 copies of their rows within this many bytes, at least 2: a
# CTA holding a wide row has no more than one or two companions on its SM, and each CTA writes
# (and the column sums read) a float32 partial row per sum, a traffic of ctas / rows of the
# row bytes' (at 65,536 columns and 1 GiB of bf16 rows, 8 CTAs per SM added 37 % to LayerNorm's).
CTA_ROW_BYTES = 128 * 1024
# The grid is whole clusters of the largest size tuned ...
CLUSTER_MAX = max(cfg.get("cluster", 1) for cfg in norm_backward_kernel.configs)
# ... and its CTAs' slices those of this cluster size: the partial rows allocated (`_most_ctas`)
# bound every design's grid, and clusters of 16 keep their slices' CTAs within it (their grid is
# their resident CTAs: 1-3 per SM) where sizing it for slices of 16 would double the allocation.
CLUSTER_SLICES_OF = 8


def ctas_per_sm(h: int) -> int:
    """The backward's CTAs per SM for rows (or a cluster's slices) of ``h``: `CTAS_PER_SM` up to
    4,096 columns, fewer for wider ones (`CTA_ROW_BYTES`), at least 2."""
    return max(2, min(CTAS_PER_SM, CTA_ROW_BYTES // (4 * max(h, 1))))


def _on_gpu(x) -> bool:
    return c.is_torch(x) and x.is_cuda


def _most_ctas(x, rows: int, h: int) -> int:
    """The partial rows allocated: the largest grid of any design (`_grid`; slices of clusters of
    `CLUSTER_SLICES_OF`), at most one CTA per row, rounded up to whole clusters of `CLUSTER_MAX`;
    the simulator's: one such cluster."""
    if not _on_gpu(x):
        return CLUSTER_MAX
    n = min(rows, ctas_per_sm(h // CLUSTER_SLICES_OF) * c.sm_count(x))
    return -(-n // CLUSTER_MAX) * CLUSTER_MAX


def _grid(kernel, x, most: int) -> int:
    """The grid of the design ``kernel`` (a run-time size, at most ``most``): `ctas_per_sm` of
    its CTAs' slices per SM, and no more CTAs than the GPU holds at once (`Kernel.resident_ctas`:
    a CTA of a second wave would take its rows after the first wave's, doubling the time), in
    whole clusters (CTAs past the rows write zero partial rows); the simulator's: ``most``."""
    if not _on_gpu(x):
        return most
    cn = kernel.cluster_size
    n = min(most, ctas_per_sm(x.shape[1] // cn) * c.sm_count(x), kernel.resident_ctas(x.get_device()))
    return max(cn, n // cn * cn)


def _own_grid(kernel, args) -> tuple:
    """A design's arguments (`autotune`'s ``launch_args``): its `_grid`, the partial rows cut to it."""
    x, w, dy, dx, dwp, dbp, m, most, *rest = args  # rest: eps, or the saved mean and rstd
    n = _grid(kernel, x, most)
    return (x, w, dy, dx, dwp[:n], dbp[:n], m, n, *rest)


def partial_rows(config: dict, ctas: int) -> int:
    """The partial rows that the design ``config`` writes on a grid of ``ctas``: a row per CTA, a
    row per cluster for the cluster design."""
    return ctas // config.get("cluster", 1)


def run(grad, x, weight, eps: float, centered: bool, saved=None):
    """``(dx, dw, db)`` of rows of ``x`` (rows, h) for the gradient ``grad`` of the norm's output
    (``db`` only when ``centered``); ``weight`` a vector of h, or None (then ``dw`` is None);
    ``saved``: LayerNorm's forward's ``(mean, rstd)``, float32 vectors of ``rows`` (then ``eps``
    is not used)."""
    rows, h = x.shape
    dtype = c.dtype_name(x)
    dx = c.empty_like(x)
    w = weight if weight is not None else c.constant_vector(x, h, dtype, 1.0)
    if rows == 0:
        dw = c.new_array(x, h, c.dtype_name(w), 0) if weight is not None else None
        return dx, dw, (c.new_array(x, h, c.dtype_name(w), 0) if centered else None)
    most = _most_ctas(x, rows, h)
    # Past h the partial rows are summed too (then dropped): zeros there where the rows are padded.
    fill = 0 if _padded(h) != h else None
    dwp = c.new_array(x, (most, _padded(h)), "float32", fill)
    dbp = c.new_array(x, (most, _padded(h)), "float32", fill) if centered else dwp
    tuned = norm_backward_kernel(h=h, dtype=dtype, centered=centered, saved=saved is not None, **c.weight_dtype_arg(dtype, w))
    tail = (float(eps),) if saved is None else saved
    tuned(x, w, grad, dx, dwp, dbp, rows, most, *tail)  # each design on its own grid (`_own_grid`)
    used = partial_rows(tuned.config, _grid(tuned.kernel, x, most))
    wd = c.dtype_name(w)  # (dW and dB of the parameters' dtype)
    wanted = ([dwp[:used]] if weight is not None else []) + ([dbp[:used]] if centered else [])
    sums = _sum_columns(wanted, h, wd, x) if wanted else []
    dw = sums[0] if weight is not None else None
    db = sums[-1] if centered else None
    return dx, dw, db
