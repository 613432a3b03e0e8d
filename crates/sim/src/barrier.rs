//! Simulator of named barriers (`bar.sync id, threads`, `bar.arrive`: the
//! synchronisation family, `docs/lir.md` §2.1, §2.12).
//!
//! A thread evaluates the id and waits. When no thread can run, the threads
//! waiting on one id pass together once they are exactly `threads` threads in
//! whole warps. More threads than that waiting on one id at once is a
//! collision (two groups sharing an id: a GPU releases whichever `threads`
//! arrive first) and an error; fewer, when nothing else can run, is a hang,
//! reported naming who waits where.
//!
//! `bar.arrive id, threads` counts the arriving threads towards the barrier
//! without waiting: the barrier passes once the waiting and the arrived threads
//! together are exactly `threads` in whole warps (checked as each one arrives
//! and when nothing can run). Waiters acquire what the arrivals release (their
//! accesses before the arrive, and what the arriving threads had acquired by
//! then: mbarrier releases and TMA landings they waited for, so a landing one
//! producer warp waited for is ordered before the consumers' reads after their
//! `bar.sync`); arriving threads acquire nothing.
//!
//! Ordering: passing the barrier orders the participants' earlier accesses
//! before their later ones. Each warp keeps a vector clock over warps
//! (`vc[w][q]`: the newest barrier tick at which `w` synchronised with `q`,
//! directly or through a chain of named barriers); an access of warp `q` with
//! a stamp older than that is ordered before `w`'s later accesses
//! ([`Machine::named_synced`]). The participants' warps also restart their
//! epochs (`wsync`), as after `__syncwarp`.

use crate::compile::Reg;
use crate::error::{ranges, SimError, SimErrorKind};
use crate::exec::{Machine, State};
use crate::family::{Divergence, FamilyIns, Flow, Group, WHOLE_WARP};
use std::collections::BTreeMap;
use tirx_ir::lir::check::NAMED_BARRIERS;

/// `bar.sync id, threads`: each thread evaluates the id and waits; the barrier
/// passes in [`Machine::release_named`].
#[derive(Debug)]
pub(crate) struct NamedBarrierIns {
    pub site: u32,
    pub id: Reg,
    pub threads: u32,
}

impl FamilyIns for NamedBarrierIns {
    fn name(&self) -> String {
        format!("a named barrier (`bar.sync`, {} threads)", self.threads)
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn step(&self, m: &mut Machine<'_>, t: u32, base: usize) -> Result<Flow, SimError> {
        let id = m.regs[base + self.id as usize] as i64;
        m.named_arrive(t, id, self.site)?;
        Ok(Flow::Block)
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        f(&mut self.id)
    }
}

/// `bar.arrive id, threads`: `.aligned`, so the warp arrives together
/// ([`Machine::named_arrive_warp`]), then runs on.
#[derive(Debug)]
pub(crate) struct NamedArriveIns {
    pub site: u32,
    pub id: Reg,
    pub threads: u32,
}

impl FamilyIns for NamedArriveIns {
    fn name(&self) -> String {
        format!("a named barrier arrival (`bar.arrive`, {} threads)", self.threads)
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        WHOLE_WARP
    }

    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        m.named_arrive_warp(w, self.id, self.threads, self.site)
    }

    fn divergence(&self) -> Divergence {
        Divergence {
            kind: SimErrorKind::BarrierDivergence,
            scope: "every lane",
            help: "`bar.arrive` is `.aligned`: all lanes of the warp execute it together; do not place it under a lane-dependent condition",
        }
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        f(&mut self.id)
    }
}

/// Per CTA: what each thread waits on and the warps' vector clocks.
pub(crate) struct NamedState {
    /// The id a thread waiting at a named barrier evaluated.
    pub wait_id: Vec<i64>,
    /// `vc[w * warps + q]`.
    vc: Vec<u32>,
    warps: usize,
    /// `bar.arrive`s on each id since it last passed.
    arrivals: BTreeMap<i64, Arrivals>,
}

