//! Layouts as Python objects: one class over `tirx_layout::Layout` (a
//! `TileLayout` or a swizzled `ComposeLayout`). The Python package wraps it in
//! `tirx.layout.TileLayout` / `ComposeLayout` and builds it from `S[...]`,
//! `R[...]` and axis strides (`docs/python.md` §4); every operation here is the
//! layout crate's, so Python and scripts compute the same layouts.

use crate::user_error;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use tirx_layout::{
    mma_atom_layout, mma_atom_shape, mma_shared_layout, tcgen05_atom_layout, Axis, ComposeLayout, Fusion, Iter, Layout,
    LayoutError, Swizzle, SwizzleMode, Tcgen05Shape, TileLayout,
};

fn err(e: LayoutError) -> PyErr {
    user_error(format!("layout error: {e}"))
}

fn axis(name: &str) -> PyResult<Axis> {
    Axis::from_name(name).ok_or_else(|| user_error(format!("unknown axis `{name}`")))
}

/// Layout methods never fuse thread axes unless asked (`fusion="cuda"`), as in scripts
/// (and the reference outside a target); lowering fuses later.
fn fusion(name: Option<&str>) -> PyResult<Fusion> {
    match name {
        None => Ok(Fusion::None),
        Some(n) => Fusion::from_name(n).ok_or_else(|| user_error(format!("unknown fusion `{n}`"))),
    }
}

/// `(extent, stride, axis)` triples → iters.
fn iters(v: Vec<(i64, i64, String)>) -> PyResult<Vec<Iter>> {
    v.into_iter().map(|(e, s, a)| Ok(Iter::new(e, s, axis(&a)?))).collect()
}

fn triples(v: &[Iter]) -> Vec<(i64, i64, String)> {
    v.iter().map(|i| (i.extent, i.stride, i.axis.name().to_string())).collect()
}

#[pyclass(frozen, eq, hash, name = "Layout", module = "tirx._native")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyLayout(pub Layout);

impl PyLayout {
    fn as_tile(&self) -> PyResult<&TileLayout> {
        match &self.0 {
            Layout::Tile(t) => Ok(t),
            Layout::Compose(_) => Err(user_error("this operation needs a TileLayout, not a swizzled ComposeLayout")),
        }
    }
}

#[pymethods]
impl PyLayout {
    /// A `TileLayout` from its shard, replica and per-axis offsets (validated).
    #[staticmethod]
    #[pyo3(signature = (shard, replica = vec![], offset = BTreeMap::new()))]
    fn from_iters(
        shard: Vec<(i64, i64, String)>,
        replica: Vec<(i64, i64, String)>,
        offset: BTreeMap<String, i64>,
    ) -> PyResult<PyLayout> {
        let offset = offset.into_iter().map(|(a, v)| Ok((axis(&a)?, v))).collect::<PyResult<BTreeMap<_, _>>>()?;
        let t = TileLayout::new(iters(shard)?, iters(replica)?, offset);
        t.validate().map_err(err)?;
        Ok(PyLayout(Layout::Tile(t)))
    }

    /// `ComposeLayout(per_element, swizzle_len, atom_len, tile, swizzle_inner)`.
    #[staticmethod]
    #[pyo3(signature = (per_element, swizzle_len, atom_len, tile, swizzle_inner = true))]
    fn compose(
        per_element: u32,
        swizzle_len: u32,
        atom_len: u32,
        tile: &PyLayout,
        swizzle_inner: bool,
    ) -> PyResult<PyLayout> {
        let sw = Swizzle::new(per_element, swizzle_len, atom_len, swizzle_inner).map_err(err)?;
        Ok(PyLayout(Layout::Compose(ComposeLayout::new(sw, tile.as_tile()?.clone()).map_err(err)?)))
    }

    /// Parses the script syntax (`S[(32, 8):(1@laneid, 1)] + R[2:4@warpid]`).
    #[staticmethod]
    fn parse(text: &str) -> PyResult<PyLayout> {
        tirx_layout::parse_layout(text).map(PyLayout).map_err(|e| user_error(e.render(text)))
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        match &self.0 {
            Layout::Tile(t) => format!("TileLayout({t})"),
            Layout::Compose(c) => c.to_string(),
        }
    }

