//! C identifiers for the kernel, its buffers and its variables.
//!
//! Names come from the source (`LBuf::name`, `LVar::name`), sanitized into
//! valid identifiers that avoid C++ keywords, CUDA built-ins and the `tirx_`
//! prefix of our helpers, then made unique. Buffers are unique kernel-wide;
//! a variable only has to differ from the buffers and from the variables in
//! scope where it is declared, so sibling loops can all be called `f`.

use crate::CodegenError;
use std::collections::{HashMap, HashSet};
use tirx_ir::lir::{LBufId, LKernel, LVarId, TmapId};

/// Words a generated name must not be: C++ keywords, CUDA built-ins and the
/// functions generated code calls.
#[rustfmt::skip]
const RESERVED: &[&str] = &[
    "alignas", "alignof", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
    "constexpr", "continue", "decltype", "default", "delete", "do", "double", "else", "enum",
    "explicit", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long",
    "mutable", "namespace", "new", "noexcept", "nullptr", "operator", "private", "protected",
    "public", "register", "reinterpret_cast", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "throw", "true", "try",
    "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while",
    "and", "or", "not", "xor", "bitand", "bitor", "compl",
    // CUDA built-ins and the functions and types generated code names.
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "min", "max", "abs", "llabs",
    "fminf", "fmaxf", "fmin", "fmax", "fabsf", "fabs", "fmodf", "fmod", "sqrtf", "sqrt", "rsqrtf",
    "rsqrt", "expf", "exp", "exp2f", "exp2", "logf", "log", "log2f", "log2", "floorf", "floor",
    "ceilf", "ceil", "tanhf", "tanh", "sinf", "sin", "cosf", "cos", "hsqrt", "hrsqrt", "hexp",
    "hexp2", "hlog", "hlog2", "hfloor", "hceil", "hsin", "hcos", "uint4", "uint2", "float2", "half",
    "nv_bfloat16", "main",
];

/// `name` as a valid, unreserved C identifier (`A.smem` -> `A_smem`, `int` -> `int_`).
pub fn sanitize(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.is_empty() {
        s.push('v');
    }
    let b = s.as_bytes();
    // Identifiers starting with a digit are invalid; `__x` and `_X` are reserved to the implementation.
    if b[0].is_ascii_digit() || s.starts_with("__") || (b[0] == b'_' && b.get(1).is_some_and(u8::is_ascii_uppercase)) {
        s.insert(0, 'v');
    }
    if RESERVED.contains(&s.as_str()) || s.starts_with("tirx_") || is_vector_type(&s) {
        s.push('_');
    }
    s
}

/// CUDA's built-in vector types (`float4`, `uint2`, `longlong2`, ...): a
/// variable of that name would hide the type from the casts that use it.
fn is_vector_type(s: &str) -> bool {
    let Some(base) = s.strip_suffix(['1', '2', '3', '4']) else {
        return false;
    };
    let base = base.strip_prefix('u').unwrap_or(base);
    matches!(base, "char" | "short" | "int" | "long" | "longlong" | "float" | "double")
}

/// `base`, else `base_k` for the smallest `k ≥ 1` not `taken`. `next` holds per base a
/// suffix below which every `base_k` is known taken: probing starts there (so n names of
/// one base cost O(n), not O(n²)) and it moves past the name returned.
fn unique(next: &mut HashMap<String, u32>, base: String, taken: impl Fn(&str) -> bool) -> String {
    if !taken(&base) {
        return base;
    }
    let mut k = next.get(&base).copied().unwrap_or(1).max(1);
    while taken(&format!("{base}_{k}")) {
        k += 1;
    }
    let n = format!("{base}_{k}");
    next.insert(base, k + 1);
    n
}

pub struct Names {
    pub kernel: String,
    bufs: Vec<String>,
    /// Tensor map parameters (`A_tmap`), unique among the buffers.
    tmaps: Vec<String>,
    buf_set: HashSet<String>,
    /// The current C name of each declared variable.
    vars: HashMap<LVarId, String>,
    /// Names of variables in scope, innermost scope last.
    scopes: Vec<Vec<String>>,
    /// How many variables in scope have each name (shadowing declares a name again).
    in_scope: HashMap<String, u32>,
    /// [`unique`]'s suffix hints for variables (lowered again as scopes free names).
    next_suffix: HashMap<String, u32>,
}

