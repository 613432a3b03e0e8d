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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Arch {
    pub major: u8,
    pub minor: u8,
    /// The `a` suffix: architecture-specific features of exactly this chip.
    pub specific: bool,
}

impl Arch {
    pub const SM_70: Arch = Arch::new(7, 0);
    pub const SM_75: Arch = Arch::new(7, 5);
    pub const SM_80: Arch = Arch::new(8, 0);
    pub const SM_90: Arch = Arch::new(9, 0);
    pub const SM_90A: Arch = Arch { major: 9, minor: 0, specific: true };
    pub const SM_100: Arch = Arch::new(10, 0);
    /// What lowering targets when neither `--arch` nor a GPU says otherwise.
    pub const DEFAULT: Arch = Arch::SM_90A;
    /// The oldest target tirx-rs lowers for (what plain LIR needs: `__syncwarp`, `__shfl_sync`).
    pub const MIN: Arch = Arch::SM_70;

    pub const fn new(major: u8, minor: u8) -> Arch {
        Arch { major, minor, specific: false }
    }

    /// The target for a GPU of compute capability `major.minor`: the `a`
    /// variant from Hopper on, so its specific instructions are usable.
    pub fn for_compute_capability(major: u8, minor: u8) -> Arch {
        Arch { major, minor, specific: major >= 9 }
    }

    /// Code that needs `min` runs on this target: a newer or equal compute
    /// capability, and for an arch-specific `min` exactly that chip with `a`.
    pub fn supports(self, min: Arch) -> bool {
        if min.specific {
            return self.specific && (self.major, self.minor) == (min.major, min.minor);
        }
        (self.major, self.minor) >= (min.major, min.minor)
    }

    /// Shared memory one CTA may use, static + dynamic, with the opt-in
    /// attribute (CUDA C++ Programming Guide, "Technical Specifications per
    /// Compute Capability"): 227 KiB on sm_90 and sm_100, 163 KiB on sm_80 and
    /// sm_87, 99 KiB on sm_86/sm_89/sm_120, 96 KiB on sm_70/72, 64 KiB on sm_75.
    /// Targets the table does not list (sm_12x and later) get the conservative 99 KiB.
    pub const fn max_smem_per_cta(self) -> u64 {
        const KIB: u64 = 1024;
        KIB * match (self.major, self.minor) {
            (7, 5) => 64,
            (7, _) => 96,
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
        write!(f, "sm_{}{}{}", self.major, self.minor, if self.specific { "a" } else { "" })
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

    /// `sm_90a`, `sm_80`, `sm_86`, `sm_100a`, `sm_120`: `sm_` + major + one minor digit + optional `a`.
    fn from_str(s: &str) -> Result<Arch, ArchParseError> {
        let bad = || {
            ArchParseError(format!("`{s}` is not a CUDA target; expected sm_<major><minor>[a], e.g. sm_90a or sm_80"))
        };
        let rest = s.strip_prefix("sm_").ok_or_else(bad)?;
        let (digits, specific) = match rest.strip_suffix('a') {
            Some(d) => (d, true),
            None => (rest, false),
        };
        if digits.len() < 2 || digits.len() > 3 || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        let (maj, min) = digits.split_at(digits.len() - 1);
        let major: u8 = maj.parse().map_err(|_| bad())?;
        let minor: u8 = min.parse().map_err(|_| bad())?;
        let arch = Arch { major, minor, specific };
        if specific && major < 9 {
            return Err(ArchParseError(format!("`{s}`: the `a` suffix exists from sm_90a on")));
        }
        if !arch.supports(Arch::MIN) {
            return Err(ArchParseError(format!(
                "`{s}` is older than {}, the oldest target tirx-rs lowers for",
                Arch::MIN
            )));
        }
        Ok(arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in ["sm_90a", "sm_80", "sm_86", "sm_100a", "sm_120", "sm_70", "sm_75", "sm_89"] {
            assert_eq!(s.parse::<Arch>().unwrap().to_string(), s);
        }
        for s in ["sm90", "sm_9", "sm_80a", "sm_60", "compute_90", "sm_x0", "sm_9000", ""] {
            assert!(s.parse::<Arch>().is_err(), "{s}");
        }
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
        let sm100a: Arch = "sm_100a".parse().unwrap();
        assert!(sm100a.supports(Arch::SM_90));
        assert!(!sm100a.supports(Arch::SM_90A), "wgmma is sm_90a only");
        assert_eq!(Arch::for_compute_capability(9, 0), Arch::SM_90A);
        assert_eq!(Arch::for_compute_capability(8, 6).to_string(), "sm_86");
    }
}
