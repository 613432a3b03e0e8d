//! Buffers, bounds checks, and the race / initialisation shadow.
//!
//! **Granularity.** Every LIR buffer is its own flat array and every access to
//! it (scalar, vector, matrix row, pair) is in units of its dtype, so the shadow
//! is element-granular and exact: two accesses overlap iff they share an element.
//!
//! **Epoch stamps.** A global `clock` ticks at every CTA start, CTA barrier,
//! warp barrier and mbarrier arrive. Each warp's `wsync` is the clock of its
//! last barrier, and an access is stamped with the newer of its warp's `wsync`
//! and its thread's last arrive tick ([`Machine::stamp`]). For an earlier access
//! `(tid p, stamp s)` and the current thread `t`:
//! * `s == 0`: never accessed; `s < cta_start`: by an earlier CTA (shared: the
//!   memory is fresh, so "never"; global: another CTA — CTAs are unordered);
//! * global, by another CTA of the running cluster (the stamp's residue names it,
//!   [`Machine::foreign`]): ordered only by a cluster barrier phase;
//! * `s < cta_sync` (a CTA barrier since), `p == t`, `p` in `t`'s warp with
//!   `s < wsync[warp]` (a `__syncwarp` since), or `s` older than an arrive of
//!   `p` that `t` acquired through mbarrier waits (`asynch`; a vector clock, so
//!   chains of waits order transitively), or older than `p`'s arrive at the last
//!   cluster barrier phase `t` waited for (`cluster`): ordered;
//! * otherwise the two accesses race if one of them writes.
//!
//! A "several readers" record keeps the newest of their stamps; an mbarrier
//! orders it before `t` only if `t` acquired an arrive newer than that from
//! every thread that may be one of the readers (their warp, or the whole CTA
//! when they span warps), which is exact for pipelines whose whole consumer
//! warp(s) arrive and may report a race for other patterns. Readers that are all
//! first threads of their warpgroups (what a wgmma's shared reads are recorded as:
//! two consumer warpgroups reading one pipeline stage) keep one stamp per
//! warpgroup beside the record (`BufMem::leaders`), and each is ordered on its
//! own (by a barrier, named or not, or a release `t` acquired): exact for consumers
//! releasing a stage through their first thread, or meeting at a named barrier; and since a
//! warpgroup's `wgmma.wait_group` is collective, every thread of that warpgroup is ordered
//! after the wgmma reads it completed (`WGMMA_READ`). Likewise,
//! in kernels with mbarriers, readers of a shared element in several warps keep one
//! stamp per warp, with the lane when only one lane of that warp read it
//! (`BufMem::warps`): a stage that the warps of a warpgroup share is ordered warp by
//! warp, as each warp's release (one lane's arrive after `__syncwarp`) reaches the
//! producer. A record also remembers whether a reader used the generic proxy: an
//! async-proxy write over it (a TMA load) then needs that reader's `fence.proxy.async`
//! (`Machine::proxy_war_check`).
//!
//! One shadow record per element of a global/shared buffer (16 bytes: last
//! writer and last reader(s), with their stamps and statement sites), allocated
//! once per simulation and never reset: stamps make older records stale, so the
//! cost is bounded by the buffers' size, not the grid's. A reader record that is
//! ordered before a new read is replaced; unordered readers merge into a
//! "several readers" record that remembers whether they span warps. A global
//! element read by an earlier CTA keeps a sticky flag, so a later CTA writing it
//! is caught; so does one read through `ld.global.nc`, which must never be
//! written in the same launch. Keeping only the last writer and the last readers
//! loses no race: a record is replaced only by an access it is ordered before, so
//! a later access unordered with the old one is unordered with the new one too
//! (happens-before is transitive) — a race is still reported, with the newer
//! access. `tests/race_model.rs` checks this against a brute-force pairwise model.
//! Local memory is private: it only tracks, per thread and element, whether the
//! thread wrote it in this CTA (for the uninitialised-read warning).

use crate::error::{SimError, SimErrorKind, SimWarning, Who};
use crate::exec::Machine;
use crate::SimOptions;
use serde::Serialize;
use std::collections::HashMap;
use tirx_ir::lir::wgmma::WARPGROUP;
use tirx_ir::lir::{LBufId, LKernel, Space};
use tirx_ir::DType;

/// Bytes of the race/initialisation shadow per element of a global or shared buffer.
pub const SHADOW_BYTES: u64 = std::mem::size_of::<ShadowWords>() as u64;

/// [`SimOptions::memory_limit`] where the host's memory is unknown: 16 GiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 16 << 30;

/// The default [`SimOptions::memory_limit`]: the host's physical memory
/// (`MemTotal` of `/proc/meminfo`), else [`DEFAULT_MEMORY_LIMIT`].
pub fn host_memory_limit() -> u64 {
    let kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    });
    kib.map_or(DEFAULT_MEMORY_LIMIT, |k| k.saturating_mul(1024))
}

/// The host memory one buffer takes in a simulation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BufUse {
    pub buf: LBufId,
    /// Its contents: elements × element size (× threads per CTA for local memory).
    pub data: u64,
    /// The race shadow ([`SHADOW_BYTES`] per element of global and shared
    /// memory; global only with race checks on) or, for local memory, the
    /// initialisation stamps (4 bytes per thread and element).
    pub shadow: u64,
}

impl BufUse {
    pub fn total(&self) -> u64 {
        self.data.saturating_add(self.shadow)
    }
}

/// The host memory a simulation of a kernel takes, parameters included
/// (saturated: an absurd size stays absurd instead of wrapping). `total`
/// counts the contents of every buffer and the local-memory stamps; the race
/// shadow of global and shared buffers is mapped zeroed (`try_zeroed`) and
/// costs only the pages of the elements a run touches, so it is reported per
/// buffer but not counted (a mapping the host refuses is a `ResourceLimit`
/// error, never an abort).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryUse {
    pub total: u64,
    /// Every buffer, in kernel order.
    pub bufs: Vec<BufUse>,
}

impl MemoryUse {
    /// The buffer that takes the most.
    pub fn largest(&self) -> Option<&BufUse> {
        self.bufs.iter().max_by_key(|b| b.total())
    }
}

/// What simulating `k` with `opts` allocates: the parameters, shared and local
/// memory, and the race shadow. Checked against [`SimOptions::memory_limit`]
/// before anything is allocated.
pub fn memory_use(k: &LKernel, opts: &SimOptions) -> MemoryUse {
    let threads = k.block.iter().fold(1u64, |a, &d| a.saturating_mul(u64::from(d)));
    // The CTAs of a cluster (of a cooperative grid) run together: each holds its own shared
    // and local memory.
    let ctas = if k.cooperative() {
        k.grid.iter().fold(1u64, |a, &d| a.saturating_mul(u64::from(d.max(1))))
    } else {
        u64::from(k.cluster_size().max(1))
    };
    let bufs: Vec<BufUse> = k
        .bufs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let elems = u64::try_from(b.elems.max(0)).unwrap_or(0);
            let data = elems.saturating_mul(u64::from(b.dtype.bytes()));
            let (data, shadow) = match b.space {
                Space::Global => (data, if opts.check_races { elems.saturating_mul(SHADOW_BYTES) } else { 0 }),
                Space::Shared => (data.saturating_mul(ctas), elems.saturating_mul(SHADOW_BYTES).saturating_mul(ctas)),
                Space::Local => {
                    let per_cta = elems.saturating_mul(threads);
                    (data.saturating_mul(threads).saturating_mul(ctas), per_cta.saturating_mul(4).saturating_mul(ctas))
                }
            };
            BufUse { buf: LBufId(i as u32), data, shadow }
        })
        .collect();
    let committed = |b: &BufUse| match k.buf(b.buf).space {
        Space::Local => b.total(),
        Space::Global | Space::Shared => b.data,
    };
    let total = bufs.iter().fold(0u64, |a, b| a.saturating_add(committed(b)));
    MemoryUse { total, bufs }
}

