//! The target architecture: a type, never a string parsed on the side.
//!
//! `sm_XY[a]` is compute capability X.Y; the `a` suffix (sm_90a, sm_100a)
//! enables the architecture-specific instructions of that exact chip
//! (`wgmma`, `setmaxnreg`), which run nowhere else. Lowering takes the
//! target as a parameter; every variant and every LIR instruction states the
//! minimum it needs ([`Arch::supports`]), and below it the variant declines
//! with the reason (`stmatrix needs sm_90; target is sm_80`).
//!
//! Resource limits live here too, so that lowering (user errors at the
//! allocation), the CUDA generator, the simulator and the runtime agree:
//! [`STATIC_SMEM_LIMIT`], [`Arch::max_smem_per_cta`] and the footprint of one
//! shared array, [`smem_array_bytes`].

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Static shared memory (`__shared__` arrays) a kernel may declare, on every
/// target: 48 KiB. More needs `shared.dyn` (`extern __shared__`) and the
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` opt-in at launch.
pub const STATIC_SMEM_LIMIT: u64 = 48 * 1024;

/// Every shared and local array starts on this many bytes (16: a 128-bit
/// access at a multiple of its width is aligned).
pub const SMEM_ARRAY_ALIGN: u64 = 16;

/// Every dynamic shared (`shared.dyn`) buffer starts on this many bytes, so an
/// allocation may ask for any power-of-two `align=` up to it (the reference's
/// pools align TMA and mbarrier buffers to 128).
pub const DYN_SMEM_ALIGN: u64 = 128;

/// The bytes a `shared.dyn` array of `elems` elements of `elem_bytes` takes,
/// rounded up to [`DYN_SMEM_ALIGN`] (the next one starts aligned); saturated.
pub fn dyn_smem_array_bytes(elems: i64, elem_bytes: u32) -> u64 {
    smem_array_bytes(elems, elem_bytes).checked_next_multiple_of(DYN_SMEM_ALIGN).unwrap_or(u64::MAX)
}

/// The bytes an array of `elems` elements of `elem_bytes` takes in shared
/// memory, rounded up to [`SMEM_ARRAY_ALIGN`] (the next array starts aligned);
/// saturated, so absurd sizes reach the limit checks instead of wrapping.
pub fn smem_array_bytes(elems: i64, elem_bytes: u32) -> u64 {
    u64::try_from(elems.max(0))
        .unwrap_or(0)
        .saturating_mul(u64::from(elem_bytes))
        .checked_next_multiple_of(SMEM_ARRAY_ALIGN)
        .unwrap_or(u64::MAX)
}

/// Which instructions beyond the compute capability's portable set code may use
/// (the suffix of `sm_XY`, `sm_XYf`, `sm_XYa`; `ptxas --help`, `--gpu-name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Features {
    /// `sm_90`: runs on every GPU of this compute capability or newer.
    Portable,
    /// `sm_100f`: adds the family's instructions; runs on this family's GPUs of
    /// this minor version or newer (sm_100f on sm_103).
    Family,
    /// `sm_90a`: adds the chip's own instructions (`wgmma`, `setmaxnreg`,
    /// `tcgen05`); runs on exactly this chip.
    Specific,
}