    fn is_tile(&self) -> bool {
        matches!(self.0, Layout::Tile(_))
    }

    /// The swizzled layout's tile (the layout itself for a TileLayout).
    fn base(&self) -> PyLayout {
        match &self.0 {
            Layout::Tile(_) => self.clone(),
            Layout::Compose(c) => PyLayout(Layout::Tile(c.tile.clone())),
        }
    }

    /// `(per_element, swizzle_len, atom_len, swizzle_inner)` of a ComposeLayout, else None.
    fn swizzle(&self) -> Option<(u32, u32, u32, bool)> {
        match &self.0 {
            Layout::Compose(c) => {
                Some((c.swizzle.per_element, c.swizzle.swizzle_len, c.swizzle.atom_len, c.swizzle.inner))
            }
            Layout::Tile(_) => None,
        }
    }

    fn shard(&self) -> PyResult<Vec<(i64, i64, String)>> {
        Ok(triples(&self.base().as_tile()?.shard))
    }

    fn replica(&self) -> PyResult<Vec<(i64, i64, String)>> {
        Ok(triples(&self.base().as_tile()?.replica))
    }

    fn offset(&self) -> PyResult<BTreeMap<String, i64>> {
        Ok(self.base().as_tile()?.offset.iter().map(|(a, v)| (a.name().to_string(), *v)).collect())
    }

    #[pyo3(signature = (fusion = None))]
    fn canonicalize(&self, fusion: Option<&str>) -> PyResult<PyLayout> {
        self.0.canonicalize(self::fusion(fusion)?).map(PyLayout).map_err(err)
    }

    /// `(layout, seps)`: the shard split so dimension `d` owns `shard[seps[d]..seps[d+1]]`.
    fn group(&self, shape: Vec<i64>) -> PyResult<(PyLayout, Vec<usize>)> {
        let (t, seps) = self.as_tile()?.group(&shape).map_err(err)?;
        Ok((PyLayout(Layout::Tile(t)), seps))
    }

    fn permute_by_groups(&self, seps: Vec<usize>, perm: Vec<usize>) -> PyResult<PyLayout> {
        self.as_tile()?.permute_by_groups(&seps, &perm).map(|t| PyLayout(Layout::Tile(t))).map_err(err)
    }

    /// `self` (the inner tile over `inner_shape`) tiled by `outer` over `outer_shape`.
    #[pyo3(signature = (outer, outer_shape, inner_shape, fusion = None))]
    fn tile(
        &self,
        outer: &PyLayout,
        outer_shape: Vec<i64>,
        inner_shape: Vec<i64>,
        fusion: Option<&str>,
    ) -> PyResult<PyLayout> {
        let t =
            self.as_tile()?.tile(outer.as_tile()?, &outer_shape, &inner_shape, self::fusion(fusion)?).map_err(err)?;
        Ok(PyLayout(Layout::Tile(t)))
    }

    /// `self` (an atom over `atom_shape`) repeated row-major to cover `shape`.
    #[pyo3(signature = (shape, atom_shape, fusion = None))]
    fn tile_to(&self, shape: Vec<i64>, atom_shape: Vec<i64>, fusion: Option<&str>) -> PyResult<PyLayout> {
        self.0.tile_to(&shape, &atom_shape, self::fusion(fusion)?).map(PyLayout).map_err(err)
    }

    /// The minimal common refinement for several logical shapes: `(layout, seps per shape)`.
    fn group_many(&self, shapes: Vec<Vec<i64>>) -> PyResult<(PyLayout, Vec<Vec<usize>>)> {
        let (t, seps) = self.as_tile()?.group_many(&shapes).map_err(err)?;
        Ok((PyLayout(Layout::Tile(t)), seps))
    }

    /// The layout of region `[(begin, end), ...]` of a buffer of `shape` (the reference's
    /// convention; the crate takes `(begin, extent)`).
    #[pyo3(signature = (shape, region, fusion = None))]
    fn slice(&self, shape: Vec<i64>, region: Vec<(i64, i64)>, fusion: Option<&str>) -> PyResult<PyLayout> {
        let region: Vec<(i64, i64)> = region.into_iter().map(|(b, e)| (b, e.saturating_sub(b))).collect();
        self.0.slice(&shape, &region, self::fusion(fusion)?).map(PyLayout).map_err(err)
    }

