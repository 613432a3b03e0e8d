//! The kernel's own asynchronous-copy and mbarrier instructions
//! (`T.ptx.cp_async.commit_group()`, `T.ptx.mbarrier.init(bar.ptr_to([0]), 1)`,
//! `MBarrier` methods; docs/tile-primitives.md §8) → one LIR statement of the
//! asynchronous family each (docs/lir.md §2.6).
//!
//! A barrier operand is an element of a shared `int64` buffer, addressed
//! through its layout like any element; counts, byte counts and parities are
//! int32. An instruction the target lacks (`expect_tx` and the fences need
//! sm_90) is an error at the statement, not an internal error later.

use crate::build::Builder;
use crate::env::{Env, RankProblem};
use std::ops::RangeInclusive;
use tirx_ir::hir::{AsyncStmt, Expr, Kernel, MbarRef};
use tirx_ir::lir::{AsyncOp, LExpr, LStmtKind, Mbar, GROUP_SYNC_MAX, MBAR_MAX_COUNT};
use tirx_ir::{Arch, DType, Diagnostic, Span};

/// Lowers one statement to its LIR instruction.
pub(crate) fn lower(
    k: &Kernel,
    env: &Env,
    b: &Builder,
    arch: Arch,
    a: &AsyncStmt,
    span: Span,
) -> Result<LStmtKind, Diagnostic> {
    let int = |e: &Expr| -> Result<LExpr, Diagnostic> { Ok(b.convert(crate::expr::lower(k, env, b, e)?, DType::I32)) };
    // A constant operand is checked here, at the operand, against the instruction's range.
    let ranged = |e: &Expr, what: &str, range: RangeInclusive<i64>, fix: &str| -> Result<LExpr, Diagnostic> {
        let v = int(e)?;
        match v {
            LExpr::Int(c, _) if !range.contains(&c) => {
                Err(Diagnostic::error(e.span, format!("{what} {c} is outside {}..={}", range.start(), range.end()))
                    .with_label(format!("the {what}"))
                    .with_help(fix.to_string()))
            }
            _ => Ok(v),
        }
    };
    let count = |e: &Expr| {
        let fix = "an mbarrier counts 1 to 2^20 - 1 arrivals: initialise it with the number of arriving threads";
        ranged(e, "arrival count", 1..=MBAR_MAX_COUNT, fix)
    };
    let bytes = |e: &Expr| {
        let fix = "one expect_tx announces at most 2^20 - 1 bytes: split the transfer over several barriers or phases";
        ranged(e, "tx byte count", 0..=MBAR_MAX_COUNT, fix)
    };
    let parity = |e: &Expr| ranged(e, "phase parity", 0..=1, "the parity of a phase is 0 or 1: write `phase % 2`");
    let bar = |r: &MbarRef| -> Result<Mbar, Diagnostic> {
        let idx = r.index.iter().map(|e| crate::expr::lower(k, env, b, e)).collect::<Result<Vec<_>, _>>()?;
        let (buf, index) = crate::addr::element(k, env, b, r.buf, &idx, false)
            .map_err(|m| Diagnostic::error(r.span, m).with_label("this barrier"))?;
        Ok(Mbar { buf, index: b.convert(index, DType::I32) })
    };
    let op = match a {
        AsyncStmt::CommitGroup => AsyncOp::CommitGroup,
        AsyncStmt::WaitGroup(n) => AsyncOp::WaitGroup(*n),
        AsyncStmt::MbarInit { bar: r, count: c } => AsyncOp::MbarInit { bar: bar(r)?, count: count(c)? },
        AsyncStmt::MbarArrive { bar: r, cta, cta_scope } => {
            let cta = cta.as_ref().map(|c| peer_rank(env, c, &int)).transpose()?;
            AsyncOp::MbarArrive { bar: bar(r)?, cta, cta_scope: *cta_scope }
        }
        AsyncStmt::MbarArriveExpectTx { bar: r, bytes: n } => {
            AsyncOp::MbarArriveExpectTx { bar: bar(r)?, bytes: bytes(n)? }
        }
        AsyncStmt::MbarWait { bar: r, parity: p } => AsyncOp::MbarWait { bar: bar(r)?, parity: parity(p)? },
        AsyncStmt::FenceProxyAsync => AsyncOp::FenceProxyAsync,
        AsyncStmt::FenceMbarrierInit => AsyncOp::FenceMbarrierInit,
        AsyncStmt::BulkCommitGroup => AsyncOp::BulkCommit,
        AsyncStmt::BulkWaitGroup { n, read } => AsyncOp::BulkWait { n: *n, read: *read },
        AsyncStmt::ClusterArrive { relaxed } => AsyncOp::ClusterBarrier { wait: false, relaxed: *relaxed },
        AsyncStmt::ClusterWait => AsyncOp::ClusterBarrier { wait: true, relaxed: false },
        AsyncStmt::GridGroupSync { word, size } => group_sync(
            k,
            env,
            b,
            word,
            &ranged(
                size,
                "group size",
                1..=i64::from(GROUP_SYNC_MAX),
                "the CTAs of a group: 1 or more (its word counts them in 31 bits)",
            )?,
        )?,
    };
    if !arch.supports(op.min_arch()) {
        return Err(Diagnostic::error(span, format!("`{}` needs {}; the target is {arch}", op.name(), op.min_arch()))
            .with_label("not available on this target")
            .with_help(format!("compile for {} or newer (`--arch sm_90a`)", op.min_arch())));
    }
    Ok(LStmtKind::Async(op))
}

