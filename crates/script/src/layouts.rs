//! Layout expressions as Python values (docs/layout-model.md §1.5): `S[extents :
//! strides]`, `R[...]` replicas, `k @ axis` strides, `+ k@axis` / `+ k`
//! offsets, `TileLayout(spec)`, `ComposeLayout(p, sw, at, tile)`. Unlike the
//! reference, an extent/stride count mismatch, a second `S[...]` or `R[...]`
//! and unknown axis names are errors.

use crate::ast::{self, ExprKind as AK};
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::value::*;
use std::collections::BTreeMap;
use tirx_ir::{Diagnostic, Span};
use tirx_layout::{Axis, ComposeLayout, Iter, Layout, Swizzle, TileLayout};

impl Builder<'_> {
    /// `S[shape]`, `S[shape : strides]`, `R[...]`.
    pub(crate) fn layout_spec(&mut self, idx: &ast::Expr, shard: bool) -> R<Val> {
        let (shape, strides) = match &idx.kind {
            AK::Slice(Some(lo), Some(hi), None) => {
                let s = self.eval(lo)?;
                let (t, spans) = self.eval_elementwise(hi)?;
                ((s, lo.span), Some((t, hi.span, spans)))
            }
            AK::Slice(..) => {
                return self.fail(
                    Diagnostic::error(idx.span, "a layout spec is `S[extents]` or `S[extents : strides]`")
                        .with_help("for example `S[(32, 8):(1@laneid, 1)]`"),
                )
            }
            _ => ((self.eval(idx)?, idx.span), None),
        };
        let extents = self.layout_extents(shape.0, shape.1)?;
        let iters = match strides {
            None => TileLayout::row_major(&extents).shard,
            Some((sv, ss, spans)) => {
                let strides = self.layout_strides(sv, ss, spans, extents.len())?;
                if strides.len() != extents.len() {
                    let (ne, ns) = (extents.len(), strides.len());
                    return self.fail(
                        Diagnostic::error(ss, format!("layout has {ne} extents but {ns} strides"))
                            .with_label(format!("{ns} strides"))
                            .with_secondary(shape.1, format!("{ne} extents"))
                            .with_help("give exactly one stride per extent"),
                    );
                }
                extents.iter().zip(strides).map(|(&e, (s, a))| Iter::new(e, s, a)).collect()
            }
        };
        Ok(Val::Spec(if shard {
            Spec { shard: Some(iters), replica: None, offset: BTreeMap::new() }
        } else {
            Spec { shard: None, replica: Some(iters), offset: BTreeMap::new() }
        }))
    }

    /// A tuple literal evaluated item by item, with each item's span (for
    /// messages that point at one stride).
    pub(crate) fn eval_elementwise(&mut self, e: &ast::Expr) -> R<(Val, Vec<Span>)> {
        let AK::Tuple(items) = &e.kind else { return Ok((self.eval(e)?, vec![])) };
        let mut out = vec![];
        for it in items {
            out.push(self.eval(it)?);
        }
        Ok((Val::Tuple(out), items.iter().map(|i| i.span).collect()))
    }

    /// Extents of `S[...]`; `S[()]` is the empty (scalar) shard.
    pub(crate) fn layout_extents(&mut self, v: Val, sp: Span) -> R<Vec<i64>> {
        let items = match v {
            Val::Tuple(xs) | Val::List(xs) => xs,
            other => vec![other],
        };
        items.into_iter().map(|x| self.positive_int(x, sp)).collect()
    }

    pub(crate) fn layout_strides(&mut self, v: Val, sp: Span, spans: Vec<Span>, n: usize) -> R<Vec<(i64, Axis)>> {
        let items = match v {
            // `(v, "axis")` is one stride when the layout has one extent.
            Val::Tuple(xs) if n == 1 && xs.len() == 2 && matches!(xs[1], Val::Str(_)) => vec![Val::Tuple(xs)],
            Val::Tuple(xs) | Val::List(xs) => xs,
            other => vec![other],
        };
        let spans: Vec<Span> = if spans.len() == items.len() { spans } else { vec![sp; items.len()] };
        items.into_iter().zip(spans).map(|(x, s)| self.stride(x, s)).collect()
    }

    pub(crate) fn stride(&mut self, v: Val, sp: Span) -> R<(i64, Axis)> {
        match v {
            Val::Int(s) => Ok((s, Axis::M)),
            Val::AxisStride(s, a) => Ok((s, a)),
            Val::Axis(a) => Ok((1, a)),
            Val::Str(name) => Ok((1, self.axis_named(&name, sp)?)),
            Val::Tuple(xs) if xs.len() == 2 => {
                let s = self.const_int(xs[0].clone(), sp)?;
                match &xs[1] {
                    Val::Str(name) => Ok((s, self.axis_named(name, sp)?)),
                    Val::Axis(a) => Ok((s, *a)),
                    other => self.expected_kind("an axis name", other, sp),
                }
            }
            other => self.expected_kind("a stride (`k`, `k @ axis`)", &other, sp),
        }
    }

    pub(crate) fn axis_named(&mut self, name: &str, sp: Span) -> R<Axis> {
        match Axis::from_name(name) {
            Some(a) => Ok(a),
            None => {
                let names: Vec<&str> = Axis::ALL.iter().map(|a| a.name()).collect();
                let d = Diagnostic::error(sp, format!("unknown axis `{name}`")).with_label("not an axis");
                self.fail(did_you_mean(d, name, &names, "axes", false))
            }
        }
    }

    pub(crate) fn spec_add(&mut self, lv: Val, rv: Val, span: Span) -> R<Val> {
        let mut s = match lv {
            Val::Spec(s) => s,
            other => return self.expected_kind("a layout spec on the left of `+`", &other, span),
        };
        let add_off = |s: &mut Spec, a: Axis, k: i64| -> bool {
            let e = s.offset.entry(a).or_insert(0);
            match e.checked_add(k) {
                Some(v) => {
                    *e = v;
                    true
                }
                None => false,
            }
        };
        match rv {
            Val::Spec(o) => {
                if s.shard.is_some() && o.shard.is_some() {
                    return self.fail(
                        Diagnostic::error(span, "a layout has one shard spec `S[...]`; this adds a second")
                            .with_help("combine as `S[...] + R[...] + k@axis`"),
                    );
                }
                if s.replica.is_some() && o.replica.is_some() {
                    return self
                        .fail(Diagnostic::error(span, "a layout has one replica spec `R[...]`; this adds a second"));
                }
                s.shard = s.shard.or(o.shard);
                s.replica = s.replica.or(o.replica);
                for (a, k) in o.offset {
                    if !add_off(&mut s, a, k) {
                        return self.overflow(span);
                    }
                }
            }
            Val::AxisStride(k, a) => {
                if !add_off(&mut s, a, k) {
                    return self.overflow(span);
                }
            }
            Val::Int(k) => {
                if !add_off(&mut s, Axis::M, k) {
                    return self.overflow(span);
                }
            }
            other => return self.expected_kind("`R[...]`, `k @ axis` or an int offset", &other, span),
        }
        Ok(Val::Spec(s))
    }

    pub(crate) fn compose_layout(&mut self, a: &mut Args) -> R<Val> {
        let mut p = [0u32; 3];
        for (i, name) in ["per_element", "swizzle_len", "atom_len"].iter().enumerate() {
            let (v, sp) = a.req(self, name)?;
            let x = self.const_int(v, sp)?;
            if !(0..=16).contains(&x) {
                return self.fail(
                    Diagnostic::error(sp, format!("ComposeLayout `{name}` must be in 0..=16, found {x}"))
                        .with_help("typical swizzles are ComposeLayout(3, 3, 3, tile) for 128B fp16"),
                );
            }
            p[i] = x as u32;
        }
        let (t, ts) = a.req(self, "tile")?;
        let tile = match t {
            Val::Spec(s) => s.into_tile(),
            Val::Layout(Layout::Tile(t)) => t,
            other => return self.expected_kind("a TileLayout", &other, ts),
        };
        let inner = match a.opt(self, "swizzle_inner")? {
            None => true,
            Some((Val::Bool(b), _)) => b,
            Some((other, sp)) => return self.expected_kind("True or False", &other, sp),
        };
        if p[2] < p[1] {
            let sp = a.span;
            return self.fail(
                Diagnostic::error(sp, format!("ComposeLayout needs atom_len >= swizzle_len (got {} < {})", p[2], p[1]))
                    .with_help("swap the arguments: ComposeLayout(per_element, swizzle_len, atom_len, tile)"),
            );
        }
        let swizzle = match Swizzle::new(p[0], p[1], p[2], inner) {
            Ok(s) => s,
            Err(e) => return self.fail(Diagnostic::error(a.span, format!("invalid layout: {e}"))),
        };
        Ok(Val::Layout(Layout::Compose(ComposeLayout { swizzle, tile })))
    }
}