impl Features {
    fn suffix(self) -> &'static str {
        match self {
            Features::Portable => "",
            Features::Family => "f",
            Features::Specific => "a",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Arch {
    pub major: u8,
    pub minor: u8,
    pub features: Features,
}

/// Every target CUDA 13's `ptxas` compiles for (`--gpu-name`): Turing and newer.
pub const KNOWN_TARGETS: &[&str] = &[
    "sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_100a", "sm_103",
    "sm_103f", "sm_103a", "sm_110", "sm_110f", "sm_110a", "sm_120", "sm_120f", "sm_120a", "sm_121", "sm_121f",
    "sm_121a",
];

impl Arch {
    pub const SM_75: Arch = Arch::new(7, 5);
    pub const SM_80: Arch = Arch::new(8, 0);
    pub const SM_90: Arch = Arch::new(9, 0);
    pub const SM_90A: Arch = Arch::specific(9, 0);
    pub const SM_100: Arch = Arch::new(10, 0);
    pub const SM_100A: Arch = Arch::specific(10, 0);
    /// The Blackwell datacenter family's instructions (tcgen05, CTA pairs), on sm_100 and sm_103.
    pub const SM_100F: Arch = Arch { major: 10, minor: 0, features: Features::Family };
    /// What lowering targets when neither `--arch` nor a GPU says otherwise.
    pub const DEFAULT: Arch = Arch::SM_90A;
    /// The oldest target tirx-rs lowers for: the oldest CUDA 13 compiles for
    /// (plain LIR needs `__syncwarp` and `__shfl_sync`, which it has).
    pub const MIN: Arch = Arch::SM_75;

    /// `sm_XY`: the portable target of compute capability X.Y.
    pub const fn new(major: u8, minor: u8) -> Arch {
        Arch { major, minor, features: Features::Portable }
    }

    /// `sm_XYa`: the chip-specific target of compute capability X.Y.
    pub const fn specific(major: u8, minor: u8) -> Arch {
        Arch { major, minor, features: Features::Specific }
    }

    /// The target for a GPU of compute capability `major.minor`: the `a`
    /// variant from Hopper on, so its specific instructions are usable.
    pub fn for_compute_capability(major: u8, minor: u8) -> Arch {
        if major >= 9 {
            Arch::specific(major, minor)
        } else {
            Arch::new(major, minor)
        }
    }

    /// Code that needs `min` runs on this target, by `ptxas`'s rule: a portable
    /// `min` on any newer or equal compute capability; a family `min` on this
    /// family (same major) from its minor version on, with the `f` or `a`
    /// features; a specific `min` on exactly that chip with `a`.
    pub fn supports(self, min: Arch) -> bool {
        let at_least = (self.major, self.minor) >= (min.major, min.minor);
        match min.features {
            Features::Portable => at_least,
            Features::Family => self.major == min.major && at_least && self.features != Features::Portable,
            Features::Specific => self == min,
        }
    }

    /// Shared memory one CTA may use, static + dynamic, with the opt-in
    /// attribute (CUDA C++ Programming Guide, "Technical Specifications per
    /// Compute Capability"): 227 KiB on sm_90 and sm_100, 163 KiB on sm_80 and
    /// sm_87, 99 KiB on sm_86/sm_89/sm_120, 64 KiB on sm_75.
    /// Targets the table does not list (sm_12x and later) get the conservative 99 KiB.
    pub const fn max_smem_per_cta(self) -> u64 {
        const KIB: u64 = 1024;
        KIB * match (self.major, self.minor) {
            (7, 5) => 64,
            (8, 0) | (8, 7) => 163,
            (8, _) => 99,
            (9, _) | (10, _) | (11, _) => 227,
            _ => 99,
        }
    }

    /// `sm_90a`: the NVRTC / nvcc `--gpu-architecture` value.
    pub fn sm_name(self) -> String {
        self.to_string()
    }
}

impl Default for Arch {
    fn default() -> Arch {
        Arch::DEFAULT
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}{}", self.major, self.minor, self.features.suffix())
    }
}

/// Why an arch name does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchParseError(pub String);

impl fmt::Display for ArchParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArchParseError {}

impl FromStr for Arch {
    type Err = ArchParseError;

