//! The **asynchronous** family: copies that complete later than they are issued,
//! and the objects that say when they have: `cp.async` global → shared with
//! commit / wait groups (sm_80), mbarriers (sm_80; `expect_tx` sm_90), the
//! async-proxy fence (sm_90), and the bulk copies of the async proxy (sm_90):
//! TMA tensor loads that complete mbarrier transactions, TMA tensor stores in
//! bulk groups (`cp.async.bulk.commit_group` / `wait_group[.read]`), and
//! shared → peer-CTA bulk copies (DSMEM). See `docs/lir.md` §2.6, §2.10, §2.13, §2.14 (DSMEM).
//!
//! Typing: `cp.async` moves 4, 8 or 16 bytes of one dtype from a global to a
//! shared buffer, both indices naturally aligned; its optional source size is an
//! int32 byte count (0..=bytes, whole elements when constant; the rest is
//! zero-filled). An mbarrier is one element of a shared `int64` or `uint64` buffer
//! (the 64-bit barrier word, opaque; the reference allocates `uint64`) that only
//! mbarrier instructions touch (`Checker::mbarriers_exclusive`); counts, tx
//! bytes and parities are int32, constant ones in range. A TMA copy names a
//! tensor map of the kernel ([`super::tmap`]) and one int32 coordinate per
//! dimension; its shared side is a shared buffer of the map's element size
//! whose start is aligned to the swizzle's repeat ([`super::tmap::swizzle_repeat`],
//! constant indices checked, the buffer itself aligned to the swizzle's repeat);
//! a load completes its bytes on an mbarrier. A bulk copy to a peer CTA moves a
//! multiple of 16 bytes between 16-byte aligned shared addresses.

use super::check::{Check, Checker};
use super::instr::{Accesses, Instr};
use super::print::Printer;
use super::tmap::{swizzle_repeat, TmapDtype, TmapId};
use super::{LBufId, LExpr, LKernel, LStmt, LStmtKind, Space};
use crate::dtype::DType;
use crate::op::{Evict, TmaReduce};
use crate::target::Arch;
use serde::Serialize;

/// The largest mbarrier arrival count and tx-count (2^20 - 1).
pub const MBAR_MAX_COUNT: i64 = (1 << 20) - 1;

/// The most CTAs a grid group barrier counts (its word's low 31 bits).
pub const GROUP_SYNC_MAX: u32 = (1 << 31) - 1;