impl Names {
    pub fn new(k: &LKernel) -> Names {
        // Buffers and tensor maps are unique kernel-wide: a set that only grows.
        let (mut buf_set, mut next) = (HashSet::new(), HashMap::new());
        let mut fresh = |source: &str| {
            let n = unique(&mut next, sanitize(source), |n| buf_set.contains(n));
            buf_set.insert(n.clone());
            n
        };
        let mut bufs = vec![String::new(); k.bufs.len()];
        // Parameters first so that they keep their source names.
        let order = k.params.iter().map(|p| p.0 as usize).chain(0..k.bufs.len());
        for i in order {
            if bufs[i].is_empty() {
                bufs[i] = fresh(&k.bufs[i].name);
            }
        }
        let tmaps = k.tmaps.iter().map(|m| fresh(&m.name)).collect();
        let kernel = sanitize(&k.name);
        let mut names = Names {
            kernel,
            bufs,
            tmaps,
            buf_set,
            vars: HashMap::new(),
            scopes: vec![Vec::new()],
            in_scope: HashMap::new(),
            next_suffix: HashMap::new(),
        };
        // Scalar parameters are declared by the signature, in scope everywhere.
        for s in &k.scalars {
            if let Some(v) = k.vars.get(s.var.0 as usize) {
                names.declare(s.var, &v.name);
            }
        }
        names
    }

    pub fn buf(&self, b: LBufId) -> &str {
        &self.bufs[b.0 as usize]
    }

    /// The parameter name of tensor map `m`; a map the kernel does not declare is invalid LIR.
    pub fn tmap(&self, m: TmapId) -> Result<&str, CodegenError> {
        self.tmaps
            .get(m.0 as usize)
            .map(String::as_str)
            .ok_or_else(|| CodegenError::InvalidLir(format!("tensor map {} is not declared by the kernel", m.0)))
    }

    pub fn var(&self, v: LVarId) -> &str {
        self.vars.get(&v).map_or("/*undeclared*/", String::as_str)
    }

    /// A fresh name for `v` declared in the innermost scope: the source name, else
    /// `name_k` for the smallest `k` free (not a buffer, not a variable in scope).
    pub fn declare(&mut self, v: LVarId, source: &str) -> String {
        let (bufs, in_scope) = (&self.buf_set, &self.in_scope);
        let taken = |n: &str| bufs.contains(n) || in_scope.get(n).is_some_and(|&c| c > 0);
        let n = unique(&mut self.next_suffix, sanitize(source), taken);
        *self.in_scope.entry(n.clone()).or_insert(0) += 1;
        self.scopes.last_mut().expect("the kernel scope is never popped").push(n.clone());
        self.vars.insert(v, n.clone());
        n
    }

    pub fn push_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    /// Leaves the innermost scope: its names are free again (and `base_k` is again the
    /// lowest candidate suffix of its base).
    pub fn pop_scope(&mut self) {
        for n in self.scopes.pop().unwrap_or_default() {
            if let Some(c) = self.in_scope.get_mut(&n) {
                *c = c.saturating_sub(1);
            }
            if let Some((base, k)) = n.rsplit_once('_').and_then(|(b, k)| Some((b, k.parse::<u32>().ok()?))) {
                if let Some(next) = self.next_suffix.get_mut(base) {
                    *next = (*next).min(k.max(1));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::dtype::DType;
    use tirx_ir::lir::{LBuf, Space};

    fn names(bufs: &[&str]) -> Names {
        let k = LKernel {
            bufs: bufs.iter().map(|b| LBuf::flat(b, DType::F32, Space::Local, 1)).collect(),
            ..LKernel::new("k", [1, 1, 1], [32, 1, 1])
        };
        Names::new(&k)
    }

    /// The smallest free suffix, as a linear probe from 1 finds it, also after scopes
    /// free names and when a source name already looks like `base_k`.
    #[test]
    fn a_fresh_name_takes_the_smallest_free_suffix() {
        let mut n = names(&["acc", "acc", "acc_2", "acc"]);
        assert_eq!(
            (0..4).map(|i| n.buf(LBufId(i)).to_string()).collect::<Vec<_>>(),
            ["acc", "acc_1", "acc_2", "acc_3"]
        );
        let v = |i| LVarId(i);
        assert_eq!(n.declare(v(0), "s"), "s");
        n.push_scope();
        assert_eq!(n.declare(v(1), "s"), "s_1");
        assert_eq!(n.declare(v(2), "s_2"), "s_2");
        assert_eq!(n.declare(v(3), "s"), "s_3");
        n.pop_scope();
        // s_1, s_2 and s_3 are free again.
        assert_eq!(n.declare(v(4), "s"), "s_1");
        n.push_scope();
        assert_eq!(n.declare(v(5), "s"), "s_2");
        assert_eq!(n.declare(v(6), "acc"), "acc_4");
        n.pop_scope();
        assert_eq!(n.declare(v(7), "s"), "s_2");
        assert_eq!(n.var(v(7)), "s_2");
    }
}
