//! Operations on layout values (docs/layout-model.md §2.14): the methods
//! (`L.tile_to(...)`, `L.group(...)`, ...), the attributes of layouts, iters and
//! axes, the helpers (`mma_shared_layout`, `tcgen05_atom_layout`,
//! `TileLayout.from_iters`, `Iter`, ...) and dict values (`{m: 0}`, the result
//! of `L.apply`). Each is one call into `tirx_layout`; its typed error becomes a
//! diagnostic on the argument at fault (else the call) with a fix.
//!
//! Methods work without thread-axis fusion, as the reference evaluates layout
//! code outside a target: the layouts keep the axes they were written with
//! (lowering fuses later). Unlike the reference, a region `slice` cannot
//! express is an error at the call, not `None`.

use crate::ast;
use crate::builder::{Builder, R};
use crate::eval::{Args, Kwarg, Posarg};
use crate::names::{layout_import, script_names, Namespace};
use crate::value::*;
use tirx_ir::{Diagnostic, Span};
use tirx_layout::{
    fragment_layout, mma_atom_layout, mma_atom_shape, mma_shared_layout, tcgen05_atom_layout, wg_local_layout, Axis,
    Fusion, Iter, Layout, LayoutError, SwizzleMode, Tcgen05Shape, TileLayout,
};

/// Script layout code never fuses thread axes (module doc).
const FUSION: Fusion = Fusion::None;

/// The reference's `SwizzleMode` members, as the ints 0..=3.
const SWIZZLE_MODES: [&str; 4] = ["SWIZZLE_NONE", "SWIZZLE_32B_ATOM", "SWIZZLE_64B_ATOM", "SWIZZLE_128B_ATOM"];

/// Attributes of a TileLayout / ComposeLayout value besides its methods.
const TILE_ATTRS: [&str; 3] = ["shard", "replica", "offset"];
const COMPOSE_ATTRS: [&str; 5] = ["per_element", "swizzle_len", "atom_len", "swizzle_inner", "tile_layout"];

/// Which argument (by name) is at fault for which errors of one call.
struct Blame<'a> {
    op: String,
    call: Span,
    args: Vec<(&'a str, Span)>,
    /// The argument a `ShapeMismatch` / `RankMismatch` points at.
    shape: Option<&'a str>,
}

impl Blame<'_> {
    fn span_of(&self, name: &str) -> Option<Span> {
        self.args.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }
}