/// An mbarrier: element `index` of a shared `int64` (or `uint64`) buffer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mbar {
    pub buf: LBufId,
    pub index: LExpr,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum AsyncOp {
    /// `cp.async.{ca,cg}.shared.global{.L2::nB} [dst], [src], bytes{, src_bytes}`:
    /// `bytes` from `src[src_index..]` to `dst[dst_index..]`, landing when the
    /// thread's group that contains it is waited for. `src_bytes` (0..=bytes) are
    /// read and the rest of the destination is zero-filled. `prefetch` (64, 128
    /// or 256) lets the L2 fetch that many bytes around the source (a hint).
    CpAsync {
        dst: LBufId,
        dst_index: LExpr,
        src: LBufId,
        src_index: LExpr,
        bytes: u32,
        src_bytes: Option<LExpr>,
        prefetch: Option<u32>,
    },
    /// `cp.async.commit_group`: closes this thread's open group of copies.
    CommitGroup,
    /// `cp.async.wait_group n`: waits until at most `n` of this thread's committed groups are pending.
    WaitGroup(u32),
    /// `mbarrier.init`: a new barrier expecting `count` arrivals per phase.
    MbarInit { bar: Mbar, count: LExpr },
    /// `mbarrier.arrive`: one arrival on the current phase; with `cta`, on the barrier at the
    /// same offset in the cluster's CTA of that rank (int32), releasing at cluster scope — or,
    /// `cta_scope`, at CTA scope (`mbarrier.arrive.shared::cluster`, CUTLASS's remote arrive: no
    /// fence), which orders for the peer only the reads before it (done when it is issued) and
    /// the copies they waited for, not writes (the simulator's model: docs/tile-primitives.md §8.8).
    MbarArrive { bar: Mbar, cta: Option<LExpr>, cta_scope: bool },
    /// `mbarrier.arrive.expect_tx`: adds `bytes` of pending transactions to the phase, then arrives.
    MbarArriveExpectTx { bar: Mbar, bytes: LExpr },
    /// Blocks until the phase of parity `parity` (0 or 1) has completed (`try_wait.parity` loop).
    MbarWait { bar: Mbar, parity: LExpr },
    /// `fence.proxy.async.shared::cta`: orders this thread's generic-proxy shared
    /// accesses with later async-proxy ones (TMA).
    FenceProxyAsync,
    /// `fence.mbarrier_init.release.cluster`: makes this thread's earlier
    /// `mbarrier.init`s visible to the cluster (the CTAs of a cluster, and TMA).
    FenceMbarrierInit,
    /// `cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes`:
    /// the box of `map` at `coords` into `dst[dst_index..]` (box-linear, swizzled as
    /// the map says), completing its bytes on `bar`; with `multicast` (a CTA mask)
    /// into the same offset of every CTA of the cluster the mask names, each
    /// completing on its own barrier at `bar`'s offset.
    TmaLoad(TmaCopy),
    /// `cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`: the box at
    /// `src[src_index..]` to `map` at `coords`, in this thread's open bulk group; with
    /// `reduce` (`cp.reduce.async.bulk.tensor...add`) added into what the box holds, each
    /// element atomically (reductions of one element commute; a plain access does not).
    TmaStore(TmaCopy),
    /// `cp.async.bulk.commit_group`: closes this thread's open group of bulk stores.
    BulkCommit,
    /// `cp.async.bulk.wait_group[.read] n`: waits until at most `n` of this thread's
    /// committed bulk groups are pending (`read`: until their sources have been read).
    BulkWait { n: u32, read: bool },
    /// `cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes`:
    /// `bytes` from this CTA's `src[src_index..]` to `dst[dst_index..]` of the CTA
    /// of rank `rank` in the cluster (`mapa`), completing them on that CTA's `bar`.
    BulkToPeer { dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, bytes: u32, bar: Mbar, rank: LExpr },
    /// `barrier.cluster.arrive` (`wait: false`; release semantics: on sm_90 it compiles to
    /// `MEMBAR.ALL.GPU` before the arrive, a wait on the thread's outstanding stores; with
    /// `relaxed`, `barrier.cluster.arrive.relaxed`: no release, no `MEMBAR`) or
    /// `barrier.cluster.wait` (`wait: true`; acquire): the two halves of `cluster.sync` (every
    /// thread of the cluster).
    ClusterBarrier { wait: bool, relaxed: bool },
    /// A barrier of the CTAs of a cooperative (co-resident) grid that meet on the 32-bit global
    /// `word[word_index]`, `size` of them a phase: every thread of the CTA; a CTA barrier, then
    /// its first thread's `atom.add.acq_rel.gpu` of 1 (the last arriver's `red.release.gpu` of
    /// 2^31 - size: the count back to 0, the top bit flipped; the others spin on an
    /// `ld.acquire.gpu` until the top bit differs from what their add returned), then a CTA
    /// barrier. The word starts with its low 31 bits 0 and is so again after every phase.
    GridGroupSync { word: LBufId, word_index: LExpr, size: LExpr },
}

/// One TMA tensor copy: the tensor map and the box's coordinates (innermost
/// first), the shared side, and for loads the completion barrier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TmaCopy {
    pub map: TmapId,
    pub coords: Vec<LExpr>,
    /// The shared buffer and the element index where the box starts.
    pub smem: LBufId,
    pub smem_index: LExpr,
    /// The barrier a load completes its bytes on (`None` for a store).
    pub bar: Option<Mbar>,
    /// `.multicast::cluster` with this 16-bit CTA mask (loads).
    pub multicast: Option<LExpr>,
    /// `.L2::cache_hint` with the policy of this eviction priority.
    pub cache: Option<Evict>,
    /// A store that combines with global memory (`cp.reduce.async.bulk.tensor`).
    pub reduce: Option<TmaReduce>,
}

impl TmaCopy {
    /// The tensor-map element types `cp.reduce.async.bulk.tensor .add` takes.
    pub fn reduce_supported(op: TmaReduce, t: TmapDtype) -> bool {
        match op {
            TmaReduce::Add => {
                matches!(
                    t,
                    TmapDtype::F32
                        | TmapDtype::F16
                        | TmapDtype::BF16
                        | TmapDtype::I32
                        | TmapDtype::U32
                        | TmapDtype::U64
                )
            }
        }
    }
}

