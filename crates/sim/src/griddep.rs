//! Programmatic dependent launch (`T.ptx.griddepcontrol.wait()` / `.launch_dependents()`,
//! `docs/lir.md` §2.1): a kernel that waits for the grids before it is launched while the
//! kernel before it on the stream may still run, so until a thread's wait nothing in global
//! memory is its to read or write (the kernel before it may write what it reads, or read what
//! it writes). The simulator runs one launch at a time and does not know the kernel before:
//! in a kernel with a wait, every global access of a thread before its own wait is reported.
//! `launch_dependents` lets the next kernel start; it orders nothing here (that kernel's own
//! wait waits for this grid's end).

use crate::compile::Reg;
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::family::{FamilyIns, Flow};

/// Per CTA: whether each thread has passed its `griddepcontrol.wait` (`None`: the kernel has
/// none, and is launched in stream order).
pub(crate) struct GridDepThreads {
    waited: Option<Vec<bool>>,
}

impl GridDepThreads {
    pub(crate) fn new(dependent: bool, n: usize) -> GridDepThreads {
        GridDepThreads { waited: dependent.then(|| vec![false; n]) }
    }

    pub(crate) fn reset(&mut self) {
        if let Some(w) = &mut self.waited {
            w.fill(false);
        }
    }

    /// Whether thread `t` may not touch global memory yet.
    #[inline]
    pub(crate) fn pending(&self, t: u32) -> bool {
        self.waited.as_ref().is_some_and(|w| !w[t as usize])
    }
}

/// `griddepcontrol.wait` (`wait`) or `griddepcontrol.launch_dependents`.
#[derive(Debug)]
pub(crate) struct GridDepIns {
    pub site: u32,
    pub wait: bool,
}

impl FamilyIns for GridDepIns {
    fn name(&self) -> String {
        if self.wait { "`griddepcontrol.wait`" } else { "`griddepcontrol.launch_dependents`" }.into()
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn step(&self, m: &mut Machine, t: u32, _: usize) -> Result<Flow, SimError> {
        if self.wait {
            if let Some(w) = &mut m.fam.griddep.waited {
                w[t as usize] = true;
            }
        }
        Ok(Flow::Next)
    }

    fn for_each_reg(&mut self, _: &mut dyn FnMut(&mut Reg)) {}
}

impl Machine<'_> {
    /// Thread `t`'s access of global buffer `b` before its `griddepcontrol.wait`.
    #[cold]
    #[inline(never)]
    pub(crate) fn before_griddep_wait(&self, b: u32, t: u32, write: bool, site: u32) -> SimError {
        let buf = &self.bufs[b as usize];
        let msg = format!(
            "{} of `{}` by {} before its `griddepcontrol.wait`: the kernel is launched while the one before it on the stream may still run",
            if write { "write" } else { "read" },
            buf.name,
            self.who(t)
        );
        SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg).help(format!(
            "move the access after `T.ptx.griddepcontrol.wait()` (the kernel before may write `{}` or read what this kernel writes)",
            buf.name
        ))
    }
}
