//! Scalar arguments of `tirx sim`, `tirx run` and `tirx bench`: `--arg n=1024` next
//! to `--arg A=a.npy`, and the launch they bind (docs/lir.md §6): the grid and the
//! run-time sizes evaluated, every launch check passed — or an error rendered at the
//! condition's region with the argument values, before anything is allocated or run.

use crate::exit::Failure;
use crate::frontend::{eprint_diags, Source};
use tirx_ir::lir::{LKernel, ParamRef, ScalarValue};
use tirx_runtime::{Arg, LaunchArgs, ScalarArg};

/// A launch bound to its scalar arguments.
pub struct Bound {
    /// The kernel at this launch (`LKernel::specialize`): concrete grid and sizes.
    pub lir: LKernel,
    /// One value per scalar parameter, typed.
    pub values: Vec<ScalarValue>,
    /// The `--arg` specs that name buffers (`NAME=file.npy`).
    pub files: Vec<String>,
}

impl Bound {
    /// The launch's arguments in signature order (buffers by their position among the
    /// buffer parameters, tensor maps encoded over `ptr(i)`, the device address of
    /// buffer parameter `i`) and grid, for `Gpu::launch_args`.
    pub fn launch_args(
        &self,
        ptr: &dyn Fn(usize) -> Result<u64, tirx_runtime::RuntimeError>,
    ) -> Result<LaunchArgs, Failure> {
        let k = &self.lir;
        let mut args = Vec::new();
        let param = |b| k.params.iter().position(|x| *x == b).unwrap_or(usize::MAX);
        for p in k.signature() {
            args.push(match p {
                ParamRef::Buffer(b) => Arg::Buffer(param(b)),
                ParamRef::TensorMap(m) => {
                    let map = k.tmap(m);
                    let base = ptr(param(map.buf)).map_err(crate::exit::runtime_failure)?;
                    Arg::TensorMap(tirx_runtime::encode_tensor_map(map, base).map_err(crate::exit::runtime_failure)?)
                }
                ParamRef::Scalar(v) => {
                    let i = k.scalars.iter().position(|s| s.var == v);
                    let value = i.and_then(|i| self.values.get(i)).copied();
                    let arg = value.and_then(|x| ScalarArg::of(k.var(v).dtype, x));
                    Arg::Scalar(
                        arg.ok_or_else(|| Failure::Internal(format!("scalar `{}` has no value", k.var(v).name)))?,
                    )
                }
            });
        }
        Ok(LaunchArgs { args, grid: k.grid })
    }
}

/// Splits `specs` into scalar values (`n=1024`, by parameter name) and buffer files,
/// and binds the launch of `k`. Every scalar parameter needs a value.
pub fn bind(specs: &[String], k: &LKernel, src: &Source) -> Result<Bound, Failure> {
    let mut values: Vec<Option<ScalarValue>> = vec![None; k.scalars.len()];
    let mut files = Vec::new();
    for spec in specs {
        let (name, text) = spec.split_once('=').unwrap_or((spec.as_str(), ""));
        match k.scalars.iter().position(|s| k.var(s.var).name == name) {
            Some(i) => values[i] = Some(parse(spec, text, k.var(k.scalars[i].var).dtype)?),
            None => files.push(spec.clone()),
        }
    }
    let missing: Vec<String> = k
        .scalars
        .iter()
        .zip(&values)
        .filter(|(_, v)| v.is_none())
        .map(|(s, _)| format!("`{}` ({})", k.var(s.var).name, k.var(s.var).dtype))
        .collect();
    if !missing.is_empty() {
        let first = k.scalars.iter().zip(&values).find(|(_, v)| v.is_none()).map(|(s, _)| k.var(s.var).name.clone());
        return Err(Failure::User(format!(
            "error: kernel `{}` takes the scalar argument{} {}, which {} not given\nhelp: pass it as `--arg {}=VALUE`",
            k.name,
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "was" } else { "were" },
            first.unwrap_or_default()
        )));
    }
    let values: Vec<ScalarValue> = values.into_iter().flatten().collect();
    match tirx_sim::launch(k, &values) {
        Ok((lir, values)) => Ok(Bound { lir, values, files }),
        Err(e) => {
            eprint_diags(&[e.to_diagnostic()], src);
            Err(Failure::Reported)
        }
    }
}

/// The value of `--arg NAME=TEXT` for a scalar parameter of type `t`.
fn parse(spec: &str, text: &str, t: tirx_ir::DType) -> Result<ScalarValue, Failure> {
    let bad =
        |what: &str| Failure::User(format!("error: --arg `{spec}`: `{text}` is not {what}; the parameter is {t}"));
    let v = if t.is_int() {
        ScalarValue::Int(text.trim().parse::<i64>().map_err(|_| bad("an integer"))?)
    } else {
        let f = text.trim().parse::<f64>().map_err(|_| bad("a number"))?;
        ScalarValue::Float(f)
    };
    v.typed(t).map_err(|m| Failure::User(format!("error: --arg `{spec}`: {m}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::DType;

    #[test]
    fn values_parse_by_type() {
        assert_eq!(parse("n=12", "12", DType::I32).ok(), Some(ScalarValue::Int(12)));
        assert_eq!(parse("e=0.5", "0.5", DType::F32).ok(), Some(ScalarValue::Float(0.5)));
        assert_eq!(parse("e=2", "2", DType::F64).ok(), Some(ScalarValue::Float(2.0)));
        let Err(Failure::User(m)) = parse("n=1.5", "1.5", DType::I32) else { panic!("a float for an int") };
        assert!(m.contains("`1.5` is not an integer; the parameter is int32"), "{m}");
        let Err(Failure::User(m)) = parse("n=-1", "-1", DType::U32) else { panic!("out of range") };
        assert!(m.contains("outside the range of uint32"), "{m}");
    }
}
