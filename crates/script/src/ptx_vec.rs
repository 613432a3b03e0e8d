//! The reference's raw vector loads and stores, `T.ptx.st.shared.v4.f32(ptr, a, b, c, d)`
//! and `T.ptx.ld.shared.v4.f32(a, b, c, d, ptr)`: one PTX `st`/`ld` of `n` elements at
//! `ptr` (`buf.ptr_to([i, ...])`, the vector running along the last dim). They are the
//! forced-width copies of docs/tile-primitives.md §3.16 through a register array named
//! after the instruction (`st_regs`): the values are stored into it and one
//! `Tx.thread.copy(..., dispatch="vec_<bits>b")` moves it (a load the other way round,
//! then each element assigned to its target), so alignment and contiguity are proved by
//! that variant and the CUDA is its single `st.shared.v4.u32` / `ld...` (any element type
//! moves as bits; the type names only the element size).

use crate::ast;
use crate::builder::{Builder, R};
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::{DType, Diagnostic, Span};
use tirx_layout::ExecScope;

/// A parsed `ld`/`st` path.
pub(crate) struct VecPath {
    load: bool,
    shared: bool,
    nc: bool,
    lanes: i64,
    elem_bytes: u32,
}

/// The element size of a PTX type suffix.
fn type_bytes(t: &str) -> Option<u32> {
    Some(match t {
        "b8" | "u8" | "s8" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        _ => return None,
    })
}

/// `ld.<space>[.nc][.v2|.v4|.v8].<type>` / `st.<space>[.vN].<type>`; `None` when the path
/// is not an `ld`/`st`, `Err` with what is wrong when it is one tirx cannot parse.
pub(crate) fn parse_vec_path(path: &str) -> Option<Result<VecPath, String>> {
    let parts: Vec<&str> = path.split('.').collect();
    let load = match parts[0] {
        "ld" => true,
        "st" => false,
        _ => return None,
    };
    let (ty, quals) = parts[1..].split_last()?;
    let Some(elem_bytes) = type_bytes(ty) else {
        return Some(Err(format!("`{ty}` is not a PTX type (b32, u32, s32, f32, f16, f64, ...)")));
    };
    let mut p = VecPath { load, shared: false, nc: false, lanes: 1, elem_bytes };
    let mut space = None;
    for q in quals {
        match *q {
            "global" | "shared" | "shared__cta" | "shared::cta" if space.is_none() => {
                space = Some(*q);
                p.shared = q.starts_with("shared");
            }
            "nc" if load && space == Some("global") => p.nc = true,
            "v2" | "v4" | "v8" => p.lanes = q[1..].parse().unwrap_or(1),
            other => return Some(Err(format!("`.{other}` is not a qualifier tirx knows here"))),
        }
    }
    if space.is_none() {
        return Some(Err("name the state space: `.global` or `.shared`".into()));
    }
    Some(Ok(p))
}