/// Refuses a simulation that would take more than [`SimOptions::memory_limit`]
/// bytes, naming the buffer that takes the most and its bytes.
pub fn check_memory(k: &LKernel, opts: &SimOptions) -> Result<MemoryUse, SimError> {
    let used = memory_use(k, opts);
    if used.total <= opts.memory_limit {
        return Ok(used);
    }
    let mut msg = format!(
        "simulating `{}` needs {} of host memory, more than the simulator's limit of {}",
        k.name,
        bytes_text(used.total),
        bytes_text(opts.memory_limit)
    );
    if let Some(big) = used.largest() {
        let b = k.buf(big.buf);
        let space = match b.space {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local, per thread",
        };
        let dims: Vec<String> = b.shape.iter().map(i64::to_string).collect();
        msg.push_str(&format!(
            ": `{}` ({space}, {} {}) takes {} of data",
            b.name,
            dims.join(" × "),
            b.dtype,
            bytes_text(big.data)
        ));
        if big.shadow > 0 && b.space == Space::Local {
            msg.push_str(&format!(" and {} of initialisation stamps", bytes_text(big.shadow)));
        }
    }
    Err(SimError::new(SimErrorKind::ResourceLimit, Default::default(), msg)
        .help("simulate a smaller shape (a few tiles show the same code paths)"))
}

/// `4398046511104 bytes (4.0 TiB)`.
pub fn bytes_text(b: u64) -> String {
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    match units.iter().find(|(_, shift)| b >= 1u64 << shift) {
        Some((unit, shift)) => format!("{b} bytes ({:.1} {unit})", b as f64 / (1u64 << shift) as f64),
        None => format!("{b} bytes"),
    }
}

/// Element types whose all-zero bit pattern is a valid value.
pub(crate) trait Zeroable: Copy {}
impl Zeroable for u8 {}
impl Zeroable for u32 {}
impl Zeroable for u64 {}
impl Zeroable for ShadowWords {}

/// `vec![0; n]`, but an allocation failure is an error instead of an abort.
/// Like `vec![0; n]` the memory comes zeroed from the allocator (`calloc`), so
/// pages that are never touched (shadow of elements a `--grid-limit` run never
/// reaches) cost nothing.
pub(crate) fn try_zeroed<T: Zeroable>(n: usize, what: &dyn Fn() -> String) -> Result<Vec<T>, SimError> {
    let fail = || {
        SimError::new(
            SimErrorKind::ResourceLimit,
            Default::default(),
            format!(
                "out of host memory allocating {} for {}",
                bytes_text((n as u64).saturating_mul(size_of::<T>() as u64)),
                what()
            ),
        )
        .help("simulate a smaller shape, or pass --no-race-check to drop the race shadow of global buffers")
    };
    if n == 0 || size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| fail())?;
    // SAFETY: `layout` has a non-zero size (n > 0, T not zero-sized). The pointer is
    // checked for null; it comes from the global allocator with exactly the layout
    // `Vec<T>` uses for capacity `n`, so `from_raw_parts` takes ownership soundly,
    // and every element is initialised: all-zero bytes are a valid `T` (`Zeroable`).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            return Err(fail());
        }
        Ok(Vec::from_raw_parts(ptr, n, n))
    }
}

/// [`try_zeroed`] bytes for callers outside the simulator (the CLI's parameter
/// buffers): `None` when the allocator refuses.
pub fn try_zeroed_bytes(n: usize) -> Option<Vec<u8>> {
    try_zeroed::<u8>(n, &String::new).ok()
}

/// Reader record bits: the (last) reader's thread id (threads per CTA ≤ 1024),
const TID_MASK: u16 = 0x3ff;
/// several unordered readers in the current interval,
const MULTI: u16 = 0x400;
/// ... and they are not all in one warp,
const CROSS_WARP: u16 = 0x800;
/// an earlier CTA read the element (sticky),
const OLD_CTA_READ: u16 = 0x1000;
/// Read through the non-coherent (read-only) path at some point of the launch (sticky).
const NC_READ: u16 = 0x2000;
/// ... and every one of them is the first thread of its warpgroup (`t % 128 == 0`: the
/// thread a wgmma's shared reads are recorded under, `wgmma`), so ordering after those
/// threads orders after all of them (two consumer warpgroups reading one stage).
const WG_LEADERS: u16 = 0x4000;
/// Warpgroups in a CTA of at most 1024 threads.
pub(crate) const MAX_WARPGROUPS: usize = 8;
/// Some reader of the record read through the generic proxy (plain loads, ldmatrix; not a
/// wgmma's operand reads), so an async-proxy write (a TMA load landing) over the element needs
/// a `fence.proxy.async` of that reader first ([`Machine::proxy_war_check`]).
const GENERIC_READ: u16 = 0x8000;
/// Flags of global elements that survive replacing the reader record.
const STICKY: u16 = OLD_CTA_READ | NC_READ;
/// Shared elements only (the bit is `OLD_CTA_READ`'s, which only global elements use): every
/// reader of the record is a warpgroup-first thread standing for a wgmma's operand reads
/// ([`Dir::ReadWgmma`]). Such a read is complete when its warpgroup's collective
/// `wgmma.wait_group` returns, so every thread of that warpgroup is ordered after it (a later
/// access is after the thread's own wait; an earlier one the wgmma hooks report as pending).
const WGMMA_READ: u16 = 0x1000;
/// Writer record bit: the write was a TMA copy's landing (the async proxy: a TMA load,
/// multicast load or dsmem copy) on the mbarrier whose slot (`asynch`: `slots`) is in the
/// low bits, stamped with its phase's completion tick; it is ordered only through that
/// barrier's phase (`asynch`: `acq_tma`), not by barriers that nobody waited before, nor
/// by waits on other mbarriers.
pub(crate) const LANDED: u16 = 0x8000;
/// Writer record bit of global elements: the record's readers are threads of more than one of
/// the CTAs running together ([`Machine::foreign`]), each CTA's newest read in
/// [`BufMem::peer_reads`]; a write is ordered after them only by what orders each CTA's.
const PEER_READ: u16 = 0x2000;
/// Writer record bit: the write was a read-modify-write that commutes with the element's
/// other such writes (any thread, any CTA) but not with its plain reads and writes — a TMA
/// reduction (`cp.reduce.async.bulk`, global) or an atomic (global or shared). The low bits
/// are still the writing thread ([`Shadow::writer`]).
pub(crate) const REDUCED: u16 = 0x4000;
/// ... and, with [`REDUCED`], threads of this CTA not ordered with each other made such
/// writes since the last plain access: the record keeps the newest of their stamps and only
/// a CTA barrier after all of them orders a plain access after them ([`Machine::writer_ordered`]).
const SEVERAL_RMW: u16 = 0x0400;

#[derive(Clone, Copy, Default, Debug)]
struct Shadow {
    w_stamp: u32,
    r_stamp: u32,
    w_tid: u16,
    r_info: u16,
    w_site: u16,
    r_site: u16,
}

/// A shadow record as stored: plain words, so a fresh shadow array is `calloc`ed and
/// the pages of elements never touched (e.g. under `--grid-limit`) cost no memory.
pub(crate) type ShadowWords = [u32; 4];

impl Shadow {
    /// The writing thread of a record that is not a TMA landing ([`LANDED`]).
    fn writer(&self) -> u32 {
        u32::from(self.w_tid & TID_MASK)
    }
    /// How the writer of a record that is not a TMA landing wrote.
    fn wrote(&self) -> &'static str {
        if self.w_tid & SEVERAL_RMW != 0 {
            "atomically updated (one of several unordered threads)"
        } else if self.w_tid & REDUCED != 0 {
            "reduce-added or atomically updated"
        } else {
            "wrote"
        }
    }
    fn unpack(w: ShadowWords) -> Shadow {
        Shadow {
            w_stamp: w[0],
            r_stamp: w[1],
            w_tid: w[2] as u16,
            r_info: (w[2] >> 16) as u16,
            w_site: w[3] as u16,
            r_site: (w[3] >> 16) as u16,
        }
    }
    fn pack(self) -> ShadowWords {
        [
            self.w_stamp,
            self.r_stamp,
            self.w_tid as u32 | (self.r_info as u32) << 16,
            self.w_site as u32 | (self.r_site as u32) << 16,
        ]
    }
}

pub(crate) struct BufMem {
    pub name: String,
    pub space: Space,
    pub dtype: DType,
    pub esize: usize,
    /// Elements (per thread for local buffers).
    pub elems: usize,
    pub data: Vec<u8>,
    pub shadow: Vec<ShadowWords>,
    /// Local buffers: per (thread, element), the `cta_start` stamp of the CTA that last wrote it.
    pub init: Vec<u32>,
    /// Byte offset of a shared buffer in the CTA's shared memory (128-B aligned).
    pub smem_base: u32,
    /// Per element whose reader record is several warpgroup-first threads (`WG_LEADERS`):
    /// each warpgroup's newest read stamp + 1 (0: none), so each reader is ordered on its own.
    pub leaders: Leaders,
    /// Per shared element whose reader record is several readers in more than one warp
    /// (not all warpgroup-first threads), in a kernel that uses mbarriers: each warp's newest
    /// read stamp and reading lane ([`WarpRead`]), so each reading warp is ordered on its own.
    pub warps: WarpReads,
    /// Per global element whose readers are threads of several CTAs running together
    /// ([`PEER_READ`]): each reading CTA (run order) with its newest read stamp.
    pub peer_reads: HashMap<usize, Vec<(u32, u32)>>,
}

