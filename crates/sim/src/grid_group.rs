//! Grid group barriers (`T.cuda.grid_group_sync(word, size)`, `docs/lir.md` §2.14): the CTAs of
//! a cooperative grid that meet on a 32-bit global word.
//!
//! *Scheduling.* A kernel with such a barrier needs every CTA of its grid resident at once (a
//! cooperative launch), so the simulator runs its whole grid together, as it runs a cluster's
//! CTAs (`cluster`: one CTA live, the others parked, each runs until none of its threads can).
//!
//! *The barrier.* Every thread of the CTA reaches it (it is a CTA barrier before and after; a
//! thread that does not is a divergence, reported as a hang) with the same word and size, at one
//! instruction or at several (its CTA barriers are `barrier.sync`, not `.aligned`: a
//! warp-specialised kernel's roles meet it each in its own branch); the
//! CTA then arrives on the word's current phase, which completes when `size` CTAs have arrived
//! (one size per phase; a phase needing more CTAs than the grid has is an error, one that never
//! fills a hang). A completed phase flips the word's top bit, as the hardware's count does; the
//! word must start with its low 31 bits 0.
//!
//! *Ordering.* A CTA's arrive orders every access of its threads before it before every access
//! of the CTAs that pass that phase (what each arriving CTA knew of the others is joined and
//! handed on, so chains of phases order transitively): per CTA of the grid, a tick before which
//! its accesses are ordered before this CTA's next ones ([`GroupThreads::known`], which
//! `memory`'s cross-CTA checks read). CTAs that share no phase stay unordered.

use crate::asynch::{join_grow, AsyncIns};
use crate::error::{SimError, SimErrorKind};
use crate::exec::{Machine, State};
use std::collections::HashMap;

/// Per CTA: what each thread brought to the barrier it waits at, the phase the CTA waits for,
/// and what it knows of the grid's other CTAs.
pub(crate) struct GroupThreads {
    /// Per thread waiting at a grid group barrier: the word's element and the group size.
    at: Vec<Option<(usize, i64)>>,
    /// The word `(buffer, element)` and phase the CTA arrived at and waits to complete.
    waiting: Option<((u32, usize), u32)>,
    /// Per CTA of the grid (in run order): the tick before which its accesses are ordered
    /// before this CTA's next ones (empty until a phase is passed).
    pub(crate) known: Vec<u32>,
}

impl GroupThreads {
    pub(crate) fn new(n: usize) -> GroupThreads {
        GroupThreads { at: vec![None; n], waiting: None, known: vec![] }
    }

    pub(crate) fn reset(&mut self) {
        self.at.fill(None);
        self.waiting = None;
        self.known.clear();
    }
}

/// The phases of one barrier word (all CTAs').
#[derive(Default)]
pub(crate) struct GroupWord {
    size: i64,
    /// Completed phases.
    phase: u32,
    /// The CTAs (run order) arrived at the current phase, and their knowledge joined.
    arrived: Vec<usize>,
    joining: Vec<u32>,
    /// Per completed phase: what it hands on.
    done: HashMap<u32, Vec<u32>>,
}

