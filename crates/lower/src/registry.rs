//! The CUDA registry: every family's variants. The one module that names
//! every family, above them all (a new family registers here).

use crate::variant::Registry;

impl Registry {
    /// The CUDA variants.
    pub fn cuda() -> Registry {
        let mut r = Registry::new();
        crate::copy::register(&mut r);
        crate::copy_async::register(&mut r);
        crate::elementwise::register(&mut r);
        crate::gemm::register(&mut r);
        crate::permute::register(&mut r);
        crate::reduce::register(&mut r);
        r
    }
}