/// The threads that arrived on one barrier id without waiting, and what they release.
struct Arrivals {
    threads: Vec<usize>,
    count: u32,
    site: u32,
    /// The arriving warps' arrive ticks, joined with what they had synchronised with.
    clock: Vec<u32>,
    /// What the arriving threads had acquired through mbarrier waits (of arrives and
    /// of TMA landings) when they arrived: released to the waiters with `clock`.
    acquired: crate::asynch::Acquired,
}

impl NamedState {
    pub(crate) fn new(threads: usize) -> NamedState {
        let warps = threads.div_ceil(32);
        NamedState { wait_id: vec![0; threads], vc: vec![0; warps * warps], warps, arrivals: BTreeMap::new() }
    }

    pub(crate) fn reset(&mut self) {
        self.vc.fill(0);
        self.arrivals.clear();
    }
}

impl Machine<'_> {
    /// Thread `t` arrives at a named barrier whose id evaluated to `id`.
    fn named_arrive(&mut self, t: u32, id: i64, site: u32) -> Result<(), SimError> {
        self.named_id_ok(t, id, site)?;
        self.fam.named.wait_id[t as usize] = id;
        Ok(())
    }

    /// `bar.arrive id, threads` by warp `w`, all of whose lanes reached it (`.aligned`):
    /// counted, not waiting; one tick stamps the warp's arrival, so its lanes'
    /// accesses before it are released and those after it are not. The barrier
    /// passes now if this completes it.
    fn named_arrive_warp(&mut self, w: usize, id: Reg, threads: u32, site: u32) -> Result<(), SimError> {
        let lanes: Vec<usize> = self.lanes(w).collect();
        let nr = self.prog.nregs;
        let idv = self.regs[lanes[0] * nr + id as usize] as i64;
        if let Some(&l) = lanes.iter().find(|&&l| self.regs[l * nr + id as usize] as i64 != idv) {
            let msg = format!(
                "the lanes of warp {w} arrive at different named barriers ({idv} and {}) in one `bar.arrive`",
                self.regs[l * nr + id as usize] as i64
            );
            return Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg));
        }
        self.named_id_ok(lanes[0] as u32, idv, site)?;
        let n = self.fam.named.warps;
        let tick = self.tick()?;
        let row: Vec<u32> = self.fam.named.vc[w * n..(w + 1) * n].to_vec();
        let acquired = self.fam.asy.acquired_by(lanes.iter().copied());
        let who = self.who(lanes[0] as u32);
        let a = self.fam.named.arrivals.entry(idv).or_insert_with(|| Arrivals {
            threads: vec![],
            count: threads,
            site,
            clock: vec![0; n],
            acquired: Default::default(),
        });
        if a.count != threads {
            let msg = format!(
                "{who} arrives at named barrier {idv} for {threads} threads, which other threads use for {}",
                a.count
            );
            return Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg));
        }
        if a.threads.contains(&lanes[0]) {
            let msg =
                format!("{who} arrives twice at named barrier {idv} before it passes (it expects {threads} threads)");
            return Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg).help(
                "a warp arrives once per phase: wait for the consumers (another barrier) before arriving again",
            ));
        }
        a.threads.extend(&lanes);
        for (c, r) in a.clock.iter_mut().zip(row) {
            *c = (*c).max(r);
        }
        a.clock[w] = a.clock[w].max(tick);
        a.acquired.join(&acquired);
        for &l in &lanes {
            self.fam.asy.rel[l] = self.fam.asy.rel[l].max(tick);
        }
        self.try_pass_named(idv)?;
        Ok(())
    }

    fn named_id_ok(&self, t: u32, id: i64, site: u32) -> Result<(), SimError> {
        if !(1..NAMED_BARRIERS).contains(&id) {
            return Err(SimError::new(
                SimErrorKind::BarrierDivergence,
                self.prog.sites[site as usize],
                format!(
                    "{} reaches named barrier {id}, outside 1..{NAMED_BARRIERS} (0 is `__syncthreads`')",
                    self.who(t)
                ),
            ));
        }
        Ok(())
    }

    /// The thread count of the named barrier at `pc`, if it is one.
    fn named_threads(&self, pc: u32) -> Option<u32> {
        self.prog.code[pc as usize].family::<NamedBarrierIns>().map(|b| b.threads)
    }

    /// Threads waiting at named barriers, by id.
    fn named_waiters(&self) -> BTreeMap<i64, Vec<usize>> {
        let mut by_id: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for t in 0..self.n {
            if self.state[t] == State::Waiting && self.named_threads(self.pcs[t]).is_some() {
                by_id.entry(self.fam.named.wait_id[t]).or_default().push(t);
            }
        }
        by_id
    }

    /// Passes every named barrier that exactly its thread count of whole warps
    /// waits at or arrived at.
    pub(crate) fn release_named(&mut self) -> Result<bool, SimError> {
        let mut progressed = false;
        let mut ids: Vec<i64> = self.named_waiters().into_keys().collect();
        ids.extend(self.fam.named.arrivals.keys());
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            progressed |= self.try_pass_named(id)?;
        }
        Ok(progressed)
    }

    /// Passes barrier `id` if its waiters and arrivals are exactly its count in whole warps.
    fn try_pass_named(&mut self, id: i64) -> Result<bool, SimError> {
        let ts = self.named_waiters().remove(&id).unwrap_or_default();
        let arrived: Vec<usize> = self.fam.named.arrivals.get(&id).map_or(vec![], |a| a.threads.clone());
        let count = self.expected_count(id, &ts)?;
        let mut all: Vec<usize> = ts.iter().chain(&arrived).copied().collect();
        all.sort_unstable();
        if all.len() > count as usize {
            return Err(self.collision(id, count, &all));
        }
        let whole = |w: usize| self.lanes(w).all(|l| all.binary_search(&l).is_ok());
        if all.len() < count as usize || !all.iter().all(|&t| whole(t / 32)) {
            return Ok(false);
        }
        let arrived = self.fam.named.arrivals.remove(&id);
        self.pass_named(&ts, arrived.as_ref())?;
        Ok(true)
    }

    /// The count every waiter and arrival of `id` names; differing counts are an error.
    fn expected_count(&self, id: i64, ts: &[usize]) -> Result<u32, SimError> {
        let mut counts: Vec<u32> = ts.iter().filter_map(|&t| self.named_threads(self.pcs[t])).collect();
        counts.extend(self.fam.named.arrivals.get(&id).map(|a| a.count));
        let first = counts[0];
        if let Some(&other) = counts.iter().find(|&&c| c != first) {
            return Err(SimError::new(
                SimErrorKind::BarrierDivergence,
                self.site_of(self.pcs[ts[0]]),
                format!("threads wait at named barrier {id} with different thread counts ({first} and {other})"),
            ));
        }
        Ok(first)
    }

    fn collision(&self, id: i64, count: u32, ts: &[usize]) -> SimError {
        let mut warps: Vec<u32> = ts.iter().map(|&t| (t / 32) as u32).collect();
        warps.dedup();
        SimError::new(
            SimErrorKind::BarrierDivergence,
            self.site_of(self.pcs[ts[0]]),
            format!(
                "named barrier {id} expects {count} threads, but {} threads (warps {}) of CTA ({}, {}, {}) wait at it at once; on a GPU it would release whichever {count} arrive first",
                ts.len(),
                ranges(&warps),
                self.cta[0],
                self.cta[1],
                self.cta[2]
            ),
        )
        .help("give each group of threads that synchronises on its own a barrier id of its own")
    }

    /// Releases the threads `ts` from their named barrier; `arrived` is what the
    /// threads that arrived without waiting release.
    fn pass_named(&mut self, ts: &[usize], arrived: Option<&Arrivals>) -> Result<(), SimError> {
        let now = self.tick()?;
        let mut warps: Vec<usize> = ts.iter().map(|&t| t / 32).collect();
        warps.dedup();
        let n = self.fam.named.warps;
        let mut row = arrived.map_or_else(|| vec![0u32; n], |a| a.clock.clone());
        for &w in &warps {
            for (q, r) in row.iter_mut().enumerate() {
                *r = (*r).max(self.fam.named.vc[w * n + q]);
            }
        }
        for &q in &warps {
            row[q] = now;
        }
        for &w in &warps {
            self.fam.named.vc[w * n..(w + 1) * n].copy_from_slice(&row);
            self.wsync[w] = now;
        }
        // The waiters join what they acquired, and what the arriving threads had acquired
        // (`bar.arrive` releases it like their own accesses: ordering is transitive).
        self.fam.asy.sync_threads(ts.iter().copied(), arrived.map(|a| &a.acquired));
        for &t in ts {
            self.state[t] = State::Runnable;
            self.pcs[t] += 1;
        }
        Ok(())
    }

    /// The newest named-barrier tick at which `t`'s warp synchronised with `p`'s
    /// (0: never): `p`'s accesses stamped before it are ordered before `t`'s.
    #[inline]
    pub(crate) fn named_synced(&self, t: u32, p: u32) -> u32 {
        let n = self.fam.named.warps;
        self.fam.named.vc.get((t / 32) as usize * n + (p / 32) as usize).copied().unwrap_or(0)
    }

    /// The oldest tick up to which `t` is ordered after every warp of the CTA
    /// (its own through its warp epoch): a bound for readers in unknown warps.
    pub(crate) fn named_synced_all(&self, t: u32) -> u32 {
        let n = self.fam.named.warps;
        let tw = (t / 32) as usize;
        (0..n).map(|q| if q == tw { self.wsync[tw] } else { self.fam.named.vc[tw * n + q] }).min().unwrap_or(0)
    }

    /// Threads blocked at a named barrier that can never pass: who waits, and where the others are.
    pub(crate) fn diagnose_named(&self) -> Option<SimError> {
        let (id, ts) = self.named_waiters().into_iter().next()?;
        let pc = self.pcs[ts[0]];
        let count = self.named_threads(pc).unwrap_or(0);
        let mut warps: Vec<u32> = ts.iter().map(|&t| (t / 32) as u32).collect();
        warps.dedup();
        let waiting: Vec<u32> = ts.iter().map(|&t| t as u32).collect();
        let mut err = SimError::new(SimErrorKind::BarrierDivergence, self.site_of(pc), String::new()).help(
            "a named barrier passes when its thread count of whole warps arrive; every warp of the group must reach it",
        );
        let partial: Vec<u32> =
            warps.iter().copied().filter(|&w| !self.lanes(w as usize).all(|l| ts.contains(&l))).collect();
        let others = (0..self.n).filter(|t| !ts.contains(t));
        let rest = self.whereabouts(others, pc, "threads", &mut err);
        let partial = if partial.is_empty() {
            String::new()
        } else {
            format!("; warps {} arrive only in part", ranges(&partial))
        };
        let arrived = match self.fam.named.arrivals.get(&id) {
            Some(a) => {
                err.labels.push((
                    self.prog.sites[a.site as usize],
                    format!("{} threads arrived here (bar.arrive)", a.threads.len()),
                ));
                format!(" and {} more arrived without waiting", a.threads.len())
            }
            None => String::new(),
        };
        err.message = format!(
            "named barrier {id} ({count} threads) of CTA ({}, {}, {}) is reached by {} threads (threads {}, warps {}){arrived}{partial}; {rest}",
            self.cta[0],
            self.cta[1],
            self.cta[2],
            ts.len(),
            ranges(&waiting),
            ranges(&warps)
        );
        Some(err)
    }
}