impl Machine<'_> {
    /// Thread `t` reaches the barrier on `word[idx]` of `size` CTAs: it waits for its CTA.
    pub(crate) fn group_sync_reach(
        &mut self,
        t: u32,
        site: u32,
        word: u32,
        idx: i64,
        size: i64,
    ) -> Result<(), SimError> {
        let e = self.bounds(word, t, idx, 1, site, "grid group barrier word")?;
        self.fam.group.at[t as usize] = Some((e, size));
        Ok(())
    }

    /// The running CTA at a grid group barrier: once every thread is there, it arrives; once
    /// its phase completed, every thread passes (a CTA barrier).
    pub(crate) fn release_group_sync(&mut self) -> Result<bool, SimError> {
        if let Some((key, phase)) = self.fam.group.waiting {
            let Some(joined) = self.group_words.get(&key).and_then(|w| w.done.get(&phase)).cloned() else {
                return Ok(false);
            };
            self.fam.group.waiting = None;
            join_grow(&mut self.fam.group.known, &joined);
            let now = self.tick()?;
            self.cta_sync = now;
            self.wsync.iter_mut().for_each(|w| *w = now);
            self.fam.asy.cta_sync();
            for t in 0..self.n {
                self.fam.group.at[t] = None;
                self.state[t] = State::Runnable;
                self.pcs[t] += 1;
            }
            return Ok(true);
        }
        let g = &self.fam.group.at;
        let at_sync = |t: usize| {
            // (at any of the kernel's grid group barriers)
            let ins = self.prog.code[self.pcs[t] as usize].family::<AsyncIns>();
            self.state[t] == State::Waiting && g[t].is_some() && matches!(ins, Some(AsyncIns::GridGroupSync { .. }))
        };
        if !(0..self.n).all(at_sync) {
            return Ok(false);
        }
        let pc = self.pcs[0];
        let Some(&AsyncIns::GridGroupSync { site, word, .. }) = self.prog.code[pc as usize].family::<AsyncIns>() else {
            return Ok(false);
        };
        let (e, size) = g[0].unwrap_or_default();
        if let Some(t) = (1..self.n).find(|&t| g[t] != Some((e, size))) {
            let (te, ts) = g[t].unwrap_or_default();
            let name = &self.bufs[word as usize].name;
            let msg = format!(
                "the threads of CTA ({}, {}, {}) reach one grid group barrier with different operands: thread 0 `{name}[{e}]` of {size} CTAs, thread {t} `{name}[{te}]` of {ts}",
                self.cta[0], self.cta[1], self.cta[2]
            );
            return Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg)
                .help("the word and the group size are the CTA's: compute them from CTA ids and uniform values only"));
        }
        self.group_arrive(site, (word, e), size)?;
        Ok(true)
    }

    /// The running CTA arrives on `word[e]`'s current phase of `size` CTAs.
    fn group_arrive(&mut self, site: u32, (word, e): (u32, usize), size: i64) -> Result<(), SimError> {
        let ctas = self.ctxs.len().max(1);
        let span = self.prog.sites[site as usize];
        let name = self.bufs[word as usize].name.clone();
        if !(1..=ctas as i64).contains(&size) {
            let msg = format!("a grid group barrier on `{name}[{e}]` of {size} CTAs; the grid has {ctas}");
            return Err(SimError::new(SimErrorKind::OutOfBounds, span, msg)
                .help("the group is some of the grid's CTAs: 1 up to the grid's size"));
        }
        let key = (word, e);
        if !self.group_words.contains_key(&key) {
            let bytes = &self.bufs[word as usize].data[e * 4..e * 4 + 4];
            let v = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            if v & 0x7fff_ffff != 0 {
                let msg = format!("the grid group barrier word `{name}[{e}]` holds {v:#x} at its first use; its low 31 bits count the CTAs arrived and must be 0");
                return Err(SimError::new(SimErrorKind::Mbarrier, span, msg).help(
                    "zero the barrier words once (they are 0 again, but for the top bit, after every launch that completes)",
                ));
            }
        }
        let tick = self.tick()?;
        let mut known = self.fam.group.known.clone();
        known.resize(ctas, 0);
        known[self.rank] = known[self.rank].max(tick);
        let me = (self.rank, self.cta);
        let w = self.group_words.entry(key).or_default();
        if w.arrived.is_empty() {
            w.size = size;
        } else if w.size != size {
            let msg = format!(
                "CTA ({}, {}, {}) meets {size} CTAs at the grid group barrier on `{name}[{e}]`, where the CTAs before it in this phase meet {}",
                me.1[0], me.1[1], me.1[2], w.size
            );
            return Err(SimError::new(SimErrorKind::BarrierDivergence, span, msg)
                .help("every CTA syncing on one word gives the same group size"));
        }
        join_grow(&mut w.joining, &known);
        w.arrived.push(me.0);
        let phase = w.phase;
        if w.arrived.len() as i64 == size {
            let joined = std::mem::take(&mut w.joining);
            w.done.insert(phase, joined);
            w.phase += 1;
            w.arrived.clear();
            // (the hardware's count: back to 0, the top bit flipped)
            self.bufs[word as usize].data[e * 4 + 3] ^= 0x80;
        }
        self.fam.group.waiting = Some((key, phase));
        Ok(())
    }

    /// A grid group barrier some CTAs wait at and the others never reach (the hang's report).
    pub(crate) fn diagnose_group_hang(&self) -> Option<SimError> {
        let (&(word, e), w) = self.group_words.iter().find(|(_, w)| !w.arrived.is_empty())?;
        let pc = self.pcs.first().copied().unwrap_or(0);
        let span = self.site_of(pc);
        let msg = format!(
            "a grid group barrier on `{}[{e}]` never completes: {} of its {} CTAs arrived",
            self.bufs[word as usize].name,
            w.arrived.len(),
            w.size
        );
        Some(SimError::new(SimErrorKind::Deadlock, span, msg).help(
            "as many CTAs as the group size must sync on the word in every phase: the grid's CTAs divided into groups, each CTA syncing on its group's word",
        ))
    }
}
