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

/// `base`, else `base_1`, `base_2`, ... : the first not in `taken`.
fn unique(base: String, taken: impl Fn(&str) -> bool) -> String {
    if !taken(&base) {
        return base;
    }
    (1..).map(|i| format!("{base}_{i}")).find(|n| !taken(n)).expect("an unbounded range has a free name")
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
}

impl Names {
    pub fn new(k: &LKernel) -> Names {
        let mut buf_set = HashSet::new();
        let mut bufs = vec![String::new(); k.bufs.len()];
        // Parameters first so that they keep their source names.
        let order = k.params.iter().map(|p| p.0 as usize).chain(0..k.bufs.len());
        for i in order {
            if bufs[i].is_empty() {
                let n = unique(sanitize(&k.bufs[i].name), |n| buf_set.contains(n));
                buf_set.insert(n.clone());
                bufs[i] = n;
            }
        }
        let tmaps = k
            .tmaps
            .iter()
            .map(|m| {
                let n = unique(sanitize(&m.name), |n| buf_set.contains(n));
                buf_set.insert(n.clone());
                n
            })
            .collect();
        let kernel = sanitize(&k.name);
        let mut names = Names { kernel, bufs, tmaps, buf_set, vars: HashMap::new(), scopes: vec![Vec::new()] };
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

    /// A fresh name for `v` declared in the innermost scope.
    pub fn declare(&mut self, v: LVarId, source: &str) -> String {
        let in_scope = |n: &str| self.buf_set.contains(n) || self.scopes.iter().flatten().any(|s| s == n);
        let n = unique(sanitize(source), in_scope);
        self.scopes.last_mut().expect("the kernel scope is never popped").push(n.clone());
        self.vars.insert(v, n.clone());
        n
    }

    pub fn push_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    pub fn pop_scope(&mut self) {
        self.scopes.pop();
    }
}