/// [`BufMem::leaders`]: per element, each warpgroup's newest read stamp + 1.
pub(crate) type Leaders = HashMap<usize, [u32; MAX_WARPGROUPS]>;

/// Warps in a CTA of at most 1024 threads.
pub(crate) const MAX_WARPS: usize = 32;

/// [`BufMem::warps`]: per element, each warp's reads.
pub(crate) type WarpReads = HashMap<usize, [WarpRead; MAX_WARPS]>;

/// One warp's reads of an element: the newest read stamp + 1 (0: none) and the reading lane,
/// or [`SEVERAL_LANES`] (then every lane of the warp stands for a reader).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct WarpRead {
    stamp1: u32,
    lane: u8,
}

const SEVERAL_LANES: u8 = u8::MAX;

impl WarpRead {
    fn add(&mut self, lane: u8, stamp: u32) {
        self.lane = if self.stamp1 == 0 || self.lane == lane { lane } else { SEVERAL_LANES };
        self.stamp1 = self.stamp1.max(stamp + 1);
    }
}

impl BufMem {
    pub fn describe(&self) -> String {
        let space = match self.space {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local",
        };
        format!("`{}` ({space}, {} × {})", self.name, self.elems, self.dtype)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dir {
    Read,
    /// A shared read through the async proxy (a TMA store's or dsmem copy's source).
    ReadAsync,
    /// A wgmma's shared operand read, recorded under its warpgroup's first thread ([`WGMMA_READ`]).
    ReadWgmma,
    /// A global read through `ld.global.nc`: the element must not be written during the launch.
    ReadNc,
    Write,
    /// A write of the bytes the element holds already: a race with another such write is
    /// deterministic (a warning, not an error).
    WriteSame,
    /// An atomic read-modify-write (`atomicAdd`): against plain accesses a write, with other
    /// atomics (and TMA reductions) of the element no race ([`Machine::shadow_rmw`]).
    Atomic,
}

impl Dir {
    pub(crate) fn is_write(self) -> bool {
        matches!(self, Dir::Write | Dir::WriteSame | Dir::Atomic)
    }

    /// `Write`, or `WriteSame` when `new` equals the element's `old` bytes.
    pub(crate) fn write_of(old: &[u8], new: &[u8]) -> Dir {
        if old == new {
            Dir::WriteSame
        } else {
            Dir::Write
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Dir::Read => "reads",
            Dir::ReadAsync | Dir::ReadWgmma => "reads (async proxy)",
            Dir::ReadNc => "reads (ld.global.nc)",
            Dir::Write | Dir::WriteSame => "writes",
            Dir::Atomic => "atomically updates",
        }
    }
}

/// Sites are kept in 16 bits in the shadow; `u16::MAX` stands for "not recorded".
fn site16(site: u32) -> u16 {
    site.min(u16::MAX as u32) as u16
}

impl Machine<'_> {
    pub(crate) fn who(&self, t: u32) -> Who {
        Who { tid: t, block: self.k.block, cta: self.cta }
    }

    /// The source span of a site recorded in the shadow, if it was recordable.
    fn shadow_site(&self, s: u16) -> Option<tirx_ir::Span> {
        if s == u16::MAX {
            None
        } else {
            self.prog.sites.get(s as usize).copied()
        }
    }

    /// Checks that elements `[idx, idx + n)` lie in buffer `b`; returns `idx` as an element offset.
    #[inline]
    pub(crate) fn bounds(&self, b: u32, t: u32, idx: i64, n: usize, site: u32, what: &str) -> Result<usize, SimError> {
        let elems = self.bufs[b as usize].elems as u64;
        if idx >= 0 && (idx as u64).saturating_add(n as u64) <= elems {
            return Ok(idx as usize);
        }
        Err(self.out_of_bounds(b, t, idx, n, site, what))
    }

    #[cold]
    #[inline(never)]
    fn out_of_bounds(&self, b: u32, t: u32, idx: i64, n: usize, site: u32, what: &str) -> SimError {
        let buf = &self.bufs[b as usize];
        let which = if n == 1 {
            format!("element {idx}")
        } else {
            format!("elements [{idx}, {})", idx.saturating_add(n as i64))
        };
        SimError::new(
            SimErrorKind::OutOfBounds,
            self.prog.sites[site as usize],
            format!("{what} of {} {which} by {}", buf.describe(), self.who(t)),
        )
        .help(format!("valid element indices of `{}` are 0..{}", buf.name, buf.elems))
    }

    /// Checks that a `bytes`-wide access at element `idx` is naturally aligned.
    #[inline]
    pub(crate) fn aligned(
        &self,
        b: u32,
        t: u32,
        idx: usize,
        bytes: usize,
        site: u32,
        what: &str,
    ) -> Result<(), SimError> {
        if (idx * self.bufs[b as usize].esize).is_multiple_of(bytes) {
            return Ok(());
        }
        Err(self.misaligned(b, t, idx, bytes, site, what))
    }

    #[cold]
    #[inline(never)]
    fn misaligned(&self, b: u32, t: u32, idx: usize, bytes: usize, site: u32, what: &str) -> SimError {
        let buf = &self.bufs[b as usize];
        let off = idx * buf.esize;
        SimError::new(
            SimErrorKind::Misaligned,
            self.prog.sites[site as usize],
            format!(
                "misaligned {bytes}-byte {what} of {} at element {idx} (byte offset {off}, not a multiple of {bytes}) by {}",
                buf.describe(),
                self.who(t)
            ),
        )
        .help(format!(
            "a {bytes}-byte access must start at an element index that is a multiple of {}",
            bytes / buf.esize.max(1)
        ))
    }

    /// Byte offset of element `e` of buffer `b` as seen by thread `t`.
    #[inline]
    pub(crate) fn byte_off(&self, b: u32, t: u32, e: usize) -> usize {
        let buf = &self.bufs[b as usize];
        match buf.space {
            Space::Local => (t as usize * buf.elems + e) * buf.esize,
            _ => e * buf.esize,
        }
    }

    /// Shadow bookkeeping for one element access: race checks and uninitialised-read warnings.
    #[inline]
    pub(crate) fn touch(&mut self, b: u32, t: u32, e: usize, dir: Dir, site: u32) -> Result<(), SimError> {
        if self.fam.wg.active {
            self.wgmma_touch(b, t, e, dir, site)?;
        }
        let space = self.bufs[b as usize].space;
        if space == Space::Global && self.fam.griddep.pending(t) {
            return Err(self.before_griddep_wait(b, t, dir.is_write(), site));
        }
        match space {
            Space::Local => {
                let buf = &mut self.bufs[b as usize];
                let slot = t as usize * buf.elems + e;
                if dir.is_write() {
                    buf.init[slot] = self.cta_start;
                } else if buf.init[slot] != self.cta_start {
                    self.warn_uninit(b, t, e, site);
                }
                Ok(())
            }
            Space::Shared if !self.opts.check_races => {
                let stamp = self.cta_start;
                let w_stamp = &mut self.bufs[b as usize].shadow[e][0];
                if dir.is_write() {
                    *w_stamp = stamp;
                } else if *w_stamp < stamp {
                    self.warn_uninit(b, t, e, site);
                }
                Ok(())
            }
            Space::Global if !self.opts.check_races => Ok(()),
            _ => {
                if !self.fam.asy.inflight.is_empty() || !self.fam.asy.inflight_src.is_empty() {
                    if let Some(err) = self.inflight_conflict(b, t, e, dir, site) {
                        return Err(err);
                    }
                }
                match dir {
                    Dir::Read => self.shadow_read(b, t, e, site, Dir::Read),
                    Dir::ReadAsync | Dir::ReadWgmma => self.shadow_read(b, t, e, site, dir),
                    Dir::ReadNc if space == Space::Global => self.shadow_read(b, t, e, site, Dir::ReadNc),
                    Dir::ReadNc => self.shadow_read(b, t, e, site, Dir::Read),
                    Dir::Write => self.shadow_write(b, t, e, site, false),
                    Dir::WriteSame => self.shadow_write(b, t, e, site, true),
                    Dir::Atomic => self.shadow_rmw(b, t, e, site),
                }
            }
        }
    }

    /// The stamp of thread `t`'s accesses now: its warp's last barrier, or its last mbarrier arrive if newer.
    #[inline]
    pub(crate) fn stamp(&self, t: u32) -> u32 {
        self.wsync[(t / 32) as usize].max(self.fam.asy.rel[t as usize])
    }

    /// The writer of a record ordered before thread `t`: a landing only through the
    /// phase of the mbarrier it completed (which `t` acquired, directly or through barriers).
    fn writer_ordered(&self, sh: &Shadow, t: u32) -> bool {
        if sh.w_tid & LANDED != 0 {
            return sh.w_stamp <= self.fam.asy.acquired_landing(t, u32::from(sh.w_tid & !LANDED));
        }
        if sh.w_tid & SEVERAL_RMW != 0 {
            return sh.w_stamp < self.cta_sync;
        }
        self.ordered(sh.writer(), sh.w_stamp, t)
    }

    /// An earlier CTA's write of a global record ordered before thread `t` by a fence's
    /// release `t` acquired (`fence`): a thread's plain store only (a TMA store or an atomic
    /// is not in its thread's release).
    fn plain_write_released(&self, sh: &Shadow, t: u32) -> bool {
        sh.w_tid & (LANDED | REDUCED) == 0 && self.released(Some(sh.writer()), sh.w_stamp, t)
    }

    /// The last generic-proxy (thread) write of element `e` of `b` in this CTA, with race
    /// checking on: `(thread, stamp, site)`. A TMA landing is an async-proxy write: `None`.
    pub(crate) fn last_write(&self, b: u32, e: usize) -> Option<(u32, u32, Option<tirx_ir::Span>)> {
        if !self.opts.check_races || self.bufs[b as usize].space == Space::Local {
            return None;
        }
        let sh = Shadow::unpack(*self.bufs[b as usize].shadow.get(e)?);
        (sh.w_stamp >= self.cta_start && sh.w_stamp != 0 && sh.w_tid & LANDED == 0)
            .then(|| (sh.writer(), sh.w_stamp, self.shadow_site(sh.w_site)))
    }

    pub(crate) fn ordered(&self, p: u32, stamp: u32, t: u32) -> bool {
        stamp < self.cta_sync
            || p == t
            || (p / 32 == t / 32 && stamp < self.wsync[(t / 32) as usize])
            || stamp < self.fam.asy.acquired(t, p)
            || stamp < self.named_synced(t, p)
            || stamp < self.fam.cluster.arrived_before(p, t)
            || (stamp < self.fam.cluster.inits_before(p, t) && self.fam.asy.init_stamps.contains(&stamp))
    }

    /// Whether `stamp` is an access of another CTA of the running cluster: there each CTA's
    /// ticks are its rank modulo the cluster size ([`Machine::tick`]).
    pub(crate) fn foreign(&self, stamp: u32) -> bool {
        let size = self.ctxs.len();
        size > 1 && stamp as usize % size != self.rank
    }

    /// The CTA (run order) whose thread made an access stamped `stamp`, of the CTAs running together.
    fn stamp_cta(&self, stamp: u32) -> usize {
        stamp as usize % self.ctxs.len().max(1)
    }

    /// A global access by thread `p` of another CTA running with this one, stamped `stamp`, is
    /// ordered before thread `t`'s next accesses only by a cluster barrier phase that `t` waited
    /// for and `p` arrived at after the access, or a grid group barrier phase that CTA arrived at
    /// after it and `t`'s CTA passed (directly or through a chain of phases); this simulator
    /// follows no other release/acquire chains through global memory.
    fn peer_ordered(&self, p: u32, stamp: u32, t: u32) -> bool {
        let c = self.stamp_cta(stamp);
        stamp < self.peer_arrived_before(c, p, t).max(self.group_known(c))
    }

    /// What the grid group barriers the running CTA passed say of CTA `c`'s accesses.
    fn group_known(&self, c: usize) -> u32 {
        self.fam.group.known.get(c).copied().unwrap_or(0)
    }

    /// The tick before which every access of CTA `c` (another CTA running with this one) is
    /// ordered before thread `t`'s next ones: its threads' earliest arrive at the last cluster
    /// barrier phase `t` passed, or the grid group barrier phases.
    fn cta_known(&self, c: usize, t: u32) -> u32 {
        self.peer_all_arrived_before(c, t).max(self.group_known(c))
    }

    /// Whether global record `sh` has readers in another CTA of the cluster ([`PEER_READ`], or
    /// its newest reader's stamp).
    fn has_peer_readers(&self, global: bool, sh: &Shadow) -> bool {
        global && (sh.w_tid & PEER_READ != 0 || self.foreign(sh.r_stamp))
    }

    /// Readers of global `b[e]` (record `sh`) in other CTAs ordered before thread `t`: one, as
    /// [`Self::peer_ordered`]; several of one CTA, by what orders all of that CTA's accesses;
    /// readers of several CTAs ([`PEER_READ`]), each CTA's newest read so (this CTA's, by a CTA
    /// barrier or a cluster barrier phase).
    fn peer_readers_ordered(&self, b: u32, e: usize, sh: &Shadow, t: u32) -> bool {
        if sh.w_tid & PEER_READ != 0 {
            let Some(reads) = self.bufs[b as usize].peer_reads.get(&e) else { return false };
            return reads.iter().all(|&(c, s)| self.cta_read_ordered(c, s, t));
        }
        if sh.r_info & MULTI != 0 {
            return sh.r_stamp < self.cta_known(self.stamp_cta(sh.r_stamp), t);
        }
        self.peer_ordered((sh.r_info & TID_MASK) as u32, sh.r_stamp, t)
    }

    /// Reads by CTA `c` (run order), the newest stamped `s`, ordered before thread `t`: this
    /// CTA's by a CTA barrier or a cluster barrier phase since, another's as [`Self::cta_known`].
    fn cta_read_ordered(&self, c: u32, s: u32, t: u32) -> bool {
        let c = c as usize;
        s < if c == self.rank {
            self.cta_sync.max(self.fam.cluster.all_arrived_before(t))
        } else {
            self.cta_known(c, t)
        }
    }

    /// Thread `t`'s read of global `b[e]` at `stamp` joins readers in other CTAs (record `sh`,
    /// not ordered before it): the record's readers become per-CTA entries ([`PEER_READ`]).
    fn note_peer_read(&mut self, b: u32, e: usize, sh: &Shadow, stamp: u32) {
        let first = (sh.w_tid & PEER_READ == 0).then(|| (self.stamp_cta(sh.r_stamp) as u32, sh.r_stamp));
        let me = self.rank as u32;
        let reads = self.bufs[b as usize].peer_reads.entry(e).or_default();
        if let Some(f) = first {
            reads.clear();
            reads.push(f);
        }
        match reads.iter_mut().find(|(c, _)| *c == me) {
            Some(r) => r.1 = r.1.max(stamp),
            None => reads.push((me, stamp)),
        }
    }

    /// Several readers: ordered by a barrier after all of them, or by mbarrier
    /// releases `t` acquired from every thread that may be one of them (its warp
    /// or the CTA); `r_stamp` is the newest of their stamps. Readers that are all
    /// warpgroup-first threads are checked one by one against their own stamps
    /// ([`BufMem::leaders`]), and readers in several warps of a shared buffer in a kernel
    /// with mbarriers warp by warp ([`BufMem::warps`]).
    fn readers_ordered(&self, b: u32, e: usize, sh: &Shadow, t: u32) -> bool {
        let p = (sh.r_info & TID_MASK) as u32;
        // A wgmma's operand reads (under its warpgroup's first thread) are ordered before
        // every thread of that warpgroup ([`WGMMA_READ`]).
        let wgmma = self.bufs[b as usize].space == Space::Shared && sh.r_info & WGMMA_READ != 0;
        let own_warpgroup = |q: u32| q == t || (wgmma && q / WARPGROUP == t / WARPGROUP);
        if sh.r_info & MULTI == 0 {
            return own_warpgroup(p) || self.ordered(p, sh.r_stamp, t);
        }
        let one_warp = sh.r_info & CROSS_WARP == 0;
        let barrier = sh.r_stamp < self.cta_sync
            || sh.r_stamp < self.named_synced_all(t)
            || sh.r_stamp < self.fam.cluster.all_arrived_before(t);
        if sh.r_info & WG_LEADERS != 0 {
            let Some(stamps) = self.bufs[b as usize].leaders.get(&e) else { return barrier };
            return barrier
                || stamps
                    .iter()
                    .zip((0..).step_by(WARPGROUP as usize))
                    .all(|(&s, q)| s == 0 || own_warpgroup(q) || self.ordered(q, s - 1, t));
        }
        if one_warp {
            return barrier || self.lanes_ordered(p / 32, sh.r_stamp, t);
        }
        if self.tracks_warps(b) {
            let Some(reads) = self.bufs[b as usize].warps.get(&e) else { return barrier };
            return barrier
                || reads.iter().zip(0..).all(|(r, w)| match (r.stamp1, r.lane) {
                    (0, _) => true,
                    (s1, SEVERAL_LANES) => self.lanes_ordered(w, s1 - 1, t),
                    (s1, lane) => self.ordered(w * 32 + u32::from(lane), s1 - 1, t),
                });
        }
        barrier || sh.r_stamp < self.fam.asy.acquired_from_all(t, 0..self.n as u32)
    }

    /// The element's readers that its record `sh` (of `b[e]`) knows, each as `(thread, stamp)`:
    /// the one reader; the lanes of the one reading warp at the newest stamp; the warpgroup-first
    /// threads at their own stamps ([`BufMem::leaders`]); the reading warps' lanes at their own
    /// ([`BufMem::warps`]); else every thread at the newest stamp.
    fn readers(&self, b: u32, e: usize, sh: &Shadow) -> Vec<(u32, u32)> {
        let p = (sh.r_info & TID_MASK) as u32;
        if sh.r_info & MULTI == 0 {
            vec![(p, sh.r_stamp)]
        } else if sh.r_info & CROSS_WARP == 0 {
            self.warp_lanes(p / 32).map(|q| (q, sh.r_stamp)).collect()
        } else if sh.r_info & WG_LEADERS != 0 {
            let stamps = self.bufs[b as usize].leaders.get(&e).copied().unwrap_or_default();
            stamps
                .iter()
                .zip((0..).step_by(WARPGROUP as usize))
                .filter(|(&s, _)| s != 0)
                .map(|(&s, q)| (q, s - 1))
                .collect()
        } else if let Some(reads) = self.bufs[b as usize].warps.get(&e) {
            let per_warp = reads.iter().zip(0u32..).filter(|(r, _)| r.stamp1 != 0);
            per_warp
                .flat_map(|(r, w)| {
                    let lanes = match r.lane {
                        SEVERAL_LANES => self.warp_lanes(w),
                        lane => w * 32 + u32::from(lane)..w * 32 + u32::from(lane) + 1,
                    };
                    lanes.map(move |q| (q, r.stamp1 - 1))
                })
                .collect()
        } else {
            (0..self.n as u32).map(|q| (q, sh.r_stamp)).collect()
        }
    }

    /// The threads of warp `w`.
    fn warp_lanes(&self, w: u32) -> std::ops::Range<u32> {
        w * 32..(w * 32 + 32).min(self.n as u32)
    }

    /// Reads by several lanes of warp `w`, the newest stamped `s`, are ordered before thread
    /// `t`: through `t`'s own warp since its last `__syncwarp`, a named barrier of both warps
    /// since, or mbarrier releases `t` acquired from every lane of `w` (a lane's arrive after a
    /// `__syncwarp` releases the whole warp's earlier accesses: `asynch`'s `mbar_arrive`).
    fn lanes_ordered(&self, w: u32, s: u32, t: u32) -> bool {
        (w == t / 32 && s < self.wsync[w as usize])
            || s < self.named_synced(t, w * 32)
            || s < self.fam.asy.acquired_from_all(t, self.warp_lanes(w))
    }

    /// Several readers in more than one warp of shared `b` keep one stamp per warp
    /// ([`BufMem::warps`]) where mbarriers may order them warp by warp.
    fn tracks_warps(&self, b: u32) -> bool {
        self.bufs[b as usize].space == Space::Shared && self.fam.asy.uses_mbarriers()
    }

    /// Records thread `t`'s read of `b[e]` at `stamp` in the element's per-warp stamps
    /// (each + 1), seeding them from the record `sh` it joins unless that already had them.
    fn note_warp_read(&mut self, b: u32, e: usize, sh: &Shadow, t: u32, stamp: u32) {
        let multi = sh.r_info & MULTI != 0;
        let p = (sh.r_info & TID_MASK) as u32;
        let seed = if multi && sh.r_info & CROSS_WARP != 0 {
            // Several warpgroup-first threads (per-warpgroup stamps) become per-warp ones.
            (sh.r_info & WG_LEADERS != 0).then(|| {
                let mut seed = [WarpRead::default(); MAX_WARPS];
                if let Some(l) = self.bufs[b as usize].leaders.get(&e) {
                    for (g, &s) in l.iter().enumerate().filter(|(_, &s)| s != 0) {
                        seed[g * (WARPGROUP as usize / 32)] = WarpRead { stamp1: s, lane: 0 };
                    }
                }
                seed
            })
        } else {
            let mut seed = [WarpRead::default(); MAX_WARPS];
            let lane = if multi { SEVERAL_LANES } else { (p % 32) as u8 };
            seed[(p / 32) as usize] = WarpRead { stamp1: sh.r_stamp + 1, lane };
            Some(seed)
        };
        let reads = self.bufs[b as usize].warps.entry(e).or_default();
        if let Some(seed) = seed {
            *reads = seed;
        }
        reads[(t / 32) as usize].add((t % 32) as u8, stamp);
    }

    /// `dir`: a read (`Read`, `ReadAsync`, `ReadWgmma`, or `ReadNc` of a global element).
    fn shadow_read(&mut self, b: u32, t: u32, e: usize, site: u32, dir: Dir) -> Result<(), SimError> {
        let global = self.bufs[b as usize].space == Space::Global;
        let nc = dir == Dir::ReadNc;
        let generic = matches!(dir, Dir::Read | Dir::ReadNc);
        let wgmma_bit = if dir == Dir::ReadWgmma && !global { WGMMA_READ } else { 0 };
        let sticky = if global { STICKY } else { 0 };
        let sh = Shadow::unpack(self.bufs[b as usize].shadow[e]);
        if nc && sh.w_stamp != 0 {
            return Err(self.nc_conflict(b, t, e, site, sh.w_site));
        }
        if sh.w_stamp < self.cta_start {
            if global && sh.w_stamp != 0 && !self.plain_write_released(&sh, t) {
                return Err(self.cta_race(b, t, e, Dir::Read, site, sh.w_stamp, sh.writer(), sh.w_site, sh.wrote()));
            }
            if !global {
                self.warn_uninit(b, t, e, site);
            }
        } else if global && self.foreign(sh.w_stamp) {
            if !self.peer_ordered(sh.writer(), sh.w_stamp, t) {
                let who = self.peer_thread(sh.writer(), sh.w_stamp);
                return Err(self.peer_race(b, t, e, Dir::Read, site, who, sh.w_site, sh.wrote()));
            }
        } else if !self.writer_ordered(&sh, t) {
            return Err(self.writer_race(b, t, e, Dir::Read, site, &sh));
        }
        let stamp = self.stamp(t);
        let mut rec = sh;
        if global {
            rec.w_tid &= !PEER_READ;
        }
        let generic_bit = if generic { GENERIC_READ } else { 0 };
        if sh.r_stamp >= self.cta_start && self.has_peer_readers(global, &sh) {
            // Readers of another CTA running with this one: a bare record of this thread, or
            // several readers across CTAs (a write is checked against each CTA's).
            rec.r_info = t as u16 | (sh.r_info & sticky) | generic_bit;
            if !self.peer_readers_ordered(b, e, &sh, t) {
                self.note_peer_read(b, e, &sh, stamp);
                rec.r_info |= MULTI | CROSS_WARP | (sh.r_info & GENERIC_READ);
                rec.w_tid |= PEER_READ;
            }
        } else if sh.r_stamp < self.cta_start {
            let old = global && (sh.r_stamp != 0 || sh.r_info & OLD_CTA_READ != 0);
            rec.r_info = t as u16
                | (sh.r_info & sticky & NC_READ)
                | if old { OLD_CTA_READ } else { 0 }
                | generic_bit
                | wgmma_bit;
        } else if self.readers_ordered(b, e, &sh, t) {
            rec.r_info = t as u16 | (sh.r_info & sticky) | generic_bit | wgmma_bit;
        } else {
            let prev = (sh.r_info & TID_MASK) as u32;
            let cross = sh.r_info & CROSS_WARP != 0 || prev / 32 != t / 32;
            let multi = sh.r_info & MULTI != 0;
            let prev_leaders = if multi { sh.r_info & WG_LEADERS != 0 } else { prev.is_multiple_of(WARPGROUP) };
            let leaders = prev_leaders && t.is_multiple_of(WARPGROUP);
            if leaders {
                self.note_leader_read(b, e, (!multi).then_some((prev, sh.r_stamp)), t, stamp);
            } else if cross && self.tracks_warps(b) {
                self.note_warp_read(b, e, &sh, t, stamp);
            }
            // Several wgmma readers only while every one of them is.
            let all_wgmma = if leaders { sh.r_info & wgmma_bit } else { 0 };
            rec.r_info = t as u16
                | MULTI
                | (sh.r_info & (sticky | GENERIC_READ))
                | generic_bit
                | all_wgmma
                | if cross { CROSS_WARP } else { 0 }
                | if leaders { WG_LEADERS } else { 0 };
        }
        if nc {
            rec.r_info |= NC_READ;
        }
        // Several readers keep the newest stamp of all of them (stamps are per thread).
        rec.r_stamp = if rec.r_info & MULTI != 0 { stamp.max(sh.r_stamp) } else { stamp };
        rec.r_site = site16(site);
        self.bufs[b as usize].shadow[e] = rec.pack();
        Ok(())
    }

    /// Records warpgroup-first thread `t`'s read of `b[e]` at `stamp` in the element's
    /// per-warpgroup stamps (each + 1; 0: no read), starting them afresh from `first`,
    /// the single reader before, when a several-leaders record begins.
    fn note_leader_read(&mut self, b: u32, e: usize, first: Option<(u32, u32)>, t: u32, stamp: u32) {
        let stamps = self.bufs[b as usize].leaders.entry(e).or_default();
        if let Some((p, s)) = first {
            *stamps = [0; MAX_WARPGROUPS];
            stamps[(p / WARPGROUP) as usize] = s + 1;
        }
        let slot = &mut stamps[(t / WARPGROUP) as usize];
        *slot = (*slot).max(stamp + 1);
    }

    /// `same`: the write stores the bytes the element holds, so a race with the write that
    /// put them there cannot change the result; it is a warning ([`Self::warn_same_value`]).
    fn shadow_write(&mut self, b: u32, t: u32, e: usize, site: u32, same: bool) -> Result<(), SimError> {
        self.write_ordered(b, t, e, site, same)?;
        let stamp = self.stamp(t);
        self.bufs[b as usize].shadow[e] =
            Shadow { w_stamp: stamp, w_tid: t as u16, w_site: site16(site), ..Shadow::default() }.pack();
        Ok(())
    }

    /// Whether global `b[e]`'s last access is a TMA reduction with no read after it: a
    /// further reduction commutes with it (whichever thread or CTA issued either).
    pub(crate) fn only_reduced(&self, b: u32, e: usize) -> bool {
        let sh = Shadow::unpack(self.bufs[b as usize].shadow[e]);
        sh.w_tid & LANDED == 0 && sh.w_tid & REDUCED != 0 && sh.r_stamp == 0 && sh.r_info == 0
    }

    /// Checks and records an atomic read-modify-write of `b[e]` by thread `t`: after plain
    /// accesses as a write is (it reads and writes); after atomics and reductions only, no
    /// ordering needed — atomics of one element are never a data race, though which thread's
    /// comes first decides what each returns (the simulator runs one order: threads in turn).
    /// Earlier ones of this CTA it is not ordered after make the record [`SEVERAL_RMW`].
    pub(crate) fn shadow_rmw(&mut self, b: u32, t: u32, e: usize, site: u32) -> Result<(), SimError> {
        let sh = Shadow::unpack(self.bufs[b as usize].shadow[e]);
        let after_rmw = self.only_reduced(b, e);
        if !after_rmw {
            self.write_ordered(b, t, e, site, false)?;
        }
        let stamp = self.stamp(t);
        let this_cta = sh.w_stamp >= self.cta_start && !self.foreign(sh.w_stamp);
        let several = after_rmw && this_cta && !self.writer_ordered(&sh, t);
        let (w_stamp, flag) = if several { (stamp.max(sh.w_stamp), SEVERAL_RMW) } else { (stamp, 0) };
        self.bufs[b as usize].shadow[e] =
            Shadow { w_stamp, w_tid: t as u16 | REDUCED | flag, w_site: site16(site), ..Shadow::default() }.pack();
        Ok(())
    }

    /// Checks a TMA reduction of global `b[e]` by thread `t` (issued or landing): against a
    /// plain access as a write is; after reductions only, nothing to order.
    pub(crate) fn reduce_ordered(&mut self, b: u32, t: u32, e: usize, site: u32) -> Result<(), SimError> {
        if self.only_reduced(b, e) {
            return Ok(());
        }
        self.write_ordered(b, t, e, site, false)
    }

    /// Records a TMA reduction of global `b[e]` by thread `t` landing (checked as
    /// [`Self::reduce_ordered`]).
    pub(crate) fn shadow_reduce(&mut self, b: u32, t: u32, e: usize, site: u32) -> Result<(), SimError> {
        if !self.opts.check_races {
            return Ok(());
        }
        self.shadow_rmw(b, t, e, site)
    }

    /// Checks a write of `b[e]` by thread `t` against the element's earlier accesses
    /// (without recording it): an asynchronous copy's write, checked when it is
    /// issued and recorded when it lands ([`Self::land_shadow`]).
    pub(crate) fn write_ordered(&mut self, b: u32, t: u32, e: usize, site: u32, same: bool) -> Result<(), SimError> {
        let global = self.bufs[b as usize].space == Space::Global;
        let sh = Shadow::unpack(self.bufs[b as usize].shadow[e]);
        if sh.w_stamp != 0 {
            let race = if sh.w_stamp < self.cta_start {
                (global && !self.plain_write_released(&sh, t))
                    .then(|| self.cta_race(b, t, e, Dir::Write, site, sh.w_stamp, sh.writer(), sh.w_site, sh.wrote()))
            } else if global && self.foreign(sh.w_stamp) {
                let ordered = self.peer_ordered(sh.writer(), sh.w_stamp, t);
                let who = || self.peer_thread(sh.writer(), sh.w_stamp);
                (!ordered).then(|| self.peer_race(b, t, e, Dir::Write, site, who(), sh.w_site, sh.wrote()))
            } else if !self.writer_ordered(&sh, t) {
                Some(self.writer_race(b, t, e, Dir::Write, site, &sh))
            } else {
                None
            };
            match race {
                Some(err) if same => self.warn_same_value(b, site, err),
                Some(err) => return Err(err),
                None => {}
            }
        }
        if global && sh.r_info & NC_READ != 0 {
            return Err(self.nc_conflict(b, t, e, site, sh.r_site));
        }
        if global && sh.r_info & OLD_CTA_READ != 0 {
            return Err(self.cta_race(b, t, e, Dir::Write, site, 0, u32::MAX, sh.r_site, "read"));
        }
        if sh.r_stamp != 0 {
            if sh.r_stamp < self.cta_start {
                let p = (sh.r_info & TID_MASK) as u32;
                if global && !self.released((sh.r_info & MULTI == 0).then_some(p), sh.r_stamp, t) {
                    return Err(self.cta_race(b, t, e, Dir::Write, site, sh.r_stamp, p, sh.r_site, "read"));
                }
            } else if self.has_peer_readers(global, &sh) {
                if !self.peer_readers_ordered(b, e, &sh, t) {
                    let who = self.peer_reader(b, e, &sh, t);
                    return Err(self.peer_race(b, t, e, Dir::Write, site, who, sh.r_site, "read"));
                }
            } else if !self.readers_ordered(b, e, &sh, t) {
                let multi = sh.r_info & MULTI != 0;
                return Err(self.race(
                    b,
                    t,
                    e,
                    Dir::Write,
                    site,
                    (sh.r_info & TID_MASK) as u32,
                    multi,
                    sh.r_site,
                    "read",
                ));
            }
        }
        Ok(())
    }

    /// An async-proxy write of shared `b[e]` (a TMA load or dsmem copy landing) issued by
    /// thread `t`, after [`Self::write_ordered`] found the element's readers ordered before
    /// it: every reader that read through the generic proxy must also have executed a
    /// `fence.proxy.async` after its read that is ordered before `t` — the two proxies are
    /// not ordered otherwise, and on an H100 a TMA load released by an mbarrier arrive right
    /// after an `ldmatrix` overwrites the stage before the `ldmatrix` read it. Where the
    /// record knows only the reading warp (several lanes of it read), every lane of that warp
    /// needs the fence.
    pub(crate) fn proxy_war_check(&self, b: u32, t: u32, e: usize, site: u32, what: &str) -> Result<(), SimError> {
        self.proxy_war_check_by(b, e, site, &format!("{what} issued by {}", self.who(t)), &|q, f| self.ordered(q, f, t))
    }

    /// [`Self::proxy_war_check`] for the copy `copy` (its description), `before(q, f)` saying
    /// whether thread `q`'s fence at tick `f` is ordered before it (a peer's copy: what its
    /// issuer knew of `q`).
    pub(crate) fn proxy_war_check_by(
        &self,
        b: u32,
        e: usize,
        site: u32,
        copy: &str,
        before: &dyn Fn(u32, u32) -> bool,
    ) -> Result<(), SimError> {
        let sh = Shadow::unpack(self.bufs[b as usize].shadow[e]);
        if sh.r_info & GENERIC_READ == 0 || sh.r_stamp < self.cta_start || sh.r_stamp == 0 {
            return Ok(());
        }
        for (q, stamp) in self.readers(b, e, &sh) {
            let fences = self.fam.asy.proxy_fences(q);
            let next = fences.partition_point(|&f| f <= stamp);
            if fences.get(next).is_some_and(|&f| before(q, f)) {
                continue;
            }
            let why = if next == fences.len() {
                "no `fence.proxy.async` of that thread follows its read"
            } else {
                "the `fence.proxy.async` after its read is not ordered before the copy (fence, then release)"
            };
            let multi = if sh.r_info & MULTI != 0 { " (among the threads that read it)" } else { "" };
            let msg = format!(
                "{copy} writes {} element {e} through the async proxy, but {}{multi} read it through the generic proxy and {why}",
                self.bufs[b as usize].describe(),
                self.who(q)
            );
            let mut err = SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg).help(
                "after its last read of a buffer that a TMA load or dsmem copy refills, every reading thread (each lane of a reading warp) runs `T.ptx.fence.proxy.async_.shared__cta()` before it releases the buffer (the mbarrier arrive, or the `__syncwarp` before one lane's arrive)",
            );
            if let Some(s) = self.shadow_site(sh.r_site) {
                err = err.label(s, "read here");
            }
            return Err(err);
        }
        Ok(())
    }