/// The 64-bit L2 cache policy `createpolicy` gives a priority (`.L2::cache_hint`
/// operands; the reference's constants).
pub fn cache_policy(e: Evict) -> u64 {
    match e {
        Evict::First => 0x12F0_0000_0000_0000,
        Evict::Last => 0x14F0_0000_0000_0000,
        _ => 0x1000_0000_0000_0000,
    }
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
            AsyncOp::MbarArrive { cta: None, .. } => "mbarrier.arrive",
            AsyncOp::MbarArrive { cta: Some(_), cta_scope: false, .. } => {
                "mbarrier.arrive.release.cluster.shared::cluster"
            }
            AsyncOp::MbarArrive { cta: Some(_), cta_scope: true, .. } => "mbarrier.arrive.shared::cluster",
            AsyncOp::MbarArriveExpectTx { .. } => "mbarrier.arrive.expect_tx",
            AsyncOp::MbarWait { .. } => "mbarrier.try_wait.parity",
            AsyncOp::FenceProxyAsync => "fence.proxy.async.shared::cta",
            AsyncOp::FenceMbarrierInit => "fence.mbarrier_init.release.cluster",
            AsyncOp::TmaLoad(_) => "cp.async.bulk.tensor.shared::cluster.global",
            AsyncOp::TmaStore(TmaCopy { reduce: Some(_), .. }) => "cp.reduce.async.bulk.tensor.global.shared::cta",
            AsyncOp::TmaStore(_) => "cp.async.bulk.tensor.global.shared::cta",
            AsyncOp::BulkCommit => "cp.async.bulk.commit_group",
            AsyncOp::BulkWait { read: true, .. } => "cp.async.bulk.wait_group.read",
            AsyncOp::BulkWait { read: false, .. } => "cp.async.bulk.wait_group",
            AsyncOp::BulkToPeer { .. } => "cp.async.bulk.shared::cluster.shared::cta",
            AsyncOp::ClusterBarrier { wait: false, relaxed: false } => "barrier.cluster.arrive",
            AsyncOp::ClusterBarrier { wait: false, relaxed: true } => "barrier.cluster.arrive.relaxed",
            AsyncOp::ClusterBarrier { wait: true, .. } => "barrier.cluster.wait",
            AsyncOp::GridGroupSync { .. } => "grid_group_sync",
        }
    }

    /// The oldest target with the instruction (cp.async and mbarriers sm_80, the rest sm_90).
    pub fn min_arch(&self) -> Arch {
        match self {
            AsyncOp::CpAsync { .. }
            | AsyncOp::CommitGroup
            | AsyncOp::WaitGroup(_)
            | AsyncOp::MbarInit { .. }
            | AsyncOp::MbarArrive { cta: None, .. }
            // The CUDA spins on test_wait below sm_90, on try_wait from sm_90 on.
            | AsyncOp::MbarWait { .. }
            // (acquire/release atomics: sm_70)
            | AsyncOp::GridGroupSync { .. } => Arch::SM_80,
            AsyncOp::MbarArriveExpectTx { .. }
            | AsyncOp::MbarArrive { cta: Some(_), .. }
            | AsyncOp::FenceProxyAsync
            | AsyncOp::FenceMbarrierInit
            | AsyncOp::TmaLoad(_)
            | AsyncOp::TmaStore(_)
            | AsyncOp::BulkCommit
            | AsyncOp::BulkWait { .. }
            | AsyncOp::BulkToPeer { .. }
            | AsyncOp::ClusterBarrier { .. } => Arch::SM_90,
        }
    }

    /// The mbarrier the instruction uses, if any.
    pub fn mbar(&self) -> Option<&Mbar> {
        match self {
            AsyncOp::MbarInit { bar, .. }
            | AsyncOp::MbarArrive { bar, .. }
            | AsyncOp::MbarArriveExpectTx { bar, .. }
            | AsyncOp::MbarWait { bar, .. }
            | AsyncOp::BulkToPeer { bar, .. } => Some(bar),
            AsyncOp::TmaLoad(c) => c.bar.as_ref(),
            AsyncOp::CpAsync { .. }
            | AsyncOp::CommitGroup
            | AsyncOp::WaitGroup(_)
            | AsyncOp::FenceProxyAsync
            | AsyncOp::FenceMbarrierInit
            | AsyncOp::TmaStore(_)
            | AsyncOp::BulkCommit
            | AsyncOp::BulkWait { .. }
            | AsyncOp::ClusterBarrier { .. }
            | AsyncOp::GridGroupSync { .. } => None,
        }
    }

    /// The tensor map a TMA copy reads, if any.
    pub fn tmap(&self) -> Option<TmapId> {
        match self {
            AsyncOp::TmaLoad(c) | AsyncOp::TmaStore(c) => Some(c.map),
            _ => None,
        }
    }
}

impl Instr for AsyncOp {
    fn name(&self) -> String {
        AsyncOp::name(self).into()
    }

