//! CUDA for the **asynchronous** family, as inline PTX: `cp.async` and the
//! mbarrier operations through small helpers that take generic pointers and
//! convert them to shared-window addresses (`__cvta_generic_to_shared`); group
//! and fence instructions inline:
//!
//! ```text
//! tirx_cp_async_16(&A_smem[tid * 4], &A[tid * 4]);
//! asm volatile("cp.async.commit_group;" ::: "memory");
//! asm volatile("cp.async.wait_group 0;" ::: "memory");
//! tirx_mbarrier_wait(&bar[0], 0);
//! ```
//!
//! Every asm is `volatile` with a `"memory"` clobber: each one orders or performs
//! memory accesses the compiler cannot see. The mbarrier wait spins on
//! `try_wait.parity` (which suspends the thread for a while) on sm_90 and on
//! `test_wait.parity` below it, chosen by `__CUDA_ARCH__`.

use crate::emit::Ctx;
use crate::helpers::Helper;
use crate::CodegenError;
use std::fmt::Write;
use tirx_ir::lir::{AsyncOp, Mbar};

/// The mbarrier helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MbarHelper {
    Init,
    Arrive,
    ArriveExpectTx,
    Wait,
}

impl Ctx<'_> {
    pub(crate) fn asynch(&mut self, a: &AsyncOp) -> Result<(), CodegenError> {
        match a {
            AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes, prefetch } => {
                let h = Helper::CpAsync { bytes: *bytes, fill: src_bytes.is_some(), prefetch: *prefetch };
                let mut args = vec![self.addr(*dst, dst_index)?, self.addr(*src, src_index)?];
                if let Some(e) = src_bytes {
                    args.push(self.e(e)?);
                }
                self.call(h, &args);
            }
            AsyncOp::CommitGroup => self.line("asm volatile(\"cp.async.commit_group;\" ::: \"memory\");"),
            AsyncOp::WaitGroup(n) => self.line(&format!("asm volatile(\"cp.async.wait_group {n};\" ::: \"memory\");")),
            AsyncOp::MbarInit { bar, count } => self.mbar_call(MbarHelper::Init, bar, Some(count))?,
            AsyncOp::MbarArrive { bar } => self.mbar_call(MbarHelper::Arrive, bar, None)?,
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                self.mbar_call(MbarHelper::ArriveExpectTx, bar, Some(bytes))?
            }
            AsyncOp::MbarWait { bar, parity } => self.mbar_call(MbarHelper::Wait, bar, Some(parity))?,
            AsyncOp::FenceProxyAsync => self.line("asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");"),
            AsyncOp::FenceMbarrierInit => {
                self.line("asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");")
            }
        }
        Ok(())
    }

    fn mbar_call(&mut self, h: MbarHelper, bar: &Mbar, arg: Option<&tirx_ir::lir::LExpr>) -> Result<(), CodegenError> {
        let mut args = vec![self.addr(bar.buf, &bar.index)?];
        if let Some(e) = arg {
            args.push(self.e(e)?);
        }
        self.call(Helper::Mbar(h), &args);
        Ok(())
    }

    fn call(&mut self, h: Helper, args: &[String]) {
        self.helpers.insert(h);
        self.line(&format!("{}({});", h.name(), args.join(", ")));
    }
}

/// `tirx_cp_async_16` / `tirx_cp_async_16_fill` / `tirx_cp_async_16_l2_128`.
pub(crate) fn cp_async_name(bytes: u32, fill: bool, prefetch: Option<u32>) -> String {
    let pf = prefetch.map_or(String::new(), |n| format!("_l2_{n}"));
    format!("tirx_cp_async_{bytes}{}{pf}", if fill { "_fill" } else { "" })
}

