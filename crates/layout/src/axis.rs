//! Axes: the named dimensions a layout maps into.
//!
//! Memory axes (`m`, and the Trainium/TMEM axes) address storage; thread axes
//! (`laneid`, `warpid`, ...) name which thread owns an element. Each thread axis
//! reads "a `subscope`-granular index inside a `scope`": `laneid` is a thread
//! inside a warp. The set is closed: an unknown name is a parse error, never a
//! silently auto-registered axis (a reference pitfall).

use serde::Serialize;
use std::fmt;

/// Execution scopes, widest first. `Kernel` is the virtual root (the grid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecScope {
    Kernel,
    Cluster,
    Cta,
    Warpgroup,
    Warp,
    Thread,
}

impl ExecScope {
    /// Smaller rank = wider scope.
    pub fn rank(self) -> u8 {
        self as u8
    }
    /// `self` is strictly wider than `other`.
    pub fn wider_than(self, other: ExecScope) -> bool {
        self.rank() < other.rank()
    }
    pub fn name(self) -> &'static str {
        match self {
            ExecScope::Kernel => "kernel",
            ExecScope::Cluster => "cluster",
            ExecScope::Cta => "cta",
            ExecScope::Warpgroup => "warpgroup",
            ExecScope::Warp => "warp",
            ExecScope::Thread => "thread",
        }
    }
    pub fn from_name(s: &str) -> Option<ExecScope> {
        Some(match s {
            "kernel" => ExecScope::Kernel,
            "cluster" => ExecScope::Cluster,
            "cta" => ExecScope::Cta,
            "warpgroup" | "wg" => ExecScope::Warpgroup,
            "warp" => ExecScope::Warp,
            "thread" => ExecScope::Thread,
            _ => return None,
        })
    }
}

impl fmt::Display for ExecScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A layout axis. Ordering (used for printing offsets and sorting replicas) is by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    // memory axes
    M,
    P,
    F,
    Bank,
    TLane,
    TCol,
    // thread axes
    LaneId,
    WarpId,
    Tx,
    WgId,
    WidInWg,
    TidInWg,
    Cbx,
    Cby,
    Cbz,
    Bx,
    By,
    Bz,
}

impl Axis {
    pub const ALL: [Axis; 18] = [
        Axis::M,
        Axis::P,
        Axis::F,
        Axis::Bank,
        Axis::TLane,
        Axis::TCol,
        Axis::LaneId,
        Axis::WarpId,
        Axis::Tx,
        Axis::WgId,
        Axis::WidInWg,
        Axis::TidInWg,
        Axis::Cbx,
        Axis::Cby,
        Axis::Cbz,
        Axis::Bx,
        Axis::By,
        Axis::Bz,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Axis::M => "m",
            Axis::P => "P",
            Axis::F => "F",
            Axis::Bank => "Bank",
            Axis::TLane => "TLane",
            Axis::TCol => "TCol",
            Axis::LaneId => "laneid",
            Axis::WarpId => "warpid",
            Axis::Tx => "tx",
            Axis::WgId => "wgid",
            Axis::WidInWg => "wid_in_wg",
            Axis::TidInWg => "tid_in_wg",
            Axis::Cbx => "cbx",
            Axis::Cby => "cby",
            Axis::Cbz => "cbz",
            Axis::Bx => "bx",
            Axis::By => "by",
            Axis::Bz => "bz",
        }
    }

    pub fn from_name(s: &str) -> Option<Axis> {
        Axis::ALL.iter().copied().find(|a| a.name() == s)
    }

    pub fn is_thread(self) -> bool {
        !self.is_memory()
    }

    pub fn is_memory(self) -> bool {
        matches!(self, Axis::M | Axis::P | Axis::F | Axis::Bank | Axis::TLane | Axis::TCol)
    }

    /// How many values a thread axis can take on the hardware (its values are
    /// `0..limit`): 32 lanes in a warp, 4 warps in a warpgroup, at most 1024
    /// threads (32 warps, 8 warpgroups) in a CTA, 16 CTAs in a cluster, CUDA's
    /// grid limits. `None` for memory axes.
    pub fn hw_limit(self) -> Option<i64> {
        Some(match self {
            Axis::LaneId => 32,
            Axis::WidInWg => 4,
            Axis::TidInWg => 128,
            Axis::Tx => 1024,
            Axis::WarpId => 32,
            Axis::WgId => 8,
            Axis::Cbx | Axis::Cby | Axis::Cbz => 16,
            Axis::Bx => (1 << 31) - 1,
            Axis::By | Axis::Bz => 65535,
            _ => return None,
        })
    }

    /// `(scope, subscope)` of a thread axis: "a `subscope` index inside a `scope`".
    /// `bx/by/bz` are CTA indices in the grid (the reference registers them with
    /// scope "thread", which makes its scope chain loop; we use `Kernel`).
    pub fn scopes(self) -> Option<(ExecScope, ExecScope)> {
        use ExecScope::*;
        Some(match self {
            Axis::LaneId => (Warp, Thread),
            Axis::WarpId => (Cta, Warp),
            Axis::Tx => (Cta, Thread),
            Axis::WgId => (Cta, Warpgroup),
            Axis::WidInWg => (Warpgroup, Warp),
            Axis::TidInWg => (Warpgroup, Thread),
            Axis::Cbx | Axis::Cby | Axis::Cbz => (Cluster, Cta),
            Axis::Bx | Axis::By | Axis::Bz => (Kernel, Cta),
            _ => return None,
        })
    }
}

impl PartialOrd for Axis {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Axis {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