impl Builder<'_> {
    // ------------------------------------------------------------------ attributes

    /// `L.<name>`: a method (bound, called next) or an attribute.
    pub(crate) fn layout_attr(&mut self, l: Layout, name: &str, nsp: Span) -> R<Val> {
        if let Some(m) = LayoutMethod::from_name(name) {
            return Ok(Val::LayoutMethod(Box::new(l), m));
        }
        let iters = |v: &[Iter]| Val::List(v.iter().copied().map(Val::Iter).collect());
        let v = match (&l, name) {
            (Layout::Tile(t), "shard") => iters(&t.shard),
            (Layout::Tile(t), "replica") => iters(&t.replica),
            (Layout::Tile(t), "offset") => {
                Val::Dict(t.offset.iter().map(|(a, v)| (Val::Axis(*a), Val::Int(*v))).collect())
            }
            (Layout::Compose(c), "per_element") => Val::Int(c.swizzle.per_element.into()),
            (Layout::Compose(c), "swizzle_len") => Val::Int(c.swizzle.swizzle_len.into()),
            (Layout::Compose(c), "atom_len") => Val::Int(c.swizzle.atom_len.into()),
            (Layout::Compose(c), "swizzle_inner") => Val::Bool(c.swizzle.inner),
            (Layout::Compose(c), "tile_layout") => Val::Layout(Layout::Tile(c.tile.clone())),
            _ => {
                let (kind, attrs): (&str, &[&str]) = match l {
                    Layout::Tile(_) => ("a TileLayout", &TILE_ATTRS),
                    Layout::Compose(_) => ("a ComposeLayout", &COMPOSE_ATTRS),
                };
                let mut names: Vec<&str> = LayoutMethod::ALL.iter().map(|m| m.name()).collect();
                names.extend_from_slice(attrs);
                let d =
                    Diagnostic::error(nsp, format!("{kind} has no attribute `{name}`")).with_label("unknown attribute");
                return self.fail(did_you_mean(d, name, &names, "methods and attributes", false));
            }
        };
        self.bounded(v, nsp)
    }

    /// `it.extent`, `it.stride`, `it.axis`.
    pub(crate) fn iter_attr(&mut self, it: Iter, name: &str, nsp: Span) -> R<Val> {
        Ok(match name {
            "extent" => Val::Int(it.extent),
            "stride" => Val::Int(it.stride),
            "axis" => Val::Axis(it.axis),
            _ => {
                let d = Diagnostic::error(nsp, format!("an iter has no attribute `{name}`"))
                    .with_label("unknown attribute");
                return self.fail(did_you_mean(d, name, &["extent", "stride", "axis"], "attributes", false));
            }
        })
    }

    /// `laneid.name`.
    pub(crate) fn axis_attr(&mut self, a: Axis, name: &str, nsp: Span) -> R<Val> {
        match name {
            "name" => Ok(Val::Str(a.name().to_string())),
            _ => self.fail(
                Diagnostic::error(nsp, format!("an axis has no attribute `{name}`"))
                    .with_label("unknown attribute")
                    .with_help("an axis has `.name`"),
            ),
        }
    }

    /// `SwizzleMode.SWIZZLE_128B_ATOM` → 3.
    pub(crate) fn swizzle_mode_attr(&mut self, name: &str, nsp: Span) -> R<Val> {
        match SWIZZLE_MODES.iter().position(|m| *m == name) {
            Some(i) => Ok(Val::Int(i as i64)),
            None => {
                let help = match closest(name, SWIZZLE_MODES) {
                    Some(c) => format!("did you mean `SwizzleMode.{c}`?"),
                    None => format!("the members are {}", SWIZZLE_MODES.join(", ")),
                };
                self.fail(
                    Diagnostic::error(nsp, format!("`SwizzleMode` has no member `{name}`"))
                        .with_label("unknown member")
                        .with_help(help),
                )
            }
        }
    }

    // ------------------------------------------------------------------ dicts

    /// `{k: v, ...}`: keys are compile-time ints, strings, bools or axes.
    pub(crate) fn dict_literal(&mut self, items: &[(ast::Expr, ast::Expr)], span: Span) -> R<Val> {
        let mut out: Vec<(Val, Val)> = Vec::with_capacity(items.len());
        for (k, v) in items {
            let key = self.eval(k)?;
            if !matches!(key, Val::Int(_) | Val::Str(_) | Val::Bool(_) | Val::Axis(_)) {
                return self.expected_kind("a dict key (an int, a string or an axis)", &key, k.span);
            }
            let value = self.eval(v)?;
            match out.iter_mut().find(|(x, _)| *x == key) {
                Some(slot) => slot.1 = value,
                None => out.push((key, value)),
            }
            if out.len() > MAX_SEQ {
                return self.too_large(span);
            }
        }
        self.bounded(Val::Dict(out), span)
    }

    /// `d[key]`.
    pub(crate) fn dict_subscript(&mut self, items: Vec<(Val, Val)>, idx: &ast::Expr) -> R<Val> {
        let key = self.eval(idx)?;
        if let Some((_, v)) = items.iter().find(|(k, _)| *k == key) {
            return Ok(v.clone());
        }
        let keys: Vec<String> = items.iter().take(16).map(|(k, _)| key_text(k)).collect();
        self.fail(
            Diagnostic::error(idx.span, format!("key {} is not in the dict", key_text(&key)))
                .with_label("missing key")
                .with_note(format!("keys: {}", keys.join(", "))),
        )
    }

    // ------------------------------------------------------------------ methods

    /// Calls `L.<method>(...)`.
    pub(crate) fn layout_method(
        &mut self,
        l: Layout,
        m: LayoutMethod,
        pos: Vec<Posarg>,
        kw: Vec<Kwarg>,
        span: Span,
    ) -> R<Val> {
        let mut a = Args::new(format!("{}()", m.name()), pos, kw, span);
        let r = match m {
            LayoutMethod::TileTo => {
                // The reference names them `to_shape` and `current_shape`.
                let (shape, ss) = self.shape_arg_alias(&mut a, "shape", "to_shape")?;
                let (atom, ats) = self.shape_arg_alias(&mut a, "atom_shape", "current_shape")?;
                let blame = blame(m, span, vec![("shape", ss), ("atom_shape", ats)], Some("atom_shape"));
                Val::Layout(self.layout_result(l.tile_to(&shape, &atom, FUSION), &blame)?)
            }
            LayoutMethod::Tile => {
                let (o, os) = a.req(self, "outer")?;
                let outer = self.tile_layout_value(o, os)?;
                let (outer_shape, oss) = self.shape_arg(&mut a, "outer_shape")?;
                let (inner_shape, iss) = self.shape_arg(&mut a, "inner_shape")?;
                let spans = vec![("outer", os), ("outer_shape", oss), ("inner_shape", iss)];
                let blame = blame(m, span, spans, Some("inner_shape"));
                Val::Layout(self.layout_result(l.tile_by(&outer, &outer_shape, &inner_shape, FUSION), &blame)?)
            }
            LayoutMethod::Group => {
                let t = self.tile_of(&l, m, span)?;
                let (shape, ss) = self.shape_arg(&mut a, "shape")?;
                let blame = blame(m, span, vec![("shape", ss)], Some("shape"));
                let (g, seps) = self.layout_result(t.group(&shape), &blame)?;
                Val::Tuple(vec![Val::Layout(Layout::Tile(g)), int_list(&seps)])
            }
            LayoutMethod::GroupMany => {
                let t = self.tile_of(&l, m, span)?;
                let (v, ss) = a.req(self, "shapes")?;
                let shapes = match v.items() {
                    Some(xs) => xs.iter().map(|x| self.dims_of(x.clone(), ss)).collect::<R<Vec<_>>>()?,
                    None => return self.expected_kind("a list of shapes", &v, ss),
                };
                let blame = blame(m, span, vec![("shapes", ss)], Some("shapes"));
                let (g, seps) = self.layout_result(t.group_many(&shapes), &blame)?;
                Val::Tuple(vec![Val::Layout(Layout::Tile(g)), Val::List(seps.iter().map(|s| int_list(s)).collect())])
            }
            LayoutMethod::PermuteByGroups => {
                let t = self.tile_of(&l, m, span)?;
                let (seps, ss) = self.index_list(&mut a, "seps")?;
                let (perm, ps) = self.index_list(&mut a, "perm")?;
                let blame = blame(m, span, vec![("seps", ss), ("perm", ps)], None);
                Val::Layout(Layout::Tile(self.layout_result(t.permute_by_groups(&seps, &perm), &blame)?))
            }
            LayoutMethod::PermuteDims => {
                let t = self.tile_of(&l, m, span)?;
                let (perm, ps) = self.index_list(&mut a, "perm")?;
                let blame = blame(m, span, vec![("perm", ps)], Some("perm"));
                Val::Layout(Layout::Tile(self.layout_result(t.permute_dims(&perm), &blame)?))
            }
            LayoutMethod::Canonicalize => {
                Val::Layout(self.layout_result(l.canonicalize(FUSION), &blame(m, span, vec![], None))?)
            }
            LayoutMethod::Slice => {
                let (shape, ss) = self.shape_arg(&mut a, "shape")?;
                let (rv, rs) = a.req(self, "region")?;
                let region = self.region_of(rv, rs)?;
                let blame = blame(m, span, vec![("shape", ss), ("region", rs)], Some("shape"));
                Val::Layout(self.layout_result(l.slice(&shape, &region, FUSION), &blame)?)
            }
            LayoutMethod::Storage => Val::Layout(l.storage()),
            LayoutMethod::Size | LayoutMethod::Span => {
                // `axis_name=` as in the reference, or `axis=`.
                let given = match a.opt(self, "axis_name")? {
                    None => a.kw("axis"),
                    some => some,
                };
                let axis = match given {
                    None | Some((Val::None, _)) => None,
                    Some((Val::Axis(x), _)) => Some(x),
                    Some((Val::Str(s), sp)) => Some(self.axis_named(&s, sp)?),
                    Some((other, sp)) => return self.expected_kind("an axis or an axis name", &other, sp),
                };
                let r = if m == LayoutMethod::Size { l.size(axis) } else { l.span(axis) };
                Val::Int(self.layout_result(r, &blame(m, span, vec![], None))?)
            }
            LayoutMethod::Apply => return self.layout_apply(&l, a, span),
        };
        a.finish(self)?;
        Ok(r)
    }

    /// `L.apply(*coord, shape=None)` → `{axis name: value}`: one coordinate and no
    /// shape is a flat index, several without a shape one digit per shard iter.
    fn layout_apply(&mut self, l: &Layout, mut a: Args, span: Span) -> R<Val> {
        let shape = match a.kw("shape") {
            None | Some((Val::None, _)) => None,
            Some((v, sp)) => Some((self.dims_of(v, sp)?, sp)),
        };
        let mut coord = vec![];
        for (v, sp) in a.rest() {
            coord.push(self.const_int(v, sp)?);
        }
        a.finish(self)?;
        let mut spans = vec![];
        if let Some((_, sp)) = &shape {
            spans.push(("shape", *sp));
        }
        let blame = blame(LayoutMethod::Apply, span, spans, Some("shape"));
        let r = match (&shape, coord.as_slice()) {
            // A flat index into a multi-dimensional shape: its row-major coordinate.
            (Some((s, _)), [x]) if s.len() != 1 => {
                let total: i64 = s.iter().product();
                if (0..total).contains(x) {
                    l.apply(&tirx_layout::apply::split_coord(*x, s), s)
                } else {
                    Err(LayoutError::CoordOutOfRange { dim: 0, value: *x, extent: total })
                }
            }
            (Some((s, _)), _) => l.apply(&coord, s),
            (None, [x]) => l.apply_linear(*x),
            (None, _) => match l {
                Layout::Tile(t) => t.apply_shard(&coord),
                Layout::Compose(_) => {
                    return self.fail(
                        Diagnostic::error(
                            span,
                            "a ComposeLayout applies to a flat index or a coordinate with `shape=`",
                        )
                        .with_label("one digit per shard iter")
                        .with_help("pass `shape=` (e.g. `L.apply(i, j, shape=(M, N))`)"),
                    )
                }
            },
        };
        let c = self.layout_result(r, &blame)?;
        Ok(Val::Dict(c.into_iter().map(|(ax, v)| (Val::Str(ax.name().to_string()), Val::Int(v))).collect()))
    }

    // ------------------------------------------------------------------ helpers

    /// The layout helpers and `Iter` / `TileLayout.from_iters` / `Axis.get`.
    pub(crate) fn layout_helper(&mut self, b: Builtin, a: &mut Args, span: Span) -> R<Val> {
        let op = self.builtin_name(b);
        Ok(match b {
            Builtin::Iter => {
                let (e, es) = a.req(self, "extent")?;
                let extent = self.positive_int(e, es)?;
                let (s, ss) = a.req(self, "stride")?;
                let stride = self.const_int(s, ss)?;
                let (x, xs) = a.req(self, "axis")?;
                let axis = self.axis_value(x, xs)?;
                Val::Iter(Iter::new(extent, stride, axis))
            }
            Builtin::AxisGet => {
                let (x, xs) = a.req(self, "name")?;
                match x {
                    Val::Str(name) => Val::Axis(self.axis_named(&name, xs)?),
                    other => return self.expected_kind("an axis name", &other, xs),
                }
            }
            Builtin::FromIters => {
                let (shard, ss) = self.iter_list(a, "shard")?;
                let (replica, rs) = self.iter_list(a, "replica")?;
                let (offset, os) = match a.opt(self, "offset")? {
                    None | Some((Val::None, _)) => (Default::default(), span),
                    Some((Val::Dict(kv), sp)) => {
                        // As the reference converts name keys to axes: a later key for the same axis wins.
                        let mut off = std::collections::BTreeMap::new();
                        for (k, v) in kv {
                            let axis = self.axis_value(k, sp)?;
                            off.insert(axis, self.const_int(v, sp)?);
                        }
                        (off, sp)
                    }
                    Some((other, sp)) => return self.expected_kind("a dict `{axis: offset}`", &other, sp),
                };
                let blame =
                    Blame { op, call: span, args: vec![("shard", ss), ("replica", rs), ("offset", os)], shape: None };
                Val::Layout(Layout::Tile(self.layout_result(TileLayout::from_iters(shard, replica, offset), &blame)?))
            }
            Builtin::FragmentLayout(f) => {
                let (mut dims, mut args) = (Vec::new(), Vec::new());
                for &p in f.params() {
                    let (v, vs) = a.req(self, p)?;
                    dims.push(self.positive_int(v, vs)?);
                    args.push((p, vs));
                }
                let blame = Blame { op, call: span, args, shape: None };
                Val::Layout(Layout::Tile(self.layout_result(fragment_layout(f, &dims), &blame)?))
            }
            Builtin::WgLocalLayout => {
                let (c, cs) = a.req(self, "cols")?;
                let cols = self.positive_int(c, cs)?;
                let rows = match a.opt(self, "rows")? {
                    Some((r, rs)) => self.positive_int(r, rs)?,
                    None => 128,
                };
                let blame = Blame { op, call: span, args: vec![("cols", cs)], shape: None };
                Val::Layout(Layout::Tile(self.layout_result(wg_local_layout(cols, rows), &blame)?))
            }
            Builtin::MmaAtomShape | Builtin::MmaAtomLayout | Builtin::MmaSharedLayout => {
                let (d, ds) = a.req(self, "dtype")?;
                let bits = self.dtype_of(d, ds)?.bits();
                let (mv, ms) = a.req(self, "swizzle_mode")?;
                let mode = self.swizzle_mode(mv, ms)?;
                let mut args = vec![("dtype", ds), ("swizzle_mode", ms)];
                match b {
                    Builtin::MmaAtomLayout => {
                        let blame = Blame { op, call: span, args, shape: None };
                        Val::Layout(Layout::Compose(self.layout_result(mma_atom_layout(bits, mode), &blame)?))
                    }
                    // `shape` only gives the rank to pad the atom shape to.
                    Builtin::MmaAtomShape => {
                        let rank = match a.opt(self, "shape")? {
                            None | Some((Val::None, _)) => 2,
                            Some((v, sp)) => self.dims_of(v, sp)?.len(),
                        };
                        let blame = Blame { op, call: span, args, shape: None };
                        int_list(&self.layout_result(mma_atom_shape(bits, mode, rank), &blame)?)
                    }
                    _ => {
                        let (shape, sp) = self.shape_arg(a, "shape")?;
                        args.push(("shape", sp));
                        let blame = Blame { op, call: span, args, shape: Some("shape") };
                        Val::Layout(self.layout_result(mma_shared_layout(bits, mode, &shape), &blame)?)
                    }
                }
            }
            Builtin::Tcgen05AtomLayout => {
                let (sv, ss) = a.req(self, "instr_shape")?;
                let shape = match sv {
                    Val::Str(s) => match Tcgen05Shape::from_name(&s) {
                        Some(x) => x,
                        None => {
                            let names: Vec<&str> = Tcgen05Shape::ALL.iter().map(|x| x.name()).collect();
                            let d = Diagnostic::error(ss, format!("unknown tcgen05 atom shape `{s}`"))
                                .with_label("not a tcgen05.ld/st shape");
                            return self.fail(did_you_mean(d, &s, &names, "shapes", true));
                        }
                    },
                    other => return self.expected_kind("a shape name like \"16x256b\"", &other, ss),
                };
                let (tv, ts) = a.req(self, "tensor_shape")?;
                let dims = self.dims_of(tv, ts)?;
                let (d, ds) = a.req(self, "dtype")?;
                let bits = self.dtype_of(d, ds)?.bits();
                let [rows, cols] = dims[..] else {
                    return self.fail(
                        Diagnostic::error(ts, format!("expected (rows, cols), found {} dimension(s)", dims.len()))
                            .with_label("a 2-D fragment shape")
                            .with_help("e.g. `tcgen05_atom_layout(\"16x256b\", (64, 64), \"float32\")`"),
                    );
                };
                let args = vec![("instr_shape", ss), ("tensor_shape", ts), ("dtype", ds)];
                let blame = Blame { op, call: span, args, shape: Some("tensor_shape") };
                Val::Layout(Layout::Tile(self.layout_result(tcgen05_atom_layout(shape, rows, cols, bits), &blame)?))
            }
            _ => return self.fail(Diagnostic::error(span, format!("`{op}` is not a layout helper"))),
        })
    }

    // ------------------------------------------------------------------ arguments

    /// A shape argument also accepted under the reference's keyword `alias`.
    fn shape_arg_alias(&mut self, a: &mut Args, name: &str, alias: &str) -> R<(Vec<i64>, Span)> {
        match a.kw(alias) {
            Some((v, sp)) => Ok((self.dims_of(v, sp)?, sp)),
            None => self.shape_arg(a, name),
        }
    }

    fn shape_arg(&mut self, a: &mut Args, name: &str) -> R<(Vec<i64>, Span)> {
        let (v, sp) = a.req(self, name)?;
        Ok((self.dims_of(v, sp)?, sp))
    }

    /// A tuple or list of positive ints (an int is a 1-D shape).
    pub(crate) fn dims_of(&mut self, v: Val, sp: Span) -> R<Vec<i64>> {
        match v {
            Val::Tuple(xs) | Val::List(xs) => xs.into_iter().map(|x| self.positive_int(x, sp)).collect(),
            Val::Int(_) | Val::Expr(_) => Ok(vec![self.positive_int(v, sp)?]),
            other => self.expected_kind("a shape (a tuple of positive ints)", &other, sp),
        }
    }

    /// A tuple or list of non-negative ints (separators, permutations).
    fn index_list(&mut self, a: &mut Args, name: &str) -> R<(Vec<usize>, Span)> {
        let (v, sp) = a.req(self, name)?;
        let Some(items) = v.items() else { return self.expected_kind("a list of ints", &v, sp) };
        let mut out = Vec::with_capacity(items.len());
        for x in items.iter().cloned() {
            let i = self.const_int(x, sp)?;
            match usize::try_from(i) {
                Ok(u) => out.push(u),
                Err(_) => {
                    return self.fail(
                        Diagnostic::error(sp, format!("`{name}` holds {i}; indices are >= 0"))
                            .with_label("negative index")
                            .with_help("count groups and dimensions from 0"),
                    )
                }
            }
        }
        Ok((out, sp))
    }

    /// `[(begin, end), ...]` (tuples, lists or `slice(begin, end)`) → `(begin, extent)`.
    fn region_of(&mut self, v: Val, sp: Span) -> R<Vec<(i64, i64)>> {
        let Some(items) = v.items() else { return self.expected_kind("a list of (begin, end) pairs", &v, sp) };
        let mut out = Vec::with_capacity(items.len());
        for x in items.iter().cloned() {
            let (b, e) = match x {
                Val::Slice(Some(b), Some(e)) => (*b, *e),
                Val::Tuple(p) | Val::List(p) if p.len() == 2 => (p[0].clone(), p[1].clone()),
                other => return self.expected_kind("a (begin, end) pair", &other, sp),
            };
            let (b, e) = (self.const_int(b, sp)?, self.const_int(e, sp)?);
            match e.checked_sub(b) {
                Some(n) => out.push((b, n)),
                None => return self.overflow(sp),
            }
        }
        Ok(out)
    }

    /// `TileLayout(S[...])`, a bare `S[...]` spec or a TileLayout value.
    fn tile_layout_value(&mut self, v: Val, sp: Span) -> R<TileLayout> {
        match v {
            Val::Layout(Layout::Tile(t)) => Ok(t),
            Val::Spec(s) => Ok(s.into_tile()),
            other => self.expected_kind("a TileLayout", &other, sp),
        }
    }

    /// The TileLayout a TileLayout-only method works on.
    fn tile_of(&mut self, l: &Layout, m: LayoutMethod, span: Span) -> R<TileLayout> {
        match l {
            Layout::Tile(t) => Ok(t.clone()),
            Layout::Compose(_) => self.fail(
                Diagnostic::error(span, format!("`{}` is a TileLayout method; this is a ComposeLayout", m.name()))
                    .with_label("a swizzled layout")
                    .with_help(format!("apply it to the tile: `L.tile_layout.{}(...)`", m.name())),
            ),
        }
    }

    fn iter_list(&mut self, a: &mut Args, name: &str) -> R<(Vec<Iter>, Span)> {
        let Some((v, sp)) = a.opt(self, name)? else { return Ok((vec![], a.span)) };
        let Some(items) = v.items() else { return self.expected_kind("a list of `Iter(...)`", &v, sp) };
        let mut out = Vec::with_capacity(items.len());
        for x in items {
            match x {
                Val::Iter(it) => out.push(*it),
                other => return self.expected_kind("an `Iter(extent, stride, axis)`", other, sp),
            }
        }
        Ok((out, sp))
    }

    /// An axis object or an axis name.
    fn axis_value(&mut self, v: Val, sp: Span) -> R<Axis> {
        match v {
            Val::Axis(a) => Ok(a),
            Val::Str(s) => self.axis_named(&s, sp),
            other => self.expected_kind("an axis (`laneid`, `\"m\"`)", &other, sp),
        }
    }

    fn swizzle_mode(&mut self, v: Val, sp: Span) -> R<SwizzleMode> {
        let i = self.const_int(v, sp)?;
        match SwizzleMode::from_index(i) {
            Ok(m) => Ok(m),
            Err(_) => self.fail(
                Diagnostic::error(sp, format!("swizzle mode {i} does not exist"))
                    .with_label("not a swizzle mode")
                    .with_help("use 0 (none), 1 (32B), 2 (64B) or 3 (128B), or `SwizzleMode.SWIZZLE_128B_ATOM`"),
            ),
        }
    }

    // ------------------------------------------------------------------ errors

    /// `r`, or its error as a diagnostic on the argument at fault.
    fn layout_result<T>(&mut self, r: Result<T, LayoutError>, blame: &Blame) -> R<T> {
        let e = match r {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let at = match &e {
            LayoutError::BadArgument { arg, .. } => blame.span_of(arg),
            LayoutError::ShapeMismatch { .. } | LayoutError::RankMismatch { .. } | LayoutError::BadShape { .. } => {
                blame.shape.and_then(|s| blame.span_of(s))
            }
            LayoutError::RegionOutOfRange { .. } | LayoutError::SliceInexpressible { .. } => blame.span_of("region"),
            LayoutError::BadPermutation { .. } => blame.span_of("perm"),
            LayoutError::BadSeparators { .. } => blame.span_of("seps"),
            _ => None,
        };
        // A `BadArgument` names its operation already.
        let message = match &e {
            LayoutError::BadArgument { .. } => e.to_string(),
            _ => format!("{}: {e}", blame.op),
        };
        let mut d = match at {
            Some(sp) => {
                Diagnostic::error(sp, message).with_label("this argument").with_secondary(blame.call, "in this call")
            }
            None => Diagnostic::error(blame.call, message).with_label("in this call"),
        };
        d = d.with_help(help_for(&e));
        self.fail(d)
    }
}