    fn min_arch(&self, _: &dyn Fn(LBufId) -> DType) -> Arch {
        AsyncOp::min_arch(self)
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            AsyncOp::CpAsync { dst_index, src_index, src_bytes, .. } => {
                [dst_index, src_index].into_iter().chain(src_bytes).collect()
            }
            AsyncOp::MbarInit { bar, count: e }
            | AsyncOp::MbarArriveExpectTx { bar, bytes: e }
            | AsyncOp::MbarWait { bar, parity: e } => vec![&bar.index, e],
            AsyncOp::MbarArrive { bar, cta, .. } => [&bar.index].into_iter().chain(cta).collect(),
            AsyncOp::TmaLoad(c) | AsyncOp::TmaStore(c) => c
                .coords
                .iter()
                .chain([&c.smem_index])
                .chain(c.bar.as_ref().map(|b| &b.index))
                .chain(&c.multicast)
                .collect(),
            AsyncOp::BulkToPeer { dst_index, src_index, bar, rank, .. } => vec![dst_index, src_index, &bar.index, rank],
            AsyncOp::GridGroupSync { word_index, size, .. } => vec![word_index, size],
            AsyncOp::CommitGroup
            | AsyncOp::WaitGroup(_)
            | AsyncOp::FenceProxyAsync
            | AsyncOp::FenceMbarrierInit
            | AsyncOp::BulkCommit
            | AsyncOp::BulkWait { .. }
            | AsyncOp::ClusterBarrier { .. } => vec![],
        }
    }

    /// `(read, written)` buffers; an mbarrier instruction reads and/or updates its barrier word.
    fn accesses(&self) -> Accesses {
        match self {
            AsyncOp::CpAsync { dst, src, .. } => (vec![*src], vec![*dst]),
            AsyncOp::MbarInit { bar, .. } => (vec![], vec![bar.buf]),
            AsyncOp::MbarArrive { bar, .. } | AsyncOp::MbarArriveExpectTx { bar, .. } => (vec![bar.buf], vec![bar.buf]),
            AsyncOp::MbarWait { bar, .. } => (vec![bar.buf], vec![]),
            AsyncOp::TmaLoad(c) => {
                (c.bar.iter().map(|b| b.buf).collect(), c.bar.iter().map(|b| b.buf).chain([c.smem]).collect())
            }
            AsyncOp::TmaStore(c) => (vec![c.smem], vec![]),
            AsyncOp::BulkToPeer { dst, src, bar, .. } => (vec![*src, bar.buf], vec![*dst, bar.buf]),
            AsyncOp::GridGroupSync { word, .. } => (vec![*word], vec![*word]),
            AsyncOp::CommitGroup
            | AsyncOp::WaitGroup(_)
            | AsyncOp::FenceProxyAsync
            | AsyncOp::FenceMbarrierInit
            | AsyncOp::BulkCommit
            | AsyncOp::BulkWait { .. }
            | AsyncOp::ClusterBarrier { .. } => (vec![], vec![]),
        }
    }

    /// A TMA copy also moves the global memory its tensor map describes.
    fn traffic(&self, k: &LKernel) -> Accesses {
        let (mut read, mut written) = self.accesses();
        let global = |m: TmapId| k.tmaps.get(m.0 as usize).map(|t| t.buf);
        match self {
            AsyncOp::TmaLoad(c) => read.extend(global(c.map)),
            AsyncOp::TmaStore(c) => {
                if c.reduce.is_some() {
                    read.extend(global(c.map));
                }
                written.extend(global(c.map))
            }
            _ => {}
        }
        (read, written)
    }

    fn check(&self, c: &mut Checker) -> Check {
        c.asynch(self)
    }

    fn print(&self, p: &Printer) -> String {
        p.asynch(self)
    }
}

