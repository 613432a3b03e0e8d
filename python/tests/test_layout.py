"""Layouts as Python objects (docs/python.md §4) against the Rust crate: what Python builds is
what the script syntax builds, and the operations keep the map (property tests)."""

import itertools
import random

import pytest

import tirx
from tirx import layout as L
from tirx.layout import R, S, Axis, ComposeLayout, Iter, TileLayout, laneid, tx, warpid


def parse(text):
    return L._wrap(tirx._native.Layout.parse(text))


def test_spec_syntax_matches_the_script_syntax():
    cases = [
        (TileLayout(S[(32, 8) : (1 @ laneid, 1)]), "S[(32, 8):(1@laneid, 1)]"),
        (TileLayout(S[8, 4]), "S[(8, 4):(4, 1)]"),
        (TileLayout(S[8:4]), "S[8:4]"),
        (TileLayout(S[(8, 4) : ("laneid", (2, "warpid"))] + R[2 : 8 @ warpid] + 2 @ warpid + 64),
         "S[(8, 4):(1@laneid, 2@warpid)] + R[2:8@warpid] + 64 + 2@warpid"),
    ]
    for built, text in cases:
        assert built == parse(text), (built, text)
        assert parse(str(built)) == built


def test_compose_layout_fields_and_iters():
    c = ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))
    assert (c.per_element, c.swizzle_len, c.atom_len, c.swizzle_inner) == (3, 3, 3, True)
    assert c.is_swizzle() and not c.tile_layout.is_swizzle()
    t = TileLayout.from_iters([Iter(32, 1, laneid), Iter(8, 1)], [Iter(2, 32, "tx")], {Axis.warpid: 1})
    assert t.shard == [Iter(32, 1, "laneid"), Iter(8, 1, "m")]
    assert t.replica == [Iter(2, 32, tx)] and t.offset == {warpid: 1}
    assert L.wg_local_layout(16) == TileLayout(S[(128, 16) : (1 @ Axis.tid_in_wg, 1)])


def test_bad_layouts_are_errors():
    with pytest.raises(ValueError, match="extents but"):
        S[(32, 8) : (1,)]
    with pytest.raises(tirx.TirxError, match="layout error"):
        TileLayout(S[(0, 8)])
    with pytest.raises(ValueError, match="unknown axis"):
        Axis("lanes")


def random_layout(rng):
    n = rng.randint(1, 4)
    extents = [rng.choice([1, 2, 3, 4, 8]) for _ in range(n)]
    stride, strides = 1, []
    for e in reversed(extents):  # a permutation of a dense row-major layout: injective
        strides.append(stride)
        stride *= e
    strides.reverse()
    order = list(range(n))
    rng.shuffle(order)
    it = [(extents[i], strides[i]) for i in order]
    return TileLayout(S[tuple(e for e, _ in it) : tuple(s for _, s in it)]), tuple(e for e, _ in it)


def all_coords(shape):
    return itertools.product(*[range(d) for d in shape])


@pytest.mark.parametrize("seed", range(200))
def test_canonicalize_group_and_slice_keep_the_map(seed):
    rng = random.Random(seed)
    lay, shape = random_layout(rng)
    canon = lay.canonicalize()
    for c in all_coords(shape):
        assert canon.apply(*c, shape=shape) == lay.apply(*c, shape=shape)
    size = lay.size()
    flat = (size,)
    grouped, seps = lay.group(flat)
    assert seps[0] == 0 and seps[-1] == len(grouped.shard)
    for i in range(size):
        assert grouped.apply(i, shape=flat) == lay.apply(i, shape=flat)
    # Slice one whole dim at a random index: the slice maps like the original there.
    d = rng.randrange(len(shape))
    k = rng.randrange(shape[d])
    region = [(0, e) for e in shape]
    region[d] = (k, k + 1)
    sub_shape = [hi - lo for lo, hi in region]
    sl = lay.slice(shape, region)  # (begin, end) pairs, as the reference's Python takes them
    for c in all_coords(sub_shape):
        full = [lo + x for (lo, _), x in zip(region, c)]
        assert sl.apply(*c, shape=sub_shape).get("m", 0) == lay.apply(*full, shape=shape).get("m", 0)


@pytest.mark.parametrize("seed", range(50))
def test_tile_maps_outer_times_span_plus_inner(seed):
    rng = random.Random(seed)
    inner, ishape = random_layout(rng)
    outer_shape = tuple(rng.choice([1, 2, 3]) for _ in ishape)
    outer = TileLayout(S[outer_shape])
    tiled = inner.tile(outer, outer_shape, ishape)
    full = tuple(o * i for o, i in zip(outer_shape, ishape))
    span = inner.span()
    for o in all_coords(outer_shape):
        for i in all_coords(ishape):
            x = [a * e + b for a, e, b in zip(o, ishape, i)]
            want = outer.apply(*o, shape=outer_shape).get("m", 0) * span + inner.apply(*i, shape=ishape).get("m", 0)
            assert tiled.apply(*x, shape=full).get("m", 0) == want


def test_tensor_core_fragment_helpers():
    # The layouts the GEMM examples spelled out by hand (issue 29 item 6).
    from tirx.layout import (
        mma_a_layout,
        mma_acc_layout,
        mma_b_layout,
        mma_row_layout,
        wgmma_acc_layout,
        wgmma_row_layout,
    )

    assert str(mma_a_layout(64, 32)) == "S[(4, 2, 8, 2, 2, 4, 2):(16, 2, 4@laneid, 8, 4, 1@laneid, 1)]"
    assert str(mma_b_layout(32, 32)) == "S[(2, 2, 4, 2, 4, 8):(16, 2, 1@laneid, 1, 4, 4@laneid)]"
    assert str(mma_acc_layout(64, 32)) == "S[(4, 2, 8, 4, 4, 2):(16, 2, 4@laneid, 4, 1@laneid, 1)]"
    assert str(mma_row_layout(32)) == "S[(2, 2, 8, 1):(2, 1, 4@laneid, 1)] + R[4:1@laneid]"
    assert str(wgmma_acc_layout(128)) == "S[(4, 2, 8, 16, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)]"
    assert str(wgmma_row_layout()) == "S[(4, 2, 8, 1):(1@wid_in_wg, 1, 4@laneid, 1)] + R[4:1@laneid]"
    with pytest.raises(Exception, match="multiple of 16"):
        mma_acc_layout(24, 8)
