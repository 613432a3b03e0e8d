//! `T.ptx.*`: the PTX instructions a kernel issues itself (docs/tile-primitives.md
//! §8), spelled as the reference spells them — a chain of names ending in a
//! call, with the instruction's modifiers as optional suffixes:
//!
//! | script | statement |
//! |---|---|
//! | `T.ptx.wgmma.fence[.sync.aligned]()` | [`PtxStmt::WgmmaFence`] |
//! | `T.ptx.wgmma.commit_group[.sync.aligned]()` | [`PtxStmt::WgmmaCommit`] |
//! | `T.ptx.wgmma.wait_group[.sync.aligned](n)` | [`PtxStmt::WgmmaWait`] |
//! | `T.ptx.setmaxnreg.inc[.sync.aligned.u32](n)`, `.dec` | [`PtxStmt::SetMaxNReg`] |
//! | `T.ptx.bar.sync(id, threads)`, `T.ptx.bar.arrive(id, threads)` | [`PtxStmt::BarSync`], [`PtxStmt::BarArrive`] |
//! | `T.ptx.fence.proxy.async_[.shared__cta]()` | [`PtxStmt::FenceProxyAsync`] |
//!
//! Counts are compile-time integers (PTX takes them as immediates); a barrier id
//! is any int32 value. Lowering checks what depends on the kernel (whole
//! warpgroups, the target, barrier ids).

use crate::ast;
use crate::build::{Builder, R};
use crate::eval::Args;
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::{Diagnostic, Span};

/// A namespace on the way to a `T.ptx` instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxNs {
    Root,
    Wgmma,
    Setmaxnreg,
    Bar,
    Fence,
    FenceProxy,
}

/// A `T.ptx` instruction a script calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxKind {
    WgmmaFence,
    WgmmaCommit,
    WgmmaWait,
    SetMaxNReg(bool),
    BarSync,
    BarArrive,
    FenceProxyAsync,
}

impl PtxNs {
    /// `T.ptx.wgmma`.
    pub fn path(self) -> &'static str {
        match self {
            PtxNs::Root => "T.ptx",
            PtxNs::Wgmma => "T.ptx.wgmma",
            PtxNs::Setmaxnreg => "T.ptx.setmaxnreg",
            PtxNs::Bar => "T.ptx.bar",
            PtxNs::Fence => "T.ptx.fence",
            PtxNs::FenceProxy => "T.ptx.fence.proxy",
        }
    }

    /// The names this namespace has.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            PtxNs::Root => &["wgmma", "setmaxnreg", "bar", "fence"],
            PtxNs::Wgmma => &["fence", "commit_group", "wait_group"],
            PtxNs::Setmaxnreg => &["inc", "dec"],
            PtxNs::Bar => &["sync", "arrive"],
            PtxNs::Fence => &["proxy"],
            PtxNs::FenceProxy => &["async_"],
        }
    }

    /// `ns.name`: a deeper namespace or an instruction.
    pub fn attr(self, name: &str) -> Option<Builtin> {
        let ns = |n| Some(Builtin::TPtx(n));
        let ins = |k| Some(Builtin::Ptx(k));
        match (self, name) {
            (PtxNs::Root, "wgmma") => ns(PtxNs::Wgmma),
            (PtxNs::Root, "setmaxnreg") => ns(PtxNs::Setmaxnreg),
            (PtxNs::Root, "bar") => ns(PtxNs::Bar),
            (PtxNs::Root, "fence") => ns(PtxNs::Fence),
            (PtxNs::Fence, "proxy") => ns(PtxNs::FenceProxy),
            (PtxNs::FenceProxy, "async_" | "async") => ins(PtxKind::FenceProxyAsync),
            (PtxNs::Wgmma, "fence") => ins(PtxKind::WgmmaFence),
            (PtxNs::Wgmma, "commit_group") => ins(PtxKind::WgmmaCommit),
            (PtxNs::Wgmma, "wait_group") => ins(PtxKind::WgmmaWait),
            (PtxNs::Setmaxnreg, "inc") => ins(PtxKind::SetMaxNReg(true)),
            (PtxNs::Setmaxnreg, "dec") => ins(PtxKind::SetMaxNReg(false)),
            (PtxNs::Bar, "sync") => ins(PtxKind::BarSync),
            (PtxNs::Bar, "arrive") => ins(PtxKind::BarArrive),
            _ => None,
        }
    }
}

