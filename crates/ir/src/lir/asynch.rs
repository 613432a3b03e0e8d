//! The **asynchronous** family: copies that complete later than they are issued,
//! and the objects that say when they have: `cp.async` global → shared with
//! commit / wait groups (sm_80), mbarriers (sm_80; `expect_tx` sm_90) and the
//! async-proxy fence (sm_90). TMA bulk copies complete mbarrier transactions and
//! belong here later. See `docs/lir.md`.
//!
//! Typing: `cp.async` moves 4, 8 or 16 bytes of one dtype from a global to a
//! shared buffer, both indices naturally aligned; its optional source size is an
//! int32 byte count (0..=bytes, whole elements when constant; the rest is
//! zero-filled). An mbarrier is one element of a shared `int64` buffer (the
//! 64-bit barrier word; tirx has no `uint64` and the word is opaque) that only
//! mbarrier instructions touch ([`Checker::mbarriers_exclusive`]); counts, tx
//! bytes and parities are int32, constant ones in range.

use super::check::{Check, Checker};
use super::print::Printer;
use super::{LBufId, LExpr, LKernel, LStmt, LStmtKind, Space};
use crate::dtype::DType;
use crate::target::Arch;
use serde::Serialize;

/// The largest mbarrier arrival count and tx-count (2^20 - 1).
pub const MBAR_MAX_COUNT: i64 = (1 << 20) - 1;

/// An mbarrier: element `index` of a shared `int64` buffer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mbar {
    pub buf: LBufId,
    pub index: LExpr,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum AsyncOp {
    /// `cp.async.{ca,cg}.shared.global [dst], [src], bytes{, src_bytes}`: `bytes`
    /// from `src[src_index..]` to `dst[dst_index..]`, landing when the thread's
    /// group that contains it is waited for. `src_bytes` (0..=bytes) are read and
    /// the rest of the destination is zero-filled.
    CpAsync { dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, bytes: u32, src_bytes: Option<LExpr> },
    /// `cp.async.commit_group`: closes this thread's open group of copies.
    CommitGroup,
    /// `cp.async.wait_group n`: waits until at most `n` of this thread's committed groups are pending.
    WaitGroup(u32),
    /// `mbarrier.init`: a new barrier expecting `count` arrivals per phase.
    MbarInit { bar: Mbar, count: LExpr },
    /// `mbarrier.arrive`: one arrival on the current phase.
    MbarArrive { bar: Mbar },
    /// `mbarrier.arrive.expect_tx`: adds `bytes` of pending transactions to the phase, then arrives.
    MbarArriveExpectTx { bar: Mbar, bytes: LExpr },
    /// Blocks until the phase of parity `parity` (0 or 1) has completed (`try_wait.parity` loop).
    MbarWait { bar: Mbar, parity: LExpr },
    /// `fence.proxy.async.shared::cta`: orders this thread's generic-proxy shared
    /// accesses with later async-proxy ones (TMA).
    FenceProxyAsync,
}