fn blame<'a>(m: LayoutMethod, call: Span, args: Vec<(&'a str, Span)>, shape: Option<&'a str>) -> Blame<'a> {
    Blame { op: format!("{}()", m.name()), call, args, shape }
}

fn int_list(xs: &[impl Copy + TryInto<i64>]) -> Val {
    Val::List(xs.iter().map(|&x| Val::Int(x.try_into().unwrap_or(i64::MAX))).collect())
}

fn key_text(k: &Val) -> String {
    match k {
        Val::Str(s) => format!("\"{s}\""),
        Val::Int(i) => i.to_string(),
        Val::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        Val::Axis(a) => a.name().to_string(),
        other => other.kind_name().to_string(),
    }
}

/// The fix for each kind of layout error.
fn help_for(e: &LayoutError) -> String {
    use LayoutError::*;
    match e {
        BadArgument { op: "tile_to", .. } => "make every dimension of `shape` a multiple of `atom_shape`'s".into(),
        BadArgument { op: "mma_shared_layout", arg: "shape", .. } => {
            "use a tile whose last two dimensions are whole multiples of `mma_atom_shape(dtype, mode)`".into()
        }
        BadArgument { arg: "dtype", .. } => "use a dtype of 8, 16 or 32 bits (e.g. \"float16\")".into(),
        BadArgument { op: "group_many", .. } => {
            "give shapes of the layout's size whose cumulative products divide each other".into()
        }
        BadArgument { .. } => "use one of the values the message lists".into(),
        ShapeMismatch { .. } => "the shape must hold as many elements as the layout (`L.size()`) and cut its iters \
                                 where they split evenly (`L.group(shape)` shows how)"
            .into(),
        RankMismatch { .. } | TileRank { .. } => "give one entry per dimension".into(),
        BadShape { .. } => "every dimension must be a positive int".into(),
        BadPermutation { .. } => "list every group (or iter) index exactly once".into(),
        BadSeparators { .. } => "pass the separators `group` returned: `g, seps = L.group(shape)`".into(),
        RegionOutOfRange { .. } => "each region entry is `(begin, end)` with 0 <= begin < end <= the dimension".into(),
        SliceInexpressible { .. } => "split the region where it crosses the boundary into two slices".into(),
        CoordOutOfRange { .. } => "give a coordinate inside the shape".into(),
        ScopeConflict { .. } | ScopeChainBroken { .. } | ScopeCycle { .. } | GridMixedWithThreads { .. } => {
            "use thread axes of one scope chain (e.g. `laneid` with `warpid`)".into()
        }
        BadExtent { .. } => "extents must be positive".into(),
        TooLarge { .. } | TooManyReplicas { .. } => "use smaller extents and strides".into(),
        BadSwizzle { .. } => "check the ComposeLayout parameters".into(),
    }
}