    fn storage(&self) -> PyLayout {
        PyLayout(self.0.storage())
    }

    #[pyo3(signature = (axis = None))]
    fn size(&self, axis: Option<&str>) -> PyResult<i64> {
        self.0.size(axis.map(self::axis).transpose()?).map_err(err)
    }

    #[pyo3(signature = (axis = None))]
    fn span(&self, axis: Option<&str>) -> PyResult<i64> {
        self.0.span(axis.map(self::axis).transpose()?).map_err(err)
    }

    /// Where element `coord` of a buffer of `shape` lives: `{axis: value}` (the first home).
    fn apply(&self, coord: Vec<i64>, shape: Vec<i64>) -> PyResult<BTreeMap<String, i64>> {
        let c = self.0.apply(&coord, &shape).map_err(err)?;
        Ok(c.into_iter().map(|(a, v)| (a.name().to_string(), v)).collect())
    }

    /// Every home of element `coord` (replicas included).
    fn apply_set(&self, coord: Vec<i64>, shape: Vec<i64>) -> PyResult<Vec<BTreeMap<String, i64>>> {
        let cs = self.0.apply_set(&coord, &shape).map_err(err)?;
        Ok(cs.into_iter().map(|c| c.into_iter().map(|(a, v)| (a.name().to_string(), v)).collect()).collect())
    }

    /// Whether no two elements share a home; otherwise a message naming two that do.
    fn injectivity(&self) -> PyResult<Option<String>> {
        let inj = self.0.injectivity().map_err(err)?;
        Ok(inj.collision().map(|c| format!("{c:?}")))
    }
}

fn mode(m: i64) -> PyResult<SwizzleMode> {
    SwizzleMode::from_index(m).map_err(err)
}

/// `mma_atom_shape(elem_bits, mode, rank)`: one canonical shared atom's logical shape.
#[pyfunction]
#[pyo3(signature = (elem_bits, swizzle_mode, rank = 2))]
pub fn mma_atom_shape_of(elem_bits: u32, swizzle_mode: i64, rank: usize) -> PyResult<Vec<i64>> {
    mma_atom_shape(elem_bits, mode(swizzle_mode)?, rank).map_err(err)
}

/// `mma_atom_layout(elem_bits, mode)`: one canonical shared atom (a bare swizzle).
#[pyfunction]
pub fn mma_atom_layout_of(elem_bits: u32, swizzle_mode: i64) -> PyResult<PyLayout> {
    mma_atom_layout(elem_bits, mode(swizzle_mode)?).map(|c| PyLayout(Layout::Compose(c))).map_err(err)
}

/// `mma_shared_layout(elem_bits, mode, shape)`: the canonical (swizzled) shared tile.
#[pyfunction]
pub fn mma_shared_layout_of(elem_bits: u32, swizzle_mode: i64, shape: Vec<i64>) -> PyResult<PyLayout> {
    mma_shared_layout(elem_bits, mode(swizzle_mode)?, &shape).map(PyLayout).map_err(err)
}

/// `tcgen05_atom_layout(shape_name, rows, cols, elem_bits)` as a register layout.
#[pyfunction]
pub fn tcgen05_atom_layout_of(shape: &str, rows: i64, cols: i64, elem_bits: u32) -> PyResult<PyLayout> {
    let s =
        Tcgen05Shape::from_name(shape).ok_or_else(|| user_error(format!("unknown tcgen05 atom shape `{shape}`")))?;
    tcgen05_atom_layout(s, rows, cols, elem_bits).map(|t| PyLayout(Layout::Tile(t))).map_err(err)
}

/// A tensor-core fragment's register layout by helper name (`mma_acc_layout`, ...) and sizes.
#[pyfunction]
pub fn fragment_layout_of(name: &str, dims: Vec<i64>) -> PyResult<PyLayout> {
    let f = tirx_layout::Fragment::from_name(name)
        .ok_or_else(|| user_error(format!("no tensor-core fragment helper `{name}`")))?;
    tirx_layout::fragment_layout(f, &dims).map(|t| PyLayout(Layout::Tile(t))).map_err(err)
}