impl AsyncOp {
    /// The PTX instruction name.
    pub fn name(&self) -> &'static str {
        match self {
            AsyncOp::CpAsync { bytes: 16, .. } => "cp.async.cg",
            AsyncOp::CpAsync { .. } => "cp.async.ca",
            AsyncOp::CommitGroup => "cp.async.commit_group",
            AsyncOp::WaitGroup(_) => "cp.async.wait_group",
            AsyncOp::MbarInit { .. } => "mbarrier.init",
            AsyncOp::MbarArrive { .. } => "mbarrier.arrive",
            AsyncOp::MbarArriveExpectTx { .. } => "mbarrier.arrive.expect_tx",
            AsyncOp::MbarWait { .. } => "mbarrier.try_wait.parity",
            AsyncOp::FenceProxyAsync => "fence.proxy.async.shared::cta",
        }
    }

    pub fn min_arch(&self) -> Arch {
        match self {
            AsyncOp::CpAsync { .. }
            | AsyncOp::CommitGroup
            | AsyncOp::WaitGroup(_)
            | AsyncOp::MbarInit { .. }
            | AsyncOp::MbarArrive { .. }
            // The CUDA spins on test_wait below sm_90, on try_wait from sm_90 on.
            | AsyncOp::MbarWait { .. } => Arch::SM_80,
            AsyncOp::MbarArriveExpectTx { .. } | AsyncOp::FenceProxyAsync => Arch::SM_90,
        }
    }

    /// The mbarrier the instruction uses, if any.
    pub fn mbar(&self) -> Option<&Mbar> {
        match self {
            AsyncOp::MbarInit { bar, .. }
            | AsyncOp::MbarArrive { bar }
            | AsyncOp::MbarArriveExpectTx { bar, .. }
            | AsyncOp::MbarWait { bar, .. } => Some(bar),
            AsyncOp::CpAsync { .. } | AsyncOp::CommitGroup | AsyncOp::WaitGroup(_) | AsyncOp::FenceProxyAsync => None,
        }
    }

    pub fn operands(&self) -> Vec<&LExpr> {
        match self {
            AsyncOp::CpAsync { dst_index, src_index, src_bytes, .. } => {
                [dst_index, src_index].into_iter().chain(src_bytes).collect()
            }
            AsyncOp::MbarInit { bar, count: e }
            | AsyncOp::MbarArriveExpectTx { bar, bytes: e }
            | AsyncOp::MbarWait { bar, parity: e } => vec![&bar.index, e],
            AsyncOp::MbarArrive { bar } => vec![&bar.index],
            AsyncOp::CommitGroup | AsyncOp::WaitGroup(_) | AsyncOp::FenceProxyAsync => vec![],
        }
    }

    /// `(read, written)` buffers; an mbarrier instruction reads and/or updates its barrier word.
    pub fn accesses(&self) -> (Vec<LBufId>, Vec<LBufId>) {
        match self {
            AsyncOp::CpAsync { dst, src, .. } => (vec![*src], vec![*dst]),
            AsyncOp::MbarInit { bar, .. } => (vec![], vec![bar.buf]),
            AsyncOp::MbarArrive { bar } | AsyncOp::MbarArriveExpectTx { bar, .. } => (vec![bar.buf], vec![bar.buf]),
            AsyncOp::MbarWait { bar, .. } => (vec![bar.buf], vec![]),
            AsyncOp::CommitGroup | AsyncOp::WaitGroup(_) | AsyncOp::FenceProxyAsync => (vec![], vec![]),
        }
    }
}

impl Checker<'_> {
    pub(super) fn asynch(&mut self, a: &AsyncOp) -> Check {
        let name = a.name();
        match a {
            AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes } => {
                self.cp_async((*dst, dst_index), (*src, src_index), *bytes, src_bytes.as_ref())
            }
            AsyncOp::CommitGroup | AsyncOp::WaitGroup(_) | AsyncOp::FenceProxyAsync => Ok(()),
            AsyncOp::MbarInit { bar, count } => {
                self.mbar(bar, name)?;
                self.int_operand(count, name, "arrival count", 1..=MBAR_MAX_COUNT)
            }
            AsyncOp::MbarArrive { bar } => self.mbar(bar, name),
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                self.mbar(bar, name)?;
                self.int_operand(bytes, name, "tx byte count", 0..=MBAR_MAX_COUNT)
            }
            AsyncOp::MbarWait { bar, parity } => {
                self.mbar(bar, name)?;
                self.int_operand(parity, name, "phase parity", 0..=1)
            }
        }
    }

    fn cp_async(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        bytes: u32,
        src_bytes: Option<&LExpr>,
    ) -> Check {
        let (d, s) = (self.buf(dst)?, self.buf(src)?);
        if !matches!(bytes, 4 | 8 | 16) {
            return Err(format!("cp.async of {bytes} bytes; it copies 4, 8 or 16"));
        }
        if d.space != Space::Shared || s.space != Space::Global {
            return Err(format!("cp.async copies global -> shared; `{}` <- `{}` is not", d.name, s.name));
        }
        if d.dtype != s.dtype {
            return Err(format!("cp.async `{}` <- `{}` mixes {} and {}", d.name, s.name, d.dtype, s.dtype));
        }
        let esize = i64::from(d.dtype.bytes());
        let lanes = i64::from(bytes) / esize;
        self.index(dst, dst_index)?;
        self.index(src, src_index)?;
        let what = format!("cp.async of {bytes} bytes");
        self.aligned(dst, dst_index, lanes, &what)?;
        self.aligned(src, src_index, lanes, &what)?;
        if let Some(e) = src_bytes {
            self.int_operand(e, "cp.async", "source size", 0..=i64::from(bytes))?;
            if let LExpr::Int(n, _) = e {
                if n % esize != 0 {
                    return Err(format!("cp.async source size {n} is not a whole number of {} elements", d.dtype));
                }
            }
        }
        Ok(())
    }

    fn mbar(&mut self, bar: &Mbar, name: &str) -> Check {
        let b = self.buf(bar.buf)?;
        if b.space != Space::Shared || b.dtype != DType::I64 {
            return Err(format!(
                "{name}: the barrier `{}` must be a shared int64 buffer (the 64-bit barrier word), not {:?} {}",
                b.name, b.space, b.dtype
            ));
        }
        self.index(bar.buf, &bar.index)
    }

    /// An int32 operand; a constant one must lie in `range`.
    fn int_operand(&self, e: &LExpr, name: &str, what: &str, range: std::ops::RangeInclusive<i64>) -> Check {
        self.expect(e, DType::I32, &format!("{name} {what}"))?;
        match e {
            LExpr::Int(v, _) if !range.contains(v) => {
                Err(format!("{name}: {what} {v} is outside {}..={}", range.start(), range.end()))
            }
            _ => Ok(()),
        }
    }

    /// Buffers holding mbarriers are touched by mbarrier instructions only: a plain
    /// load or store would read or clobber the barrier's hidden state.
    pub(super) fn mbarriers_exclusive(&self) -> Check {
        let mut bars = vec![];
        walk(&self.k.body, &mut |s| {
            if let LStmtKind::Async(a) = &s.kind {
                bars.extend(a.mbar().map(|m| m.buf));
            }
        });
        let mut err = None;
        walk(&self.k.body, &mut |s| {
            let mut used = vec![];
            if !matches!(&s.kind, LStmtKind::Async(a) if a.mbar().is_some()) {
                let (r, w) = s.kind.accesses();
                used.extend(r.into_iter().chain(w));
            }
            s.kind.operands().into_iter().for_each(|e| loads(e, &mut used));
            if let Some(b) = used.into_iter().find(|b| bars.contains(b)) {
                err.get_or_insert((b, s.span));
            }
        });
        match err {
            Some((b, span)) => Err(format!(
                "`{}` holds mbarriers, but a statement at source bytes {}..{} accesses it as data",
                self.k.bufs.get(b.0 as usize).map_or("?", |x| x.name.as_str()),
                span.lo,
                span.hi
            )),
            None => Ok(()),
        }
    }
}

