//! Checks shared by the commands that take `--arg NAME=FILE` / `--out NAME=FILE`.
use crate::exit::Failure;

/// Each parameter may be named once per flag: `--arg A=a.npy --arg A=b.npy`
/// is a user error naming both, not "the last one wins".
pub fn check_unique(flag: &str, specs: &[String]) -> Result<(), Failure> {
    for (j, later) in specs.iter().enumerate() {
        let name = later.split_once('=').map_or(later.as_str(), |(n, _)| n);
        if let Some(first) = specs[..j].iter().find(|s| s.split_once('=').map_or(s.as_str(), |(n, _)| n) == name) {
            return Err(Failure::User(format!(
                "error: {flag} `{first}` and {flag} `{later}` both name parameter `{name}`; give each parameter once"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_name_is_an_error_naming_both() {
        let specs = vec!["A=a.npy".to_string(), "B=b.npy".to_string(), "A=c.npy".to_string()];
        let Err(Failure::User(m)) = check_unique("--arg", &specs) else { panic!("must fail") };
        assert!(m.contains("--arg `A=a.npy` and --arg `A=c.npy` both name parameter `A`"), "{m}");
        assert!(check_unique("--out", &specs[..2]).is_ok());
    }
}
