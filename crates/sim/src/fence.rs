//! GPU-scope fences (`T.cuda.thread_fence()`, `__threadfence()`, `docs/lir.md` §2.1) and the
//! release/acquire chains they make through global atomics: how one CTA's writes are ordered
//! before another CTA's reads when the two need not run together (each split of a reduction
//! writes its part, the split whose atomic finds the others done reads them all: FlashDecoding's
//! combine in one launch, the "last block" pattern of CUDA's threadFenceReduction sample).
//!
//! *Release.* A thread's fence records what is ordered before it in its CTA: its own accesses
//! so far, and per warp of the CTA the tick before which that warp's accesses are ordered before
//! the thread (a CTA barrier, a named barrier both warps met, its own warp's `__syncwarp`). An
//! mbarrier's release is not followed into it: such a chain is reported as a race, never missed.
//! Every global atomic the thread issues after its fence appends the record to the element's
//! release sequence. The fence ticks the clock for its thread, so that its accesses after it
//! are not in its release.
//!
//! *Acquire.* A global atomic reads the element's sequence so far (the atomics of one element
//! take each other's results in one order, so each reads every release before it); the thread's
//! next fence acquires them. An access of an earlier CTA's that such a release covers is then
//! ordered before the fencing thread's later accesses, and before those of every thread that a
//! barrier or mbarrier after the fence orders after it. Acquiring does not extend a thread's own
//! release (chains through a third CTA are reported, never missed).

use crate::compile::Reg;
use crate::error::SimError;
use crate::exec::Machine;
use crate::family::{FamilyIns, Flow};
use std::collections::HashMap;
use std::rc::Rc;

/// What a fence released: the accesses of CTA `cta` that were ordered before it.
#[derive(Debug)]
pub(crate) struct Release {
    cta: [u32; 3],
    /// The fencing thread, and the tick below which its own accesses are released.
    thread: u32,
    upto: u32,
    /// Per warp of the CTA: the tick below which its accesses are released.
    warps: Vec<u32>,
}

/// Per global element `(buffer, element)` updated by atomics after fences: its release
/// sequence, in the atomics' order (for the whole launch).
pub(crate) type ReleaseSequences = HashMap<(u32, usize), Vec<Rc<Release>>>;

/// Per CTA: each thread's last release and the sequences its atomics read since its last
/// fence, and what the CTA's threads acquired.
pub(crate) struct FenceThreads {
    released: Vec<Option<Rc<Release>>>,
    /// Per thread: `(element, length of its sequence then)` of each atomic since its last fence.
    reading: Vec<Vec<((u32, usize), usize)>>,
    /// `(thread, tick of its fence, element, length)`: the releases acquired in this CTA.
    acquired: Vec<(u32, u32, (u32, usize), usize)>,
}

impl FenceThreads {
    pub(crate) fn new(n: usize) -> FenceThreads {
        FenceThreads { released: vec![None; n], reading: vec![vec![]; n], acquired: vec![] }
    }

    pub(crate) fn reset(&mut self) {
        self.released.fill(None);
        self.reading.iter_mut().for_each(Vec::clear);
        self.acquired.clear();
    }
}

/// `__threadfence()`: each thread on its own.
#[derive(Debug)]
pub(crate) struct FenceIns {
    pub site: u32,
}

impl FamilyIns for FenceIns {
    fn name(&self) -> String {
        "`__threadfence()` (thread_fence)".into()
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn step(&self, m: &mut Machine, t: u32, _: usize) -> Result<Flow, SimError> {
        m.thread_fence(t)?;
        Ok(Flow::Next)
    }

    fn for_each_reg(&mut self, _: &mut dyn FnMut(&mut Reg)) {}
}

impl Machine<'_> {
    /// Thread `t`'s fence: it acquires what its atomics read since its last fence, and
    /// releases what is ordered before it now.
    fn thread_fence(&mut self, t: u32) -> Result<(), SimError> {
        let now = self.tick()?;
        let ti = t as usize;
        let reads = std::mem::take(&mut self.fam.fence.reading[ti]);
        self.fam.fence.acquired.extend(reads.into_iter().map(|(elem, len)| (t, now, elem, len)));
        let tw = ti / 32;
        let warps = (0..self.wsync.len())
            .map(|w| {
                let own = if w == tw { self.wsync[w] } else { 0 };
                self.cta_sync.max(self.named_synced(t, w as u32 * 32)).max(own)
            })
            .collect();
        self.fam.fence.released[ti] = Some(Rc::new(Release { cta: self.cta, thread: t, upto: now, warps }));
        // Its accesses after the fence are stamped after it (not in the release).
        self.fam.asy.rel[ti] = now;
        Ok(())
    }

    /// Thread `t`'s atomic on global `b[e]`: it reads the element's release sequence, and
    /// extends it with its own last release.
    pub(crate) fn atomic_sequence(&mut self, b: u32, e: usize, t: u32) {
        let seq = self.releases.entry((b, e)).or_default();
        if !seq.is_empty() {
            self.fam.fence.reading[t as usize].push(((b, e), seq.len()));
        }
        if let Some(r) = &self.fam.fence.released[t as usize] {
            seq.push(Rc::clone(r));
        }
    }

    /// Whether an access of an earlier CTA, stamped `stamp`, by thread `p` (`None`: by one of
    /// several threads), is ordered before thread `t`'s next accesses by a release that `t`'s
    /// CTA acquired (and `t` is ordered after).
    pub(crate) fn released(&self, p: Option<u32>, stamp: u32, t: u32) -> bool {
        if self.fam.fence.acquired.is_empty() {
            return false;
        }
        let Some(cta) = self.cta_of_stamp(stamp) else { return false };
        let covers = |r: &Release| {
            r.cta == cta
                && match p {
                    Some(p) => {
                        (r.thread == p && stamp < r.upto) || r.warps.get(p as usize / 32).is_some_and(|&w| stamp < w)
                    }
                    None => r.warps.iter().all(|&w| stamp < w),
                }
        };
        self.fam.fence.acquired.iter().any(|&(q, tick, elem, len)| {
            (q == t || self.ordered(q, tick, t))
                && self.releases.get(&elem).is_some_and(|s| s[..len].iter().any(|r| covers(r)))
        })
    }
}
