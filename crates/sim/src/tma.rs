//! Simulator of the TMA instructions of the asynchronous family (`docs/lir.md`
//! §2.13): tensor loads completing on mbarriers, tensor stores in bulk groups.
//!
//! *The box.* A copy moves the box of its tensor map at the instruction's
//! coordinates: box element `j` (box-linear, innermost dimension fastest) is
//! global element `c + digits(j)` of the map's view, and shared byte
//! `swz(start + j · size)` where `swz` XORs address bits `[4, 4+s)` with bits
//! `[7, 7+s)` for the 32/64/128-byte swizzles (`s` = 1, 2, 3) — the hardware's
//! pattern, on offsets from the buffer's start (which the LIR aligns to the
//! pattern's repeat, so they are the shared addresses' bits). Elements outside
//! the map's dims are not read: a load fills them with zeros (or NaN when the map
//! asks), a store skips them (clipping).
//!
//! *Loads* read the global box when issued (race shadow: the issuing thread's
//! reads), check the destination's earlier accesses as the issuing thread's
//! writes, and hold the bytes: the destination is in flight (any access is a race
//! naming the copy) until the barrier's current phase completes. The copy
//! completes its bytes on that phase at issue (`tx -= bytes`; the count may go
//! negative until `expect_tx` adds them); when the phase has all its arrivals and
//! `tx` is 0 it completes and every copy attached to it lands, stamped as a
//! landing on that barrier (`memory::LANDED`, with the barrier's slot and the
//! phase's completion tick) that only threads that waited for that phase of that
//! barrier — or synchronised with one that did — may touch (`asynch`, *Ordering*). A phase short
//! of bytes (a missing or too small `expect_tx`, a copy into the wrong barrier)
//! never completes: its waiters deadlock, and the report says how many bytes are
//! missing or extra; copies still attached when every thread has exited never
//! landed, an error at the copy.
//!
//! *Stores* read the shared box when issued — each element must have been written
//! by a thread that ran `fence.proxy.async` afterwards (or by a TMA load) — and
//! join the thread's open bulk group. `cp.async.bulk.commit_group` closes it;
//! `wait_group.read n` releases the sources of all but the newest `n` groups
//! (writing one before is a race naming the store), `wait_group n` also lands
//! their global writes (reading one before is a race). A thread exiting with a
//! store whose source reads it has not waited for is an error; writes still
//! pending at exit land then (the launch's end makes them visible).

use crate::asynch::{CopyKind, Flight, TMA_STORE_READER};
use crate::compile::{Compiler, Reg};
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::memory::Dir;
use tirx_ir::lir::{TensorMap, TmaCopy};
use tirx_ir::DType;

#[derive(Clone, Debug)]
pub(crate) struct TmaIns {
    pub site: u32,
    load: bool,
    map: u32,
    coords: Vec<Reg>,
    smem: u32,
    smem_idx: Reg,
    /// The barrier of a load: buffer and index register.
    bar: Option<(u32, Reg)>,
    /// `.multicast::cluster`: the CTA mask (`cluster`).
    mask: Option<Reg>,
    /// A store that adds into global memory (`cp.reduce.async.bulk.tensor .add`).
    reduce: bool,
}

impl TmaIns {
    pub(crate) fn name(&self) -> &'static str {
        match (self.load, self.reduce) {
            (true, _) => "cp.async.bulk.tensor (TMA load)",
            (false, true) => "cp.reduce.async.bulk.tensor (TMA reduce-add)",
            (false, false) => "cp.async.bulk.tensor (TMA store)",
        }
    }

    pub(crate) fn for_each_reg(&mut self, mut f: impl FnMut(&mut Reg)) {
        self.coords.iter_mut().for_each(&mut f);
        f(&mut self.smem_idx);
        if let Some((_, r)) = &mut self.bar {
            f(r);
        }
        if let Some(r) = &mut self.mask {
            f(r);
        }
    }
}