    /// `sm_90a`, `sm_80`, `sm_100f`, `sm_120`: `sm_` + major + one minor digit +
    /// optional `f` or `a`, one of the targets CUDA 13 compiles for ([`KNOWN_TARGETS`]).
    fn from_str(s: &str) -> Result<Arch, ArchParseError> {
        let bad = || {
            ArchParseError(format!("`{s}` is not a CUDA target; expected sm_<major><minor>[f|a], e.g. sm_90a or sm_80"))
        };
        let rest = s.strip_prefix("sm_").ok_or_else(bad)?;
        let (digits, features) = match rest.as_bytes().last() {
            Some(b'a') => (&rest[..rest.len() - 1], Features::Specific),
            Some(b'f') => (&rest[..rest.len() - 1], Features::Family),
            _ => (rest, Features::Portable),
        };
        if digits.len() < 2 || digits.len() > 3 || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        let (maj, min) = digits.split_at(digits.len() - 1);
        let major: u8 = maj.parse().map_err(|_| bad())?;
        let minor: u8 = min.parse().map_err(|_| bad())?;
        let arch = Arch { major, minor, features };
        if !KNOWN_TARGETS.contains(&arch.to_string().as_str()) {
            let why = if !arch.supports(Arch::MIN) && features == Features::Portable {
                format!("older than {}, the oldest target CUDA 13 compiles for", Arch::MIN)
            } else {
                "not a target CUDA 13 compiles for".to_string()
            };
            return Err(ArchParseError(format!("`{s}` is {why}; targets: {}", KNOWN_TARGETS.join(", "))));
        }
        Ok(arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in KNOWN_TARGETS {
            assert_eq!(s.parse::<Arch>().unwrap().to_string(), *s);
        }
        for s in ["sm90", "sm_9", "sm_80a", "sm_89f", "sm_60", "sm_70", "sm_101a", "compute_90", "sm_x0", "sm_9000", ""]
        {
            assert!(s.parse::<Arch>().is_err(), "{s}");
        }
        let e = "sm_70".parse::<Arch>().unwrap_err().0;
        assert!(e.contains("older than sm_75, the oldest target CUDA 13 compiles for"), "{e}");
        assert_eq!("sm_100a".parse::<Arch>(), Ok(Arch::SM_100A));
    }

    #[test]
    fn shared_memory_limits_follow_the_compute_capability() {
        assert_eq!(Arch::SM_90A.max_smem_per_cta(), 227 * 1024);
        assert_eq!(Arch::SM_80.max_smem_per_cta(), 163 * 1024);
        assert_eq!("sm_86".parse::<Arch>().unwrap().max_smem_per_cta(), 99 * 1024);
        assert_eq!(Arch::SM_75.max_smem_per_cta(), 64 * 1024);
        assert!(Arch::MIN.max_smem_per_cta() > STATIC_SMEM_LIMIT);
        assert_eq!(smem_array_bytes(3, 4), 16);
        assert_eq!(smem_array_bytes(0, 4), 0);
        assert_eq!(smem_array_bytes(i64::MAX, 8), u64::MAX);
    }

    #[test]
    fn supports_orders_and_pins_specific_features() {
        assert!(Arch::SM_90A.supports(Arch::SM_80));
        assert!(Arch::SM_90A.supports(Arch::SM_90));
        assert!(Arch::SM_90A.supports(Arch::SM_90A));
        assert!(!Arch::SM_90.supports(Arch::SM_90A));
        assert!(!Arch::SM_80.supports(Arch::SM_90));
        assert!(Arch::SM_100A.supports(Arch::SM_90));
        assert!(!Arch::SM_100A.supports(Arch::SM_90A), "wgmma is sm_90a only");
        // Family features: sm_100f code runs on sm_103f and sm_103a, not on sm_103 or sm_110f.
        let p = |s: &str| s.parse::<Arch>().unwrap();
        assert!(p("sm_103f").supports(p("sm_100f")) && p("sm_103a").supports(p("sm_100f")));
        assert!(!p("sm_103").supports(p("sm_100f")) && !p("sm_110f").supports(p("sm_100f")));
        assert!(p("sm_100a").supports(p("sm_100f")) && !p("sm_100f").supports(Arch::SM_100A));
        assert_eq!(Arch::for_compute_capability(9, 0), Arch::SM_90A);
        assert_eq!(Arch::for_compute_capability(8, 6).to_string(), "sm_86");
    }
}