impl Checker<'_> {
    fn asynch(&mut self, a: &AsyncOp) -> Check {
        let name = a.name();
        match a {
            AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes, prefetch } => {
                if !matches!(prefetch, None | Some(64 | 128 | 256)) {
                    return Err(format!("cp.async prefetch of {prefetch:?} bytes; the L2 prefetches 64, 128 or 256"));
                }
                self.cp_async((*dst, dst_index), (*src, src_index), *bytes, src_bytes.as_ref())
            }
            AsyncOp::CommitGroup
            | AsyncOp::WaitGroup(_)
            | AsyncOp::FenceProxyAsync
            | AsyncOp::FenceMbarrierInit
            | AsyncOp::BulkCommit
            | AsyncOp::ClusterBarrier { .. } => Ok(()),
            AsyncOp::BulkWait { n, .. } if *n > 64 => Err(format!("{name} {n}: at most 64 groups may stay pending")),
            AsyncOp::BulkWait { .. } => Ok(()),
            AsyncOp::TmaLoad(c) => self.tma(c, true),
            AsyncOp::TmaStore(c) => self.tma(c, false),
            AsyncOp::BulkToPeer { dst, dst_index, src, src_index, bytes, bar, rank } => {
                self.mbar(bar, name)?;
                self.expect(rank, DType::I32, &format!("{name} CTA rank"))?;
                self.bulk_to_peer((*dst, dst_index), (*src, src_index), *bytes)
            }
            AsyncOp::MbarInit { bar, count } => {
                self.mbar(bar, name)?;
                self.int_operand(count, name, "arrival count", 1..=MBAR_MAX_COUNT)
            }
            AsyncOp::MbarArrive { bar, cta: None, .. } => self.mbar(bar, name),
            AsyncOp::MbarArrive { bar, cta: Some(rank), .. } => {
                self.mbar(bar, name)?;
                self.expect(rank, DType::I32, &format!("{name} CTA rank"))
            }
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                self.mbar(bar, name)?;
                self.int_operand(bytes, name, "tx byte count", 0..=MBAR_MAX_COUNT)
            }
            AsyncOp::MbarWait { bar, parity } => {
                self.mbar(bar, name)?;
                self.int_operand(parity, name, "phase parity", 0..=1)
            }
            AsyncOp::GridGroupSync { word, word_index, size } => {
                let w = self.buf(*word)?;
                if w.space != Space::Global || !matches!(w.dtype, DType::I32 | DType::U32) {
                    return Err(format!(
                        "{name} on `{}` ({:?} {}): its word is a global int32",
                        w.name, w.space, w.dtype
                    ));
                }
                self.index(*word, word_index)?;
                self.int_operand(size, name, "group size", 1..=i64::from(GROUP_SYNC_MAX))
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

    /// A TMA copy: a map of the kernel, one int32 coordinate per dimension, a shared
    /// buffer of the map's element size aligned for the box, a barrier for loads only.
    fn tma(&mut self, c: &TmaCopy, load: bool) -> Check {
        let m = self.tmap_ref(c.map)?;
        let what = if load { "TMA load" } else { "TMA store" };
        if let Some(op) = c.reduce {
            if load {
                return Err("a TMA load does not reduce; `reduce` is for stores".into());
            }
            if !TmaCopy::reduce_supported(op, m.dtype) {
                return Err(format!(
                    "TMA reduce-add of {} elements (`{}`): it adds f32, f16, bf16, s32, u32, u64",
                    m.dtype.name(),
                    m.name
                ));
            }
        }
        if c.coords.len() != m.rank() {
            return Err(format!("{what} of `{}` gives {} coordinates for rank {}", m.name, c.coords.len(), m.rank()));
        }
        for e in &c.coords {
            self.expect(e, DType::I32, &format!("{what} coordinate"))?;
        }
        let s = self.buf(c.smem)?;
        if s.space != Space::Shared {
            return Err(format!("{what}: `{}` is not shared memory", s.name));
        }
        let (sb, mb) = (i64::from(s.dtype.bytes()), i64::from(m.dtype.bytes()));
        if sb != mb && mb % sb != 0 {
            return Err(format!("{what}: `{}` ({}) does not hold {} elements", s.name, s.dtype, m.dtype.name()));
        }
        if u64::from(s.align_bytes()) < u64::from(swizzle_repeat(m.swizzle)) {
            return Err(format!(
                "{what}: `{}` starts on {} bytes, but the {}-byte swizzle of `{}` repeats every {} bytes",
                s.name,
                s.align_bytes(),
                m.swizzle_bytes(),
                m.name,
                swizzle_repeat(m.swizzle)
            ));
        }
        self.index(c.smem, &c.smem_index)?;
        self.aligned(c.smem, &c.smem_index, i64::from(swizzle_repeat(m.swizzle)) / sb, what)?;
        match (&c.bar, load) {
            (Some(b), true) => self.mbar(b, what)?,
            (None, false) => {}
            (Some(_), false) => return Err("a TMA store completes in a bulk group, not on an mbarrier".into()),
            (None, true) => return Err("a TMA load needs an mbarrier to complete on".into()),
        }
        if let Some(e) = &c.multicast {
            if !load {
                return Err("multicast applies to TMA loads".into());
            }
            self.int_operand(e, what, "CTA mask", 0..=0xffff)?;
        }
        Ok(())
    }

    /// A bulk copy to a peer CTA: whole 16-byte units between 16-byte aligned shared addresses.
    fn bulk_to_peer(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        bytes: u32,
    ) -> Check {
        let (d, s) = (self.buf(dst)?, self.buf(src)?);
        let name = "cp.async.bulk.shared::cluster";
        if d.space != Space::Shared || s.space != Space::Shared {
            return Err(format!("{name} copies shared -> shared; `{}` <- `{}` is not", d.name, s.name));
        }
        if d.dtype != s.dtype {
            return Err(format!("{name} `{}` <- `{}` mixes {} and {}", d.name, s.name, d.dtype, s.dtype));
        }
        if bytes == 0 || !bytes.is_multiple_of(16) || !bytes.is_multiple_of(d.dtype.bytes()) {
            return Err(format!("{name} of {bytes} bytes; it moves a positive multiple of 16"));
        }
        self.index(dst, dst_index)?;
        self.index(src, src_index)?;
        let lanes = 16 / i64::from(d.dtype.bytes()).min(16);
        self.aligned(dst, dst_index, lanes, name)?;
        self.aligned(src, src_index, lanes, name)
    }

    fn mbar(&mut self, bar: &Mbar, name: &str) -> Check {
        let b = self.buf(bar.buf)?;
        if b.space != Space::Shared || !matches!(b.dtype, DType::I64 | DType::U64) {
            return Err(format!(
                "{name}: the barrier `{}` must be a shared int64 or uint64 buffer (the 64-bit barrier word), not {:?} {}",
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
pub(super) fn walk(body: &[LStmt], f: &mut dyn FnMut(&LStmt)) {
    for s in body {
        f(s);
        s.kind.bodies().into_iter().for_each(|b| walk(b, f));
    }
}

/// The buffers `e` loads from.
fn loads(e: &LExpr, out: &mut Vec<LBufId>) {
    e.walk(&mut |x| {
        if let LExpr::Load(b, _) = x {
            out.push(*b);
        }
    });
}

impl LKernel {
    /// Whether any statement uses an mbarrier (the simulator then tracks their ordering).
    pub fn uses_mbarriers(&self) -> bool {
        let mut any = false;
        walk(&self.body, &mut |s| any |= matches!(&s.kind, LStmtKind::Async(a) if a.mbar().is_some()));
        any
    }

    /// Whether the kernel meets other CTAs at grid group barriers: it must be launched
    /// cooperatively (every CTA resident at once) and simulated with its whole grid together.
    pub fn cooperative(&self) -> bool {
        !self.grid_group_words().is_empty()
    }

    /// The buffers holding the words of its grid group barriers (each must start with its low
    /// 31 bits 0: a launch's input for them is zeros unless given).
    pub fn grid_group_words(&self) -> Vec<LBufId> {
        let mut words = vec![];
        walk(&self.body, &mut |s| {
            if let LStmtKind::Async(AsyncOp::GridGroupSync { word, .. }) = &s.kind {
                if !words.contains(word) {
                    words.push(*word);
                }
            }
        });
        words
    }

    /// Whether any statement is a TMA load or a bulk copy that lands on an mbarrier
    /// (the simulator then tracks who acquired their landings).
    pub fn uses_tma_loads(&self) -> bool {
        let mut any = false;
        walk(&self.body, &mut |s| {
            any |= matches!(&s.kind, LStmtKind::Async(AsyncOp::TmaLoad(_) | AsyncOp::BulkToPeer { .. }))
        });
        any
    }
}

impl Printer<'_> {
    /// `cp.async.cg<16> S[i] <- A[j] src_bytes=n`, `mbarrier.wait bar[0] parity=p`, ...
    fn asynch(&self, a: &AsyncOp) -> String {
        let name = a.name();
        match a {
            AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes, prefetch } => {
                let fill = src_bytes.as_ref().map_or(String::new(), |e| format!(" src_bytes={}", self.e(e)));
                let pf = prefetch.map_or(String::new(), |n| format!(".L2::{n}B"));
                format!("{name}{pf}<{bytes}> {} <- {}{fill}", self.at(*dst, dst_index), self.at(*src, src_index))
            }
            AsyncOp::WaitGroup(n) => format!("{name} {n}"),
            AsyncOp::MbarInit { bar, count } => {
                format!("{name} {} count={}", self.at(bar.buf, &bar.index), self.e(count))
            }
            AsyncOp::MbarArrive { bar, cta: None, .. } => format!("{name} {}", self.at(bar.buf, &bar.index)),
            AsyncOp::MbarArrive { bar, cta: Some(rank), .. } => {
                format!("{name} {} @ cta {}", self.at(bar.buf, &bar.index), self.e(rank))
            }
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                format!("{name} {} tx={}", self.at(bar.buf, &bar.index), self.e(bytes))
            }
            AsyncOp::MbarWait { bar, parity } => {
                format!("{name} {} parity={}", self.at(bar.buf, &bar.index), self.e(parity))
            }
            AsyncOp::TmaLoad(c) | AsyncOp::TmaStore(c) => self.tma_text(c, matches!(a, AsyncOp::TmaLoad(_))),
            AsyncOp::BulkWait { n, .. } => format!("{name} {n}"),
            AsyncOp::GridGroupSync { word, word_index, size } => {
                format!("{name} {} size={}", self.at(*word, word_index), self.e(size))
            }
            AsyncOp::BulkToPeer { dst, dst_index, src, src_index, bytes, bar, rank } => format!(
                "{name}<{bytes}> {} @ cta {} <- {} bar={}",
                self.at(*dst, dst_index),
                self.e(rank),
                self.at(*src, src_index),
                self.at(bar.buf, &bar.index)
            ),
            AsyncOp::CommitGroup
            | AsyncOp::FenceProxyAsync
            | AsyncOp::FenceMbarrierInit
            | AsyncOp::BulkCommit
            | AsyncOp::ClusterBarrier { .. } => name.to_string(),
        }
    }

    /// `tma.load.2d A_s[0] <- A_tmap[bx * 64, by * 128] bar=mbar[0]`, `tma.store.2d A_tmap[..] <- A_s[0]`.
    fn tma_text(&self, c: &TmaCopy, load: bool) -> String {
        let map = self.k.tmaps.get(c.map.0 as usize);
        let mname = map.map_or_else(|| format!("tmap#{}", c.map.0), |m| m.name.clone());
        let coords: Vec<String> = c.coords.iter().map(|e| self.e(e)).collect();
        let tile = format!("{mname}[{}]", coords.join(", "));
        let smem = self.at(c.smem, &c.smem_index);
        let mut s = if load {
            format!("tma.load.{}d {smem} <- {tile}", c.coords.len())
        } else {
            let verb = if c.reduce.is_some() { "reduce_add" } else { "store" };
            format!("tma.{verb}.{}d {tile} <- {smem}", c.coords.len())
        };
        if let Some(b) = &c.bar {
            s.push_str(&format!(" bar={}", self.at(b.buf, &b.index)));
        }
        if let Some(m) = &c.multicast {
            s.push_str(&format!(" multicast={}", self.e(m)));
        }
        if let Some(e) = c.cache {
            s.push_str(&format!(" L2::{}", e.name()));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lir::{LBuf, LStmt, MemOp};
    use crate::span::Span;

    /// Buffers: 0 `A` global f32[64], 1 `S` shared f32[64], 2 `bars` shared i64[2],
    /// 3 `G` global i64[2], 4 `R` local i64[2].
    fn kernel(body: Vec<LStmtKind>) -> LKernel {
        let buf = |name, dtype, space| LBuf::flat(name, dtype, space, 64);
        LKernel {
            params: vec![LBufId(0), LBufId(3)],
            bufs: vec![
                buf("A", DType::F32, Space::Global),
                buf("S", DType::F32, Space::Shared),
                buf("bars", DType::I64, Space::Shared),
                buf("G", DType::I64, Space::Global),
                buf("R", DType::I64, Space::Local),
            ],
            body: body.into_iter().map(|k| LStmt::new(k, Span::default())).collect(),
            ..LKernel::new("k", [1, 1, 1], [32, 1, 1])
        }
    }

    fn cp(dst: u32, di: i64, src: u32, si: i64, bytes: u32, src_bytes: Option<LExpr>) -> LStmtKind {
        cp_pf(dst, di, src, si, bytes, src_bytes, None)
    }

    fn cp_pf(
        dst: u32,
        di: i64,
        src: u32,
        si: i64,
        bytes: u32,
        src_bytes: Option<LExpr>,
        prefetch: Option<u32>,
    ) -> LStmtKind {
        let (dst_index, src_index) = (LExpr::i32(di), LExpr::i32(si));
        LStmtKind::Async(AsyncOp::CpAsync {
            dst: LBufId(dst),
            dst_index,
            src: LBufId(src),
            src_index,
            bytes,
            src_bytes,
            prefetch,
        })
    }

    fn mbar(buf: u32) -> Mbar {
        Mbar { buf: LBufId(buf), index: LExpr::i32(1) }
    }

    fn all_ops() -> Vec<LStmtKind> {
        vec![
            LStmtKind::Async(AsyncOp::MbarInit { bar: mbar(2), count: LExpr::i32(32) }),
            cp(1, 4, 0, 8, 16, None),
            cp(1, 2, 0, 2, 8, Some(LExpr::i32(4))),
            cp(1, 1, 0, 63, 4, None),
            LStmtKind::Async(AsyncOp::CommitGroup),
            LStmtKind::Async(AsyncOp::WaitGroup(0)),
            LStmtKind::Async(AsyncOp::MbarArrive { bar: mbar(2), cta: None, cta_scope: false }),
            LStmtKind::Async(AsyncOp::MbarArriveExpectTx { bar: mbar(2), bytes: LExpr::i32(1024) }),
            LStmtKind::Async(AsyncOp::MbarWait { bar: mbar(2), parity: LExpr::i32(1) }),
            LStmtKind::Async(AsyncOp::FenceProxyAsync),
            LStmtKind::Async(AsyncOp::FenceMbarrierInit),
            cp_pf(1, 8, 0, 16, 16, None, Some(128)),
        ]
    }

    fn rejects(body: Vec<LStmtKind>, words: &str) {
        let err = kernel(body).validate().expect_err("must be rejected");
        assert!(err.contains(words), "`{words}` not in: {err}");
    }

    #[test]
    fn accepts_every_instruction() {
        assert_eq!(kernel(all_ops()).validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_copies() {
        rejects(vec![cp(1, 0, 0, 0, 12, None)], "cp.async of 12 bytes; it copies 4, 8 or 16");
        rejects(vec![cp(0, 0, 1, 0, 16, None)], "cp.async copies global -> shared");
        rejects(vec![cp(1, 2, 0, 0, 16, None)], "cp.async of 16 bytes: index 2 into `S` is not a multiple of 4");
        rejects(vec![cp(1, 0, 0, 0, 16, Some(LExpr::i32(20)))], "cp.async: source size 20 is outside 0..=16");
        rejects(
            vec![cp(1, 0, 0, 0, 16, Some(LExpr::i32(6)))],
            "source size 6 is not a whole number of float32 elements",
        );
        rejects(
            vec![cp(1, 0, 0, 0, 16, Some(LExpr::Int(8, DType::I64)))],
            "cp.async source size is int64, expected int32",
        );
        rejects(vec![cp_pf(1, 8, 0, 16, 16, None, Some(32))], "cp.async prefetch of Some(32) bytes");
    }

    #[test]
    fn rejects_bad_mbarriers() {
        let op = |bar| LStmtKind::Async(AsyncOp::MbarArrive { bar, cta: None, cta_scope: false });
        rejects(vec![op(mbar(1))], "the barrier `S` must be a shared int64 or uint64 buffer");
        rejects(vec![op(mbar(4))], "the barrier `R` must be a shared int64 or uint64 buffer");
        rejects(vec![op(mbar(3))], "the barrier `G` must be a shared int64 or uint64 buffer");
        let init = |n| LStmtKind::Async(AsyncOp::MbarInit { bar: mbar(2), count: LExpr::i32(n) });
        rejects(vec![init(0)], "mbarrier.init: arrival count 0 is outside 1..=1048575");
        rejects(vec![init(1 << 20)], "arrival count 1048576 is outside");
        let tx = LStmtKind::Async(AsyncOp::MbarArriveExpectTx { bar: mbar(2), bytes: LExpr::i32(-4) });
        rejects(vec![tx], "tx byte count -4 is outside 0..=1048575");
        let wait = LStmtKind::Async(AsyncOp::MbarWait { bar: mbar(2), parity: LExpr::i32(2) });
        rejects(vec![wait], "phase parity 2 is outside 0..=1");
        // A barrier buffer is not data: no plain store or load may touch it.
        let store =
            LStmtKind::Memory(MemOp::Store { buf: LBufId(2), index: LExpr::i32(0), value: LExpr::Int(0, DType::I64) });
        rejects(
            vec![init(1), store],
            "`bars` holds mbarriers, but a statement at source bytes 0..0 accesses it as data",
        );
        let load = LStmtKind::Memory(MemOp::Store {
            buf: LBufId(3),
            index: LExpr::i32(0),
            value: LExpr::Load(LBufId(2), Box::new(LExpr::i32(0))),
        });
        rejects(vec![init(1), load], "`bars` holds mbarriers");
    }

    #[test]
    fn minimum_targets() {
        let k = kernel(all_ops());
        let archs: Vec<Arch> = k.body.iter().map(|s| k.min_arch(s)).collect();
        let sm80 = Arch::SM_80;
        let sm90 = Arch::SM_90;
        assert_eq!(archs, vec![sm80, sm80, sm80, sm80, sm80, sm80, sm80, sm90, sm80, sm90, sm90, sm80]);
        let first = k.first_unsupported(Arch::SM_80).map(|s| &s.kind);
        assert!(matches!(first, Some(LStmtKind::Async(AsyncOp::MbarArriveExpectTx { .. }))));
        assert!(k.first_unsupported(Arch::SM_75).is_some());
        assert!(k.first_unsupported(Arch::SM_90A).is_none());
        assert!(k.uses_mbarriers());
    }

    #[test]
    fn prints_one_line_each() {
        let text = kernel(all_ops()).to_string();
        for line in [
            "mbarrier.init bars[1] count=32",
            "cp.async.cg<16> S[4] <- A[8]",
            "cp.async.ca<8> S[2] <- A[2] src_bytes=4",
            "cp.async.ca<4> S[1] <- A[63]",
            "cp.async.commit_group",
            "cp.async.wait_group 0",
            "mbarrier.arrive bars[1]",
            "mbarrier.arrive.expect_tx bars[1] tx=1024",
            "mbarrier.try_wait.parity bars[1] parity=1",
            "fence.proxy.async.shared::cta",
            "fence.mbarrier_init.release.cluster",
            "cp.async.cg.L2::128B<16> S[8] <- A[16]",
        ] {
            assert!(text.contains(&format!("\n  {line}\n")), "`{line}` not in:\n{text}");
        }
    }
}
