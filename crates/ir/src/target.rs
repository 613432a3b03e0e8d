//! The target architecture: a type, never a string parsed on the side.
//!
//! `sm_XY[a]` is compute capability X.Y; the `a` suffix (sm_90a, sm_100a)
//! enables the architecture-specific instructions of that exact chip
//! (`wgmma`, `setmaxnreg`), which run nowhere else. Lowering takes the
//! target as a parameter; every variant and every LIR instruction states the
//! minimum it needs ([`Arch::supports`]), and below it the variant declines
//! with the reason (`stmatrix needs sm_90; target is sm_80`).

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

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