/// Evaluates one layout expression on its own (`tirx layout EXPR`): the layout
/// builders, helpers, methods and axes are in scope as if imported.
pub(crate) fn eval_layout(text: &str) -> Result<Layout, Vec<Diagnostic>> {
    let mut diags = vec![];
    let tokens = crate::lexer::lex(text, &mut diags);
    let stmts = crate::parser::parse(tokens, &mut diags);
    if !diags.is_empty() {
        return Err(diags);
    }
    let whole = Span::new(0, text.len());
    let expr = match stmts.as_slice() {
        [ast::Stmt { kind: ast::StmtKind::Expr(e), .. }] => e,
        _ => {
            return Err(vec![Diagnostic::error(whole, "expected one layout expression")
                .with_help("e.g. `S[(8, 64)].tile_to((16, 128), (8, 64))`")])
        }
    };
    let mut b = Builder::new(text);
    for name in script_names(Namespace::Layout) {
        if let Some(v) = layout_import(name) {
            b.define(name, v);
        }
    }
    b.define("T", Val::Builtin(Builtin::T));
    let v = b.eval(expr);
    let r = match v {
        Ok(Val::Layout(l)) => Ok(l),
        Ok(Val::Spec(s)) => Ok(Layout::Tile(s.into_tile())),
        // At the end of the expression: what it evaluated to is the last thing read.
        Ok(other) => b.fail(
            Diagnostic::error(
                Span::new(expr.span.hi as usize, expr.span.hi as usize),
                format!("expected a layout, found {}", other.kind_name()),
            )
            .with_label("the expression ends here")
            .with_help("end the expression with a layout, e.g. `L.tile_to(...)` rather than `L.size()`"),
        ),
        Err(()) => Err(()),
    };
    r.map_err(|()| std::mem::take(&mut b.diags))
}