/// Calls `f` on every statement of `body`, nested ones included.
fn walk(body: &[LStmt], f: &mut dyn FnMut(&LStmt)) {
    for s in body {
        f(s);
        s.kind.bodies().into_iter().for_each(|b| walk(b, f));
    }
}

/// The buffers `e` loads from.
fn loads(e: &LExpr, out: &mut Vec<LBufId>) {
    match e {
        LExpr::Load(b, i) => {
            out.push(*b);
            loads(i, out);
        }
        LExpr::Bin(_, a, b) => {
            loads(a, out);
            loads(b, out);
        }
        LExpr::Un(_, a) | LExpr::Cast(_, a) => loads(a, out),
        LExpr::Select(c, a, b) => [c, a, b].into_iter().for_each(|x| loads(x, out)),
        LExpr::Math(_, args) => args.iter().for_each(|a| loads(a, out)),
        LExpr::Int(..) | LExpr::Float(..) | LExpr::Bool(_) | LExpr::Var(_) | LExpr::Special(_) => {}
    }
}

impl LKernel {
    /// Whether any statement uses an mbarrier (the simulator then tracks their ordering).
    pub fn uses_mbarriers(&self) -> bool {
        let mut any = false;
        walk(&self.body, &mut |s| any |= matches!(&s.kind, LStmtKind::Async(a) if a.mbar().is_some()));
        any
    }
}

impl Printer<'_> {
    /// `cp.async.cg<16> S[i] <- A[j] src_bytes=n`, `mbarrier.wait bar[0] parity=p`, ...
    pub(super) fn asynch(&mut self, a: &AsyncOp, d: usize) {
        let name = a.name();
        let text = match a {
            AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes } => {
                let fill = src_bytes.as_ref().map_or(String::new(), |e| format!(" src_bytes={}", self.e(e)));
                format!("{name}<{bytes}> {} <- {}{fill}", self.at(*dst, dst_index), self.at(*src, src_index))
            }
            AsyncOp::WaitGroup(n) => format!("{name} {n}"),
            AsyncOp::MbarInit { bar, count } => {
                format!("{name} {} count={}", self.at(bar.buf, &bar.index), self.e(count))
            }
            AsyncOp::MbarArrive { bar } => format!("{name} {}", self.at(bar.buf, &bar.index)),
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                format!("{name} {} tx={}", self.at(bar.buf, &bar.index), self.e(bytes))
            }
            AsyncOp::MbarWait { bar, parity } => {
                format!("{name} {} parity={}", self.at(bar.buf, &bar.index), self.e(parity))
            }
            AsyncOp::CommitGroup | AsyncOp::FenceProxyAsync => name.to_string(),
        };
        self.line(d, &text);
    }
}