impl PtxKind {
    /// The script spelling without modifiers.
    pub fn path(self) -> &'static str {
        match self {
            PtxKind::WgmmaFence => "T.ptx.wgmma.fence",
            PtxKind::WgmmaCommit => "T.ptx.wgmma.commit_group",
            PtxKind::WgmmaWait => "T.ptx.wgmma.wait_group",
            PtxKind::SetMaxNReg(true) => "T.ptx.setmaxnreg.inc",
            PtxKind::SetMaxNReg(false) => "T.ptx.setmaxnreg.dec",
            PtxKind::BarSync => "T.ptx.bar.sync",
            PtxKind::BarArrive => "T.ptx.bar.arrive",
            PtxKind::FenceProxyAsync => "T.ptx.fence.proxy.async_",
        }
    }

    /// The PTX modifiers the instruction may be spelled with (`.sync.aligned`).
    pub fn modifiers(self) -> &'static [&'static str] {
        match self {
            PtxKind::WgmmaFence | PtxKind::WgmmaCommit | PtxKind::WgmmaWait => &["sync", "aligned"],
            PtxKind::SetMaxNReg(_) => &["sync", "aligned", "u32"],
            PtxKind::BarSync | PtxKind::BarArrive => &["aligned"],
            PtxKind::FenceProxyAsync => &["shared__cta"],
        }
    }
}

impl Builder<'_> {
    /// A `T.ptx` instruction as a statement.
    pub(crate) fn ptx_stmt(
        &mut self,
        kind: PtxKind,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        self.no_target(target, kind.path())?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(kind.path().into(), pos, kw, span);
        let stmt = match kind {
            PtxKind::WgmmaFence => PtxStmt::WgmmaFence,
            PtxKind::WgmmaCommit => PtxStmt::WgmmaCommit,
            PtxKind::FenceProxyAsync => PtxStmt::FenceProxyAsync,
            PtxKind::WgmmaWait => PtxStmt::WgmmaWait(self.count(&mut a, "n", 0, 1 << 16, kind)?),
            PtxKind::SetMaxNReg(inc) => {
                PtxStmt::SetMaxNReg { inc, regs: self.count(&mut a, "regs", 0, 1 << 16, kind)? }
            }
            PtxKind::BarSync | PtxKind::BarArrive => {
                let (v, vs) = a.req(self, "id")?;
                let id = self.int_expr(v, vs)?;
                let threads = self.count(&mut a, "threads", 1, 1 << 16, kind)?;
                if kind == PtxKind::BarSync {
                    PtxStmt::BarSync { id, threads }
                } else {
                    PtxStmt::BarArrive { id, threads }
                }
            }
        };
        a.finish(self)?;
        self.require_device(span)?;
        out.push(Stmt { kind: StmtKind::Ptx(stmt), span });
        Ok(())
    }

    /// A compile-time count argument in `lo..hi` (an immediate of the instruction).
    fn count(&mut self, a: &mut Args, name: &str, lo: i64, hi: i64, kind: PtxKind) -> R<u32> {
        let (v, vs) = a.req(self, name)?;
        let n = self.const_int(v, vs)?;
        if !(lo..hi).contains(&n) {
            return self.fail(
                Diagnostic::error(vs, format!("`{name}` of `{}` is {n}, outside {lo}..{hi}", kind.path()))
                    .with_label("out of range"),
            );
        }
        Ok(n as u32)
    }
}