/// A grid group barrier on the global word `word`: not in a cluster launch (the simulator runs
/// a cooperative grid's CTAs together as it runs a cluster's: one or the other).
fn group_sync(k: &Kernel, env: &Env, b: &Builder, word: &MbarRef, size: &LExpr) -> Result<AsyncOp, Diagnostic> {
    if env.cluster_size() > 1 {
        return Err(Diagnostic::error(word.span, "a grid group barrier in a kernel launched in clusters")
            .with_label("this barrier")
            .with_help("exchange within a cluster through its barrier and distributed shared memory, or drop the cluster (`T.cta_id_in_cluster`) to meet other CTAs through global memory"));
    }
    let idx = word.index.iter().map(|e| crate::expr::lower(k, env, b, e)).collect::<Result<Vec<_>, _>>()?;
    let (buf, index) = crate::addr::element(k, env, b, word.buf, &idx, false)
        .map_err(|m| Diagnostic::error(word.span, m).with_label("this barrier word"))?;
    Ok(AsyncOp::GridGroupSync { word: buf, word_index: b.convert(index, DType::I32), size: size.clone() })
}

/// `cta_id=` of a remote arrive: an integer rank of the kernel's cluster (a constant below its
/// size), in a kernel launched in clusters.
fn peer_rank(env: &Env, c: &Expr, int: &dyn Fn(&Expr) -> Result<LExpr, Diagnostic>) -> Result<LExpr, Diagnostic> {
    match env.cluster_rank_problem(c) {
        None => int(c),
        Some(RankProblem::NoCluster) => {
            Err(Diagnostic::error(c.span, "an arrive on a peer CTA's mbarrier needs a cluster launch")
                .with_label("`cta_id=` names a CTA of the cluster")
                .with_help(
                    "declare the cluster (`T.cta_id_in_cluster([n])`), or arrive on this CTA's barrier (no `cta_id=`)",
                ))
        }
        Some(RankProblem::NotInteger) => {
            Err(Diagnostic::error(c.span, format!("`cta_id=` is an integer rank, not {}", c.dtype))
                .with_label("this rank")
                .with_help("pass the peer's rank in the cluster: an int32 expression"))
        }
        Some(RankProblem::Outside(v, size)) => {
            Err(Diagnostic::error(c.span, format!("`cta_id={v}` is not a CTA of the cluster of {size}"))
                .with_label("this rank")
                .with_help(format!("a rank of the cluster: 0..={}", size - 1)))
        }
    }
}