impl Builder<'_> {
    /// `T.ptx.st...(ptr, values...)` / `T.ptx.ld...(targets..., ptr)` as statements.
    pub(crate) fn ptx_vec_stmt(
        &mut self,
        path: &str,
        p: VecPath,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let fname = format!("T.ptx.{path}");
        self.no_target(target, &format!("`{fname}`"))?;
        let n = p.lanes as usize;
        let positional = args.iter().all(|a| a.name.is_none() && !a.star);
        if args.len() != n + 1 || !positional {
            let (first, last) = if p.load { ("the targets", "the address") } else { ("the address", "the values") };
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("`{fname}` takes {} positional arguments: {first}, then {last}", n + 1),
                )
                .with_label(format!("{} given", args.len()))
                .with_help(if p.load {
                    format!("`{fname}({}, smem.ptr_to([0]))`", vec!["out[k]"; n].join(", "))
                } else {
                    format!("`{fname}(smem.ptr_to([0]), {})`", vec!["reg[k]"; n].join(", "))
                }),
            );
        }
        let ptr_arg = if p.load { &args[n] } else { &args[0] };
        let (mem, index) = match self.eval(&ptr_arg.value)? {
            Val::Ptr(b, i) => (b, i),
            other => return self.expected_kind("an address like `smem.ptr_to([0])`", &other, ptr_arg.value.span),
        };
        let mb = self.buffer(mem).clone();
        let scope_ok = if p.shared { mb.scope.is_shared() } else { mb.scope == MemScope::Global };
        let bytes = mb.dtype.bytes();
        if !scope_ok || bytes != p.elem_bytes {
            let want = if p.shared { "shared" } else { "global" };
            return self.fail(
                Diagnostic::error(
                    ptr_arg.value.span,
                    format!(
                        "`{fname}` moves {}-byte elements of {want} memory, but `{}` is {} {}",
                        p.elem_bytes,
                        mb.name,
                        mb.scope.name(),
                        mb.dtype
                    ),
                )
                .with_label("this address")
                .with_help(
                    "name the buffer's state space and a type of its element size (float32: `.f32`, `.u32` or `.b32`)",
                ),
            );
        }
        self.require_device(span)?;
        let regs = self.add_buffer(Buffer {
            name: if p.load { "ld_regs" } else { "st_regs" }.into(),
            shape: vec![n as i64],
            dtype: mb.dtype,
            scope: MemScope::Local,
            layout: tirx_layout::Layout::Tile(tirx_layout::TileLayout::row_major(&[n as i64])),
            origin: BufferOrigin::Alloc,
            span,
            dyn_outer: None,
            dyn_strides: None,
        });
        out.push(Stmt { kind: StmtKind::Alloc(regs), span });
        let int = |v: i64| Expr { kind: ExprKind::Int(v), dtype: DType::I32, span };
        if !p.load {
            for (k, a) in args[1..].iter().enumerate() {
                let v = self.eval(&a.value)?;
                self.store_elem(regs, vec![int(k as i64)], v, a.value.span, a.value.span, span, out)?;
            }
        }
        // The memory side: `n` elements from the address along the last dim.
        let Some((last, lead)) = index.split_last() else {
            return self.expected_kind("an address like `smem.ptr_to([0])`", &Val::Buffer(mem), ptr_arg.value.span);
        };
        if let ExprKind::Int(c) = last.kind {
            if c % n as i64 != 0 {
                return self.fail(
                    Diagnostic::error(
                        ptr_arg.value.span,
                        format!("`{fname}` at element {c} of the last dim: a {}-byte access starts at a multiple of {n} elements", n as u32 * bytes),
                    )
                    .with_label("not aligned to the vector")
                    .with_help(format!("start the vector at a multiple of {n}, or use fewer lanes")),
                );
            }
        }
        let end = Expr {
            kind: ExprKind::Binary(
                BinOp::Add,
                Box::new(last.clone()),
                Box::new(Expr { dtype: last.dtype, ..int(n as i64) }),
            ),
            dtype: last.dtype,
            span,
        };
        let mut indices: Vec<(Index, Span)> = lead.iter().map(|e| (Index::Point(Val::Expr(e.clone())), span)).collect();
        indices
            .push((Index::Slice(Some(Box::new(Val::Expr(last.clone()))), Some(Box::new(Val::Expr(end))), span), span));
        let mem_region = Val::Sub(Sub { buf: mem, indices, span: ptr_arg.value.span });
        let (dst, src) = if p.load { (Val::Buffer(regs), mem_region) } else { (mem_region, Val::Buffer(regs)) };
        let bits = n as u32 * bytes * 8;
        let mut kw = vec![("dispatch".to_string(), span, Val::Str(format!("vec_{bits}b")), span)];
        if p.nc {
            kw.push(("cache".to_string(), span, Val::Str("nc".into()), span));
        }
        let call = self.tile_call_of(ExecScope::Thread, TileOp::Copy, vec![(dst, span), (src, span)], kw, span)?;
        out.push(Stmt { kind: StmtKind::Tile(call), span });
        if p.load {
            for (k, a) in args[..n].iter().enumerate() {
                let v = Val::Expr(self.load(Sub {
                    buf: regs,
                    indices: vec![(Index::Point(Val::Int(k as i64)), span)],
                    span,
                })?);
                self.store(&a.value, v, span, span, out)?;
            }
        }
        Ok(())
    }
}