    /// Checks a write of shared `b[e]` by an asynchronous copy that thread `t` of the
    /// cluster's CTA of rank `rank` issued into this (the running) CTA — a dsmem copy, or
    /// a multicast TMA load landing here — against the element's earlier accesses in
    /// this CTA (without recording it), as [`Self::write_ordered`] does for a copy of this
    /// CTA. `t` numbers a thread of the issuing CTA, so this CTA's rules (same thread,
    /// same warp, its CTA and named barriers, its mbarriers) say nothing about it: a cluster
    /// barrier orders this CTA's accesses before the copy — the last one, which the issuer
    /// passed before issuing (the approximation `peer_barrier_ready` makes) — or what the
    /// issuer knew of this CTA (`known`, the issuer's row of `AsyncState::peer`: per rank, its
    /// accesses stamped before a tick, through a chain of dsmem copies and the mbarrier phases
    /// they completed; per thread of a rank, that thread's, through remote arrives).
    /// An earlier landing here is ordered if it completed before that and every
    /// thread of this CTA acquired it (a waiter then passed the barrier, which joins).
    pub(crate) fn peer_write_ordered(
        &self,
        b: u32,
        (rank, t): (usize, u32),
        e: usize,
        site: u32,
        what: &str,
        known: &[u32],
    ) -> Result<(), SimError> {
        let sh = Shadow::unpack(self.bufs[b as usize].shadow[e]);
        let barrier = known.get(self.rank).copied().unwrap_or(0);
        let of = |q: u32| self.peer_known(known, q);
        let fresh = |stamp: u32| stamp != 0 && stamp >= self.cta_start;
        let (p, other_site, verb, several) = if fresh(sh.w_stamp)
            && !(if sh.w_tid & LANDED == 0 {
                sh.w_stamp < of(sh.writer())
            } else {
                let slot = u32::from(sh.w_tid & !LANDED);
                let acquired_here = (0..self.n as u32).all(|q| sh.w_stamp <= self.fam.asy.acquired_landing(q, slot));
                (sh.w_stamp < barrier && acquired_here)
                    || sh.w_stamp <= known.get(self.peer_landing_slot(self.rank, slot)).copied().unwrap_or(0)
            }) {
            (u32::from(sh.w_tid & !LANDED), sh.w_site, if sh.w_tid & LANDED != 0 { "landed" } else { "wrote" }, false)
        } else if fresh(sh.r_stamp)
            && !self.readers(b, e, &sh).into_iter().all(|(q, s)| s < self.peer_known_reads(known, q))
        {
            ((sh.r_info & TID_MASK) as u32, sh.r_site, "read", sh.r_info & MULTI != 0)
        } else {
            return Ok(());
        };
        let whom = match verb {
            "landed" => format!("an asynchronous copy completing on {}", self.landing_barrier(p)),
            _ => format!("{}{}", self.who(p), if several { " (among other threads)" } else { "" }),
        };
        let msg = format!(
            "{} element {e}: {what} by thread {t} of CTA rank {rank} writes it into CTA ({}, {}, {}), but {whom} {verb} it there and no cluster barrier (or chain of exchanges) orders that before the copy",
            self.bufs[b as usize].describe(),
            self.cta[0],
            self.cta[1],
            self.cta[2],
        );
        let mut err = SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg).help(
            "a copy from another CTA of the cluster is ordered after this CTA's accesses to its destination by a cluster barrier (`T.cuda.cluster_sync()`) after them and before the copy, or by a chain of exchanges: a CTA barrier after the accesses, then a dsmem copy from this CTA completing an mbarrier phase that the copying thread (or its CTA, before a CTA barrier) waited for before the copy; a CTA barrier or mbarrier of the receiving CTA alone does not order it",
        );
        if let Some(s) = self.shadow_site(other_site) {
            err = err.label(s, format!("{verb} here"));
        }
        Err(err)
    }

    /// Records the landing of an asynchronous (TMA) write of `b[e]` issued at `site` and
    /// completing on the mbarrier of slot `slot`, stamped `stamp` (its phase's completion):
    /// the element's earlier accesses were checked at the issue ([`Self::write_ordered`]).
    pub(crate) fn land_shadow(&mut self, b: u32, slot: u32, e: usize, site: u32, stamp: u32) {
        let rec = if self.opts.check_races {
            Shadow { w_stamp: stamp, w_tid: slot as u16 | LANDED, w_site: site16(site), ..Shadow::default() }
        } else {
            Shadow { w_stamp: stamp, ..Shadow::unpack(self.bufs[b as usize].shadow[e]) }
        };
        self.bufs[b as usize].shadow[e] = rec.pack();
    }

    /// A race with the element's last writer: a thread, or a TMA copy's landing.
    fn writer_race(&self, b: u32, t: u32, e: usize, dir: Dir, site: u32, sh: &Shadow) -> SimError {
        if sh.w_tid & LANDED == 0 {
            return self.race(b, t, e, dir, site, sh.writer(), false, sh.w_site, sh.wrote());
        }
        let slot = u32::from(sh.w_tid & !LANDED);
        let bar = self.landing_barrier(slot);
        let acquired = if self.fam.asy.acquired_landing(t, slot) == 0 {
            let others: Vec<String> = self.fam.asy.acquired_slots(t).map(|s| self.landing_barrier(s)).collect();
            match others.is_empty() {
                true => format!("it acquired no phase of {bar}"),
                false => format!(
                    "it acquired no phase of {bar} (only of {}, which does not order this copy)",
                    others.join(", ")
                ),
            }
        } else {
            format!("it acquired only an earlier phase of {bar}")
        };
        let mut err = SimError::new(
            SimErrorKind::DataRace,
            self.prog.sites[site as usize],
            format!(
                "{} element {e}: {} {} it, but a TMA copy completing on {bar} wrote it, and this thread has not waited for the mbarrier phase that copy completed: {acquired}",
                self.bufs[b as usize].describe(),
                self.who(t),
                dir.verb()
            ),
        )
        .help(format!("wait for the copy's phase of {bar} (`T.ptx.mbarrier.try_wait`) before touching its destination, or order this access after a thread that waited for it (a barrier)"));
        if let Some(s) = self.shadow_site(sh.w_site) {
            err = err.label(s, format!("the TMA copy completing on {bar} issued here"));
        }
        err
    }

    /// The mbarrier of landing slot `slot`, for reports: "`bar[1]`".
    fn landing_barrier(&self, slot: u32) -> String {
        match self.fam.asy.slots.get(slot as usize) {
            Some(&(bar, e)) => format!("`{}[{e}]`", self.bufs[bar as usize].name),
            None => "its mbarrier".to_string(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn race(
        &self,
        b: u32,
        t: u32,
        e: usize,
        dir: Dir,
        site: u32,
        other: u32,
        several: bool,
        other_site: u16,
        other_verb: &str,
    ) -> SimError {
        let buf = &self.bufs[b as usize];
        let others = if several { " (among other threads)" } else { "" };
        let other_who = self.who(other);
        let mut err = SimError::new(
            SimErrorKind::DataRace,
            self.prog.sites[site as usize],
            format!(
                "{} element {e}: {} {} it, but {other_who}{others} {other_verb} it in the same barrier interval",
                buf.describe(),
                self.who(t),
                dir.verb()
            ),
        )
        .help(if self.fam.asy.uses_mbarriers() {
            "order the two accesses with `T.cuda.cta_sync()`, or with an mbarrier: the first thread arrives after its access, the second waits for that phase before its own"
        } else {
            "order the two accesses with `T.cuda.cta_sync()` (or `T.cuda.warp_sync()` when both threads are in one warp)"
        });
        if let Some(s) = self.shadow_site(other_site) {
            err = err.label(s, format!("{other_verb} here by thread {other}{others}"));
        }
        err
    }

    /// A conflict with an earlier CTA (`other == u32::MAX`: some earlier CTA, thread unknown).
    #[allow(clippy::too_many_arguments)]
    fn cta_race(
        &self,
        b: u32,
        t: u32,
        e: usize,
        dir: Dir,
        site: u32,
        stamp: u32,
        other: u32,
        other_site: u16,
        other_verb: &str,
    ) -> SimError {
        let buf = &self.bufs[b as usize];
        let other_who = match (self.cta_of_stamp(stamp), other) {
            (Some(cta), p) if p != u32::MAX => Who { tid: p, block: self.k.block, cta }.to_string(),
            _ => "an earlier CTA".to_string(),
        };
        let mut err = SimError::new(
            SimErrorKind::DataRace,
            self.prog.sites[site as usize],
            format!(
                "{} element {e}: {} {} it, but {other_who} {other_verb} it; CTAs of one launch are not ordered",
                buf.describe(),
                self.who(t),
                dir.verb()
            ),
        )
        .help(format!(
            "make every CTA write a part of `{}` that no other CTA reads or writes, or order the two: the first CTA's \
             threads meet at a barrier after their accesses and one of them calls `T.cuda.thread_fence()`, then an \
             atomic; the second's atomic on that element, then `T.cuda.thread_fence()`, precede its access",
            buf.name
        ));
        if let Some(s) = self.shadow_site(other_site) {
            err = err.label(s, format!("{other_verb} here by {other_who}"));
        }
        err
    }

    /// Thread `p` of the CTA that made `stamp` (another CTA running with this one).
    fn peer_thread(&self, p: u32, stamp: u32) -> String {
        match self.cta_of_stamp(stamp) {
            Some(cta) => Who { tid: p, block: self.k.block, cta }.to_string(),
            None => "a thread of another CTA".to_string(),
        }
    }

    /// Who of another CTA read global `b[e]` (record `sh`) unordered before thread `t`: the
    /// reader, or some threads of the first reading CTA not ordered.
    fn peer_reader(&self, b: u32, e: usize, sh: &Shadow, t: u32) -> String {
        let several = |stamp: u32| match self.cta_of_stamp(stamp) {
            Some([x, y, z]) => format!("threads of CTA ({x}, {y}, {z})"),
            None => "threads of another CTA".to_string(),
        };
        if sh.w_tid & PEER_READ != 0 {
            let unordered = |&&(c, s): &&(u32, u32)| !self.cta_read_ordered(c, s, t);
            return match self.bufs[b as usize].peer_reads.get(&e).and_then(|r| r.iter().find(unordered)) {
                Some(&(c, _)) if c as usize == self.rank => "other threads of this CTA".to_string(),
                Some(&(_, s)) => several(s),
                None => "threads of other CTAs".to_string(),
            };
        }
        if sh.r_info & MULTI != 0 {
            return several(sh.r_stamp);
        }
        self.peer_thread((sh.r_info & TID_MASK) as u32, sh.r_stamp)
    }

    /// A global access by thread `t` unordered with one of `other` (threads of another CTA
    /// running with this one).
    #[allow(clippy::too_many_arguments)]
    fn peer_race(
        &self,
        b: u32,
        t: u32,
        e: usize,
        dir: Dir,
        site: u32,
        other: String,
        other_site: u16,
        other_verb: &str,
    ) -> SimError {
        let buf = &self.bufs[b as usize];
        let (barrier, fix) = if self.k.cooperative() {
            (
                "no grid group barrier orders the two (a phase that CTA arrived at after its access, which this CTA passed, directly or through a chain of phases)",
                "`T.cuda.grid_group_sync` phases both CTAs take part in",
            )
        } else {
            (
                "no cluster barrier orders the two (its thread arrives after its access, this one waits before)",
                "`T.cuda.cluster_sync()`",
            )
        };
        let mut err = SimError::new(
            SimErrorKind::DataRace,
            self.prog.sites[site as usize],
            format!("{} element {e}: {} {} it, but {other} {other_verb} it and {barrier}", buf.describe(), self.who(t), dir.verb()),
        )
        .help(format!(
            "order the CTAs' accesses to `{}` with {fix} between them, or make every CTA access a part that no other CTA writes",
            buf.name
        ));
        if let Some(s) = self.shadow_site(other_site) {
            err = err.label(s, format!("{other_verb} here by {other}"));
        }
        err
    }

    /// An element both written and read through `ld.global.nc` in one launch.
    fn nc_conflict(&self, b: u32, t: u32, e: usize, site: u32, other_site: u16) -> SimError {
        let buf = &self.bufs[b as usize];
        let mut err = SimError::new(
            SimErrorKind::DataRace,
            self.prog.sites[site as usize],
            format!(
                "{} element {e} is both written and read through the read-only path (ld.global.nc) in one launch (seen at {})",
                buf.describe(),
                self.who(t)
            ),
        )
        .help(format!("drop cache=\"nc\" for `{}`: the non-coherent path may return stale data for memory the kernel writes", buf.name));
        if let Some(s) = self.shadow_site(other_site) {
            err = err.label(s, "the other access");
        }
        err
    }

    pub(crate) fn cta_of_stamp(&self, stamp: u32) -> Option<[u32; 3]> {
        if stamp == 0 {
            return None;
        }
        let i = self.cta_starts.partition_point(|(s, _)| *s <= stamp).checked_sub(1)?;
        // A cluster's CTAs start in rank order and stamp in turn: the rank is the stamp's residue.
        let size = self.ctxs.len().max(1);
        self.cta_starts.get(i - i % size + stamp as usize % size).map(|c| c.1)
    }

    /// Unordered writes of one value to one element (every thread of two CTAs storing the
    /// same copy): deterministic, so a warning per site, not an error.
    fn warn_same_value(&mut self, b: u32, site: u32, race: SimError) {
        if let Some(i) = self.warn_same_at.get(&(site, b)) {
            self.warnings[*i].count += 1;
            return;
        }
        let w = SimWarning {
            span: race.span,
            message: format!(
                "{} (the same value, so the result does not depend on the order; the writes are redundant)",
                race.message.replacen("element", "unordered writes of element", 1)
            ),
            count: 1,
        };
        self.warn_same_at.insert((site, b), self.warnings.len());
        self.warnings.push(w);
    }

    pub(crate) fn warn_uninit(&mut self, b: u32, t: u32, e: usize, site: u32) {
        if let Some(i) = self.warn_at.get(&(site, b)) {
            self.warnings[*i].count += 1;
            return;
        }
        let buf = &self.bufs[b as usize];
        let whom = if buf.space == Space::Local { "this thread" } else { "any thread of the CTA" };
        let w = SimWarning {
            span: self.prog.sites[site as usize],
            message: format!(
                "read of {} element {e} before {whom} wrote it (first by {}); the value is undefined on a GPU",
                buf.describe(),
                self.who(t)
            ),
            count: 1,
        };
        self.warn_at.insert((site, b), self.warnings.len());
        self.warnings.push(w);
    }
}