/// A TMA load waiting for its mbarrier phase: the shared elements it writes and their bytes.
#[derive(Clone, Debug)]
pub(crate) struct Landing {
    pub site: u32,
    pub issuer: u32,
    pub buf: u32,
    pub elems: Vec<usize>,
    pub data: Vec<u8>,
    pub bytes: u64,
    /// A dsmem copy: its index in the cluster's `peer_copies`.
    pub peer: Option<usize>,
    /// What the copy's completion releases of the cluster's CTAs, per rank: its issuer's
    /// knowledge (`AsyncState::peer`) and the issuing CTA's last CTA barrier (dsmem copies; empty
    /// for TMA loads).
    pub known: Vec<u32>,
}

/// A TMA store in a bulk group: the shared elements it read, the global elements it writes.
#[derive(Clone, Debug)]
pub(crate) struct BulkStore {
    site: u32,
    src: u32,
    src_elems: Vec<usize>,
    dst: u32,
    dst_elems: Vec<usize>,
    data: Vec<u8>,
    /// Added into `dst` when it lands (a reduction), not written over it.
    reduce: bool,
}

/// A committed bulk group; `read` once `wait_group.read` released its sources.
#[derive(Clone, Debug)]
pub(crate) struct BulkGroup {
    pub stores: Vec<BulkStore>,
    pub read: bool,
}

/// One box element: its first shared element and, inside the map's dims, its first
/// global element (a map element may span several buffer elements, a different
/// number on each side: the checker only makes it a whole number of each).
struct BoxElem {
    smem: usize,
    global: Option<usize>,
}

impl Compiler<'_> {
    pub(crate) fn tma(&mut self, c: &TmaCopy, load: bool) -> Result<TmaIns, crate::error::SimError> {
        let map = c.map.0;
        if self.k.tmaps.get(map as usize).is_none() {
            return Err(self.invalid(format!("TMA copy of tensor map #{map}, which does not exist")));
        }
        let coords = c.coords.iter().map(|e| self.expr_as(e, DType::I32)).collect::<Result<Vec<_>, _>>()?;
        let smem = self.buf(c.smem)?;
        let smem_idx = self.index(&c.smem_index)?;
        let bar = match &c.bar {
            Some(b) => Some((self.mbar_buf(b)?, self.index(&b.index)?)),
            None => None,
        };
        let mask = c.multicast.as_ref().map(|m| self.expr_as(m, DType::I32)).transpose()?;
        Ok(TmaIns { site: self.site(), load, map, coords, smem, smem_idx, bar, mask, reduce: c.reduce.is_some() })
    }
}

/// `a` with bits `[4, 4+s)` XORed with bits `[7, 7+s)`: the TMA swizzle of mode `s`.
pub(crate) fn swizzle_bytes(a: usize, mode: u8) -> usize {
    if mode == 0 {
        return a;
    }
    let mask = (1usize << mode) - 1;
    a ^ (((a >> 7) & mask) << 4)
}

/// The bit pattern the TMA unit fills an out-of-bounds element with under `oob="nan"`:
/// 0x7ff7 in every 16-bit half (a NaN in f16, bf16, f32 and f64 alike; an H100 fills f32
/// with 0x7ff77ff7).
fn nan_bytes(size: usize) -> Vec<u8> {
    0x7ff7u16.to_le_bytes().repeat(size / 2)
}

/// What a phase short of (or over) its bytes misses, for a deadlock report.
pub(crate) fn missing_bytes(tx: i64, copies: &[Landing]) -> String {
    let delivered: u64 = copies.iter().map(|c| c.bytes).sum();
    let announced = delivered as i64 + tx;
    match tx {
        0 => String::new(),
        t if t > 0 && copies.is_empty() => format!(
            "; {t} transaction bytes are still missing (expect_tx announced them, but no TMA copy completes on this barrier in this phase)"
        ),
        t if t > 0 => format!(
            "; {t} transaction bytes are still missing (expect_tx announced {announced} bytes, the TMA copies in this phase deliver {delivered}: a wrong byte count)"
        ),
        t => format!(
            "; its TMA copies delivered {delivered} bytes, {} more than expect_tx announced ({announced}): a missing or too small mbarrier.arrive.expect_tx",
            -t
        ),
    }
}