/// `cp.async` of `bytes` global -> shared; `.cg` (L2 only) exists for 16 bytes, `.ca` for all;
/// `.L2::nB` asks the L2 to fetch `n` bytes around the source.
pub(crate) fn cp_async_source(bytes: u32, fill: bool, prefetch: Option<u32>) -> String {
    let cache = if bytes == 16 { "cg" } else { "ca" };
    let cache = match prefetch {
        Some(n) => format!("{cache}.shared.global.L2::{n}B"),
        None => format!("{cache}.shared.global"),
    };
    let name = cp_async_name(bytes, fill, prefetch);
    let mut s = String::new();
    let _ = writeln!(s, "// cp.async: {bytes} bytes global -> shared, landing at cp.async.wait_group.");
    if let Some(n) = prefetch {
        let _ = writeln!(s, "// The L2 prefetches {n} bytes around the source.");
    }
    if fill {
        let _ = writeln!(s, "// Reads src_bytes of them and zero-fills the rest.");
        let _ = writeln!(s, "__device__ __forceinline__ void {name}(void* dst, const void* src, int src_bytes) {{");
    } else {
        let _ = writeln!(s, "__device__ __forceinline__ void {name}(void* dst, const void* src) {{");
    }
    let _ = writeln!(s, "    unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));");
    if fill {
        let _ = writeln!(
            s,
            "    asm volatile(\"cp.async.{cache} [%0], [%1], {bytes}, %2;\" :: \"r\"(d), \"l\"(src), \"r\"(src_bytes) : \"memory\");"
        );
    } else {
        let _ = writeln!(
            s,
            "    asm volatile(\"cp.async.{cache} [%0], [%1], {bytes};\" :: \"r\"(d), \"l\"(src) : \"memory\");"
        );
    }
    s.push_str("}\n");
    s
}

pub(crate) fn mbar_name(h: MbarHelper) -> &'static str {
    match h {
        MbarHelper::Init => "tirx_mbarrier_init",
        MbarHelper::Arrive => "tirx_mbarrier_arrive",
        MbarHelper::ArriveExpectTx => "tirx_mbarrier_arrive_expect_tx",
        MbarHelper::Wait => "tirx_mbarrier_wait",
    }
}

pub(crate) fn mbar_source(h: MbarHelper) -> String {
    let addr = "    unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(bar));\n";
    let (doc, sig, body) = match h {
        MbarHelper::Init => (
            "mbarrier.init: a barrier expecting `count` arrivals per phase, in phase 0.",
            "void* bar, unsigned count",
            "    asm volatile(\"mbarrier.init.shared.b64 [%0], %1;\" :: \"r\"(a), \"r\"(count) : \"memory\");\n",
        ),
        MbarHelper::Arrive => (
            "mbarrier.arrive: one arrival on the current phase (release).",
            "void* bar",
            "    asm volatile(\"{\\n\\t.reg .b64 state;\\n\\tmbarrier.arrive.shared.b64 state, [%0];\\n\\t}\" :: \"r\"(a) : \"memory\");\n",
        ),
        MbarHelper::ArriveExpectTx => (
            "mbarrier.arrive.expect_tx: `tx` more bytes of transactions for this phase, then one arrival.",
            "void* bar, unsigned tx",
            "    asm volatile(\"{\\n\\t.reg .b64 state;\\n\\tmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\\n\\t}\" :: \"r\"(a), \"r\"(tx) : \"memory\");\n",
        ),
        MbarHelper::Wait => (
            "Blocks until the phase of parity `parity` has completed (acquire).",
            "void* bar, unsigned parity",
            concat!(
                "    unsigned done;\n",
                "    do {\n",
                "#if __CUDA_ARCH__ >= 900\n",
                "        asm volatile(\"{\\n\\t.reg .pred p;\\n\\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n\\tselp.u32 %0, 1, 0, p;\\n\\t}\"\n",
                "#else\n",
                "        asm volatile(\"{\\n\\t.reg .pred p;\\n\\tmbarrier.test_wait.parity.shared.b64 p, [%1], %2;\\n\\tselp.u32 %0, 1, 0, p;\\n\\t}\"\n",
                "#endif\n",
                "                     : \"=r\"(done) : \"r\"(a), \"r\"(parity) : \"memory\");\n",
                "    } while (!done);\n",
            ),
        ),
    };
    format!("// {doc}\n__device__ __forceinline__ void {}({sig}) {{\n{addr}{body}}}\n", mbar_name(h))
}