impl Machine<'_> {
    pub(crate) fn tma(&mut self, t: u32, base: usize, x: &TmaIns) -> Result<(), SimError> {
        let r = |reg: Reg| self.regs[base + reg as usize] as i64;
        let coords: Vec<i64> = x.coords.iter().map(|&c| r(c) as i32 as i64).collect();
        let start = r(x.smem_idx);
        let map = &self.k.tmaps[x.map as usize];
        let elems = self.tma_box(t, x, map, &coords, start)?;
        if x.load {
            let (bar, idx) = x.bar.map_or((0, 0), |(b, i)| (b, r(i)));
            let mask = x.mask.map(r);
            self.tma_load(t, x, (bar, idx), elems, mask)
        } else {
            self.tma_store(t, x, elems)
        }
    }

    /// The box of `map` at `coords` against shared buffer `x.smem` from element `start`.
    fn tma_box(
        &self,
        t: u32,
        x: &TmaIns,
        map: &TensorMap,
        coords: &[i64],
        start: i64,
    ) -> Result<Vec<BoxElem>, SimError> {
        let site = x.site;
        let (dims, map_strides) = map.const_dims().zip(map.const_strides()).ok_or_else(|| {
            SimError::new(
                SimErrorKind::InvalidKernel,
                self.prog.sites[site as usize],
                "a tensor map of a launch has symbolic dims or strides",
            )
        })?;
        let (sb, gb) = (&self.bufs[x.smem as usize], &self.bufs[map.buf.0 as usize]);
        let size = map.dtype.bytes() as usize;
        let align = tirx_ir::lir::tmap::swizzle_repeat(map.swizzle) as usize;
        let total = map.box_elems() as usize;
        let s = self.bounds(x.smem, t, start, total * size / sb.esize, site, "TMA shared box")?;
        self.aligned(x.smem, t, s, align, site, "TMA shared box")?;
        let strides: Vec<i64> = std::iter::once(size as i64).chain(map_strides).collect();
        let mut out = Vec::with_capacity(total);
        let mut digits = vec![0i64; map.rank()];
        for j in 0..total {
            let mut inside = true;
            // i128: dims up to 2^32 times strides up to 2^40 over 5 dims overflow i64.
            let mut off = i128::from(map.base_offset);
            for (k, &b) in digits.iter().enumerate() {
                let g = coords[k] + b;
                inside &= (0..dims[k]).contains(&g);
                off += i128::from(g) * i128::from(strides[k]);
            }
            let global = if inside {
                // An element past i64 is past every buffer: `bounds` reports it (saturated).
                let e = i64::try_from(off / gb.esize as i128).unwrap_or(i64::MAX);
                Some(self.bounds(map.buf.0, t, e, size / gb.esize, site, "TMA global box")?)
            } else {
                None
            };
            let smem = swizzle_bytes(s * sb.esize + j * size, map.swizzle) / sb.esize;
            out.push(BoxElem { smem, global });
            for (k, d) in digits.iter_mut().enumerate() {
                *d += 1;
                if *d < i64::from(map.boxes[k]) {
                    break;
                }
                *d = 0;
            }
        }
        Ok(out)
    }

    fn tma_load(
        &mut self,
        t: u32,
        x: &TmaIns,
        (bar, idx): (u32, i64),
        box_: Vec<BoxElem>,
        mask: Option<i64>,
    ) -> Result<(), SimError> {
        let site = x.site;
        let map = &self.k.tmaps[x.map as usize];
        let (gbuf, nan) = (map.buf.0, map.oob_nan);
        let sesize = self.bufs[x.smem as usize].esize;
        let per = map.dtype.bytes() as usize / sesize;
        let gper = map.dtype.bytes() as usize / self.bufs[gbuf as usize].esize;
        let e = self.bounds(bar, t, idx, 1, site, "TMA load's mbarrier")?;
        if !self.fam.asy.bars.contains_key(&(bar, e)) {
            let msg = format!(
                "TMA load by {} completes on `{}[{e}]`, which no thread of this CTA initialised",
                self.who(t),
                self.bufs[bar as usize].name
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg)
                .help("initialise the barrier with mbarrier.init (one thread), then a CTA barrier, before the copy"));
        }
        self.touch(bar, t, e, Dir::Read, site)?;
        let size = per * sesize;
        let fill = if nan { nan_bytes(size) } else { vec![0; size] };
        let mut elems = Vec::with_capacity(box_.len() * per);
        let mut data = Vec::with_capacity(box_.len() * size);
        let mut tmp = [0u8; 8];
        for b in &box_ {
            match b.global {
                Some(g) => {
                    self.read_raw(gbuf, t, g, gper, site, &mut tmp[..size])?;
                    data.extend_from_slice(&tmp[..size]);
                }
                None => data.extend_from_slice(&fill),
            }
            elems.extend(b.smem..b.smem + per);
        }
        let Some(mask) = mask else {
            return self.attach_landing(t, site, x.smem, elems, data, (bar, e), (CopyKind::TmaLoad, None), (None, &[]));
        };
        let size = self.cluster_size();
        if !(1..1i64 << size).contains(&mask) {
            let msg = format!(
                "multicast TMA load by {} with cta_mask {mask:#x}; the cluster has {size} CTAs (mask bits 0..{})",
                self.who(t),
                size - 1
            );
            return Err(SimError::new(SimErrorKind::OutOfBounds, self.prog.sites[site as usize], msg));
        }
        let (me, phase) = (self.rank, self.fam.cluster.passed(t));
        // What orders a peer's earlier accesses to its stage before the landing there: the
        // cluster barrier, or what the issuer learnt of that CTA (its consumers' remote arrives).
        let known = self.peer_knowledge(t);
        for r in (0..size).filter(|r| mask >> r & 1 == 1) {
            self.switch_to(r);
            let ready = if r == me {
                self.fam.asy.bars.contains_key(&(bar, e))
            } else {
                self.peer_barrier_ready(bar, e, phase)
            };
            let res = if ready {
                let from = (r != me).then_some(me);
                self.attach_landing(
                    t,
                    site,
                    x.smem,
                    elems.clone(),
                    data.clone(),
                    (bar, e),
                    (CopyKind::TmaLoad, from),
                    (None, if r == me { &[] } else { &known }),
                )
            } else {
                let msg = format!(
                    "multicast TMA load by thread {t} of CTA rank {me} completes on `{}[{e}]` of CTA rank {r}, which is not initialised before a cluster barrier the load follows",
                    self.bufs[bar as usize].name
                );
                Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg).help(
                    "initialise the barrier in every CTA of the mask, then a cluster barrier, before the multicast",
                ))
            };
            self.switch_to(me);
            res.map_err(|mut e| {
                if r != me {
                    // The report names the issuing thread as if it were of the receiving CTA.
                    e.message.push_str(&format!(
                        " (the access is the multicast TMA load by thread {t} of CTA rank {me}, landing in CTA rank {r})"
                    ));
                }
                e
            })?;
        }
        Ok(())
    }

    /// Writes a TMA load's bytes into shared memory, stamped `tick` (its phase's completion)
    /// and the slot of the barrier it completed on.
    pub(crate) fn land_tma(&mut self, c: &Landing, slot: u32, tick: u32) -> Result<(), SimError> {
        if let Some(p) = c.peer.and_then(|i| self.peer_copies.get_mut(i)) {
            p.landed = Some(tick);
        }
        let esize = self.bufs[c.buf as usize].esize;
        for (i, &e) in c.elems.iter().enumerate() {
            self.fam.asy.inflight.remove(&(c.buf, e));
            let off = self.byte_off(c.buf, c.issuer, e);
            self.bufs[c.buf as usize].data[off..off + esize].copy_from_slice(&c.data[i * esize..(i + 1) * esize]);
            self.land_shadow(c.buf, slot, e, c.site, tick);
        }
        Ok(())
    }

    fn tma_store(&mut self, t: u32, x: &TmaIns, box_: Vec<BoxElem>) -> Result<(), SimError> {
        let site = x.site;
        let map = &self.k.tmaps[x.map as usize];
        let gbuf = map.buf.0;
        let sesize = self.bufs[x.smem as usize].esize;
        let per = map.dtype.bytes() as usize / sesize;
        let gper = map.dtype.bytes() as usize / self.bufs[gbuf as usize].esize;
        let size = per * sesize;
        let mut store = BulkStore {
            site,
            src: x.smem,
            src_elems: vec![],
            dst: gbuf,
            dst_elems: vec![],
            data: vec![],
            reduce: x.reduce,
        };
        let mut tmp = [0u8; 8];
        for b in &box_ {
            if self.opts.check_races {
                for e in b.smem..b.smem + per {
                    self.proxy_check(x.smem, e, t, site, TMA_STORE_READER)?;
                }
            }
            // The TMA store reads through the async proxy.
            self.read_raw_via(x.smem, t, b.smem, per, Dir::ReadAsync, site, &mut tmp[..size])?;
            store.src_elems.extend(b.smem..b.smem + per);
            let Some(g) = b.global else { continue };
            store.data.extend_from_slice(&tmp[..size]);
            store.dst_elems.extend(g..g + gper);
        }
        if self.opts.check_races {
            let kind = if x.reduce { CopyKind::TmaReduce } else { CopyKind::TmaStore };
            let f = Flight { t, site, kind };
            for &e in &store.src_elems {
                self.hold_source(x.smem, e, f);
            }
            for &g in &store.dst_elems {
                // Reductions in flight to one element commute with each other.
                let both_reduce =
                    x.reduce && self.fam.asy.inflight.get(&(gbuf, g)).is_some_and(|p| p.kind == CopyKind::TmaReduce);
                if !both_reduce {
                    if let Some(err) = self.inflight_conflict(gbuf, t, g, Dir::Write, site) {
                        return Err(err);
                    }
                }
                if x.reduce {
                    self.reduce_ordered(gbuf, t, g, site)?;
                } else {
                    self.write_ordered(gbuf, t, g, site, false)?;
                }
                self.fam.asy.inflight.insert((gbuf, g), f);
            }
        }
        self.fam.asy.bulk_open[t as usize].push(store);
        Ok(())
    }

    /// `cp.async.bulk.wait_group[.read] n`: all but the newest `n` committed groups
    /// release their sources; without `.read` their global writes land too.
    pub(crate) fn bulk_wait(&mut self, t: u32, n: usize, read: bool) -> Result<(), SimError> {
        let count = self.fam.asy.bulk_groups[t as usize].len().saturating_sub(n);
        for i in 0..count {
            if !self.fam.asy.bulk_groups[t as usize][i].read {
                self.fam.asy.bulk_groups[t as usize][i].read = true;
                let stores = self.fam.asy.bulk_groups[t as usize][i].stores.clone();
                for s in &stores {
                    for &e in &s.src_elems {
                        self.release_source(s.src, e);
                    }
                }
            }
        }
        if read {
            return Ok(());
        }
        for _ in 0..count {
            if let Some(g) = self.fam.asy.bulk_groups[t as usize].pop_front() {
                g.stores.iter().try_for_each(|s| self.land_store(t, s))?;
            }
        }
        Ok(())
    }

    /// A store's global writes land (the issuing thread's writes, now); a reduction's
    /// elements are added to what global memory holds now (in the simulator's CTA order).
    fn land_store(&mut self, t: u32, s: &BulkStore) -> Result<(), SimError> {
        let (esize, dtype) = (self.bufs[s.dst as usize].esize, self.bufs[s.dst as usize].dtype);
        for (i, &g) in s.dst_elems.iter().enumerate() {
            self.fam.asy.inflight.remove(&(s.dst, g));
            let bytes = &s.data[i * esize..(i + 1) * esize];
            if !s.reduce {
                self.write_raw(s.dst, t, g, 1, s.site, bytes)?;
                continue;
            }
            self.shadow_reduce(s.dst, t, g, s.site)?;
            let off = self.byte_off(s.dst, t, g);
            let old = &mut self.bufs[s.dst as usize].data[off..off + esize];
            let sum =
                crate::value::add_elem(dtype, crate::value::decode(dtype, old), crate::value::decode(dtype, bytes));
            crate::value::encode(dtype, sum, old);
        }
        Ok(())
    }

    /// At exit: every TMA store's source reads were waited for; pending writes land.
    pub(crate) fn bulk_exit(&mut self, t: u32) -> Result<(), SimError> {
        let open = &self.fam.asy.bulk_open[t as usize];
        let unread = self.fam.asy.bulk_groups[t as usize].iter().filter(|g| !g.read).flat_map(|g| &g.stores);
        if let Some(first) = open.first().or_else(|| unread.clone().next()) {
            let mut pending = vec![];
            if !open.is_empty() {
                pending.push(format!("{} TMA store(s) not committed (cp.async.bulk.commit_group)", open.len()));
            }
            let n = unread.count();
            if n > 0 {
                pending.push(format!(
                    "{n} TMA store(s) whose shared source reads were not waited for (cp.async.bulk.wait_group.read)"
                ));
            }
            let msg = format!(
                "{} exits with {}; the CTA's shared memory may be gone before they read it",
                self.who(t),
                pending.join(" and ")
            );
            return Err(SimError::new(SimErrorKind::AsyncCopy, self.prog.sites[first.site as usize], msg)
                .help("end every batch of TMA stores with cp.async.bulk.commit_group and cp.async.bulk.wait_group.read 0 before the thread exits"));
        }
        let groups = std::mem::take(&mut self.fam.asy.bulk_groups[t as usize]);
        groups.iter().flat_map(|g| &g.stores).try_for_each(|s| self.land_store(t, s))
    }

    /// When every thread has exited: a TMA load still attached to a phase never landed.
    pub(crate) fn tma_unlanded(&self) -> Option<SimError> {
        let mut keys: Vec<&(u32, usize)> = self.fam.asy.bars.keys().collect();
        keys.sort();
        let (key, b) =
            keys.into_iter().find_map(|k| self.fam.asy.bars.get(k).filter(|b| !b.copies.is_empty()).map(|b| (k, b)))?;
        let c = &b.copies[0];
        let msg = format!(
            "the TMA load into `{}` issued by thread {} of CTA ({}, {}, {}) never completed: mbarrier `{}[{}]` is still in phase {} with {} of {} arrivals missing{}, and every thread has exited",
            self.bufs[c.buf as usize].name,
            c.issuer,
            self.cta[0],
            self.cta[1],
            self.cta[2],
            self.bufs[key.0 as usize].name,
            key.1,
            b.phase,
            b.pending,
            b.count,
            missing_bytes(b.tx, &b.copies)
        );
        Some(SimError::new(SimErrorKind::AsyncCopy, self.prog.sites[c.site as usize], msg).help(
            "announce a load's bytes with mbarrier.arrive.expect_tx on the barrier it completes on, and wait for that phase before the data is used",
        ))
    }
}
