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
//!
//! TMA copies call one helper per form (`tirx_tma_load_2d(&A_s[0], &A_tmap, c0,
//! c1, &bar[0])`), taking the tensor map by the generic address of its
//! `__grid_constant__` parameter; bulk groups and cluster barriers are inline;
//! a bulk copy to a peer CTA maps both addresses with `mapa` in its helper.

use crate::emit::{Ctx, Emit};
use crate::helpers::{Helper, MbarHelper};
use crate::CodegenError;
use std::fmt::Write;
use tirx_ir::lir::{cache_policy, AsyncOp, LExpr, Mbar, TmaCopy};

impl Emit for AsyncOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        cx.asynch(self)?;
        Ok(true)
    }
}

impl Ctx<'_> {
    fn asynch(&mut self, a: &AsyncOp) -> Result<(), CodegenError> {
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
            AsyncOp::MbarArrive { bar, cta: None, .. } => self.mbar_call(MbarHelper::Arrive, bar, None)?,
            AsyncOp::MbarArrive { bar, cta: Some(rank), cta_scope } => {
                let h = if *cta_scope { MbarHelper::ArriveRemoteCta } else { MbarHelper::ArriveRemote };
                self.mbar_call(h, bar, Some(rank))?
            }
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                self.mbar_call(MbarHelper::ArriveExpectTx, bar, Some(bytes))?
            }
            AsyncOp::MbarWait { bar, parity } => self.mbar_call(MbarHelper::Wait, bar, Some(parity))?,
            AsyncOp::FenceProxyAsync => self.line("asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");"),
            AsyncOp::FenceMbarrierInit => {
                self.line("asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");")
            }
            AsyncOp::TmaLoad(c) => self.tma(c, false)?,
            AsyncOp::TmaStore(c) => self.tma(c, true)?,
            AsyncOp::BulkCommit => self.line("asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");"),
            AsyncOp::BulkWait { n, read } => {
                let r = if *read { ".read" } else { "" };
                self.line(&format!("asm volatile(\"cp.async.bulk.wait_group{r} {n};\" ::: \"memory\");"))
            }
            AsyncOp::BulkToPeer { dst, dst_index, src, src_index, bytes, bar, rank } => {
                let args = vec![
                    self.addr(*dst, dst_index)?,
                    self.addr(*src, src_index)?,
                    format!("{bytes}u"),
                    self.addr(bar.buf, &bar.index)?,
                    self.e(rank)?,
                ];
                self.call(Helper::BulkToPeer, &args);
            }
            AsyncOp::ClusterBarrier { .. } => {
                self.line(&format!("asm volatile(\"{}.aligned;\" ::: \"memory\");", a.name()))
            }
            AsyncOp::GridGroupSync { word, word_index, size } => {
                let args = [format!("reinterpret_cast<unsigned*>({})", self.addr(*word, word_index)?), self.e(size)?];
                self.call(Helper::GridGroupSync, &args);
            }
        }
        Ok(())
    }

    /// `tirx_tma_load_2d(&A_s[0], &A_tmap, c0, c1, &bar[0])` / `tirx_tma_store_2d(&A_tmap, c0, c1, &A_s[0])`.
    fn tma(&mut self, c: &TmaCopy, store: bool) -> Result<(), CodegenError> {
        let map = format!("&{}", self.names.tmap(c.map)?);
        let coords = c.coords.iter().map(|e| self.e(e)).collect::<Result<Vec<_>, _>>()?;
        let smem = self.addr(c.smem, &c.smem_index)?;
        let mut args = vec![];
        if store {
            args.push(map);
            args.extend(coords);
            args.push(smem);
        } else {
            args.push(smem);
            args.push(map);
            args.extend(coords);
            let bar = c.bar.as_ref().ok_or_else(|| CodegenError::InvalidLir("a TMA load without a barrier".into()))?;
            args.push(self.addr(bar.buf, &bar.index)?);
            if let Some(m) = &c.multicast {
                args.push(self.e(m)?);
            }
        }
        if let Some(e) = c.cache {
            args.push(format!("{:#x}ull /* {} */", cache_policy(e), e.name()));
        }
        let h = Helper::Tma {
            rank: c.coords.len() as u8,
            store,
            multicast: c.multicast.is_some(),
            cache: c.cache.is_some(),
            reduce: c.reduce.is_some(),
        };
        self.call(h, &args);
        Ok(())
    }

    fn mbar_call(&mut self, h: MbarHelper, bar: &Mbar, arg: Option<&LExpr>) -> Result<(), CodegenError> {
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

/// `cp.async` of `bytes` global -> shared; `.cg` (L2 only) exists for 16 bytes, `.ca` for all;
/// `.L2::nB` asks the L2 to fetch `n` bytes around the source.
pub(crate) fn cp_async_source(bytes: u32, fill: bool, prefetch: Option<u32>) -> String {
    let cache = if bytes == 16 { "cg" } else { "ca" };
    let cache = match prefetch {
        Some(n) => format!("{cache}.shared.global.L2::{n}B"),
        None => format!("{cache}.shared.global"),
    };
    let name = Helper::CpAsync { bytes, fill, prefetch }.name();
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

/// A TMA tensor copy of a `rank`-D box. Loads: box of `map` at the coordinates into
/// shared memory, its bytes completing on the mbarrier (and with a multicast mask
/// into every CTA of the cluster the mask names). Stores: shared memory into the box,
/// in the thread's open bulk group (`reduce`: added into the box, element by element
/// atomically). Coordinates are innermost first.
pub(crate) fn tma_source(rank: u8, store: bool, multicast: bool, cache: bool, reduce: bool) -> String {
    let name = Helper::Tma { rank, store, multicast, cache, reduce }.name();
    let coords: Vec<String> = (0..rank).map(|i| format!("int c{i}")).collect();
    let n = usize::from(rank);
    // Operand numbers: the map and the coordinates first for stores, after the shared address for loads.
    let first = if store { 1 } else { 2 };
    let slots: Vec<String> = (first..first + n).map(|i| format!("%{i}")).collect();
    let cin: Vec<String> = (0..n).map(|i| format!("\"r\"(c{i})")).collect();
    let mut s = String::new();
    let l2 = if cache { ".L2::cache_hint" } else { "" };
    if store {
        if reduce {
            let _ = writeln!(
                s,
                "// TMA reduce-add: the shared box at `src` added into the {rank}-D box of `map` at (c0..), in this thread's bulk group."
            );
        } else {
            let _ = writeln!(s, "// TMA store: the shared box at `src` to the {rank}-D box of `map` at (c0..), in this thread's bulk group.");
        }
        let mut sig = vec!["const CUtensorMap* map".to_string()];
        sig.extend(coords);
        sig.push("const void* src".into());
        if cache {
            sig.push("unsigned long long policy".into());
        }
        let _ = writeln!(s, "__device__ __forceinline__ void {name}({}) {{", sig.join(", "));
        let _ = writeln!(s, "    unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(src));");
        let src = n + 1;
        let pol = if cache { format!(", %{}", n + 2) } else { String::new() };
        let _ = writeln!(
            s,
            "    asm volatile(\"{}.{rank}d.global.shared::cta{}.tile.bulk_group{l2} [%0, {{{}}}], [%{src}]{pol};\"",
            if reduce { "cp.reduce.async.bulk.tensor" } else { "cp.async.bulk.tensor" },
            if reduce { ".add" } else { "" },
            slots.join(", ")
        );
        let mut ins = vec!["\"l\"(reinterpret_cast<unsigned long long>(map))".to_string()];
        ins.extend(cin);
        ins.push("\"r\"(sa)".into());
        if cache {
            ins.push("\"l\"(policy)".into());
        }
        let _ = writeln!(s, "                 :: {} : \"memory\");", ins.join(", "));
    } else {
        let what = if multicast { " into every CTA of the cluster in `cta_mask`" } else { "" };
        let _ = writeln!(
            s,
            "// TMA load: the {rank}-D box of `map` at (c0..) to shared memory at `dst`{what}, its bytes completing on `bar`."
        );
        let mut sig = vec!["void* dst".to_string(), "const CUtensorMap* map".to_string()];
        sig.extend(coords);
        sig.push("void* bar".into());
        if multicast {
            sig.push("unsigned short cta_mask".into());
        }
        if cache {
            sig.push("unsigned long long policy".into());
        }
        let _ = writeln!(s, "__device__ __forceinline__ void {name}({}) {{", sig.join(", "));
        let _ = writeln!(s, "    unsigned da = static_cast<unsigned>(__cvta_generic_to_shared(dst));");
        let _ = writeln!(s, "    unsigned ba = static_cast<unsigned>(__cvta_generic_to_shared(bar));");
        let mut next = n + 2;
        let bar = next;
        next += 1;
        let mut tail = String::new();
        if multicast {
            tail.push_str(&format!(", %{next}"));
            next += 1;
        }
        if cache {
            tail.push_str(&format!(", %{next}"));
        }
        let mc = if multicast { ".multicast::cluster" } else { "" };
        let _ = writeln!(
            s,
            "    asm volatile(\"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes{mc}{l2} [%0], [%1, {{{}}}], [%{bar}]{tail};\"",
            slots.join(", ")
        );
        let mut ins = vec!["\"r\"(da)".to_string(), "\"l\"(reinterpret_cast<unsigned long long>(map))".to_string()];
        ins.extend(cin);
        ins.push("\"r\"(ba)".into());
        if multicast {
            ins.push("\"h\"(cta_mask)".into());
        }
        if cache {
            ins.push("\"l\"(policy)".into());
        }
        let _ = writeln!(s, "                 :: {} : \"memory\");", ins.join(", "));
    }
    s.push_str("}\n");
    s
}

/// `bytes` of this CTA's shared memory at `src` to `dst` of the CTA of `rank` in the
/// cluster (both addresses mapped with `mapa`), completing them on that CTA's `bar`.
pub(crate) fn bulk_to_peer_source() -> String {
    concat!(
        "// Bulk copy of `bytes` from this CTA's shared memory to the same-offset buffer `dst` of CTA `rank` of the\n",
        "// cluster (DSMEM), completing them on that CTA's mbarrier at `bar`'s offset.\n",
        "__device__ __forceinline__ void tirx_bulk_copy_to_peer(void* dst, const void* src, unsigned bytes, void* bar, unsigned rank) {\n",
        "    unsigned da = static_cast<unsigned>(__cvta_generic_to_shared(dst));\n",
        "    unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(src));\n",
        "    unsigned ba = static_cast<unsigned>(__cvta_generic_to_shared(bar));\n",
        "    unsigned rda, rba;\n",
        "    asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(rda) : \"r\"(da), \"r\"(rank));\n",
        "    asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(rba) : \"r\"(ba), \"r\"(rank));\n",
        "    asm volatile(\"cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\"\n",
        "                 :: \"r\"(rda), \"r\"(sa), \"r\"(bytes), \"r\"(rba) : \"memory\");\n",
        "}\n",
    )
    .to_string()
}

pub(crate) fn grid_group_sync_source() -> String {
    concat!(
        "// This CTA meets the `size` CTAs of its cooperative grid that sync on the global `word` (its low\n",
        "// 31 bits 0 between phases): the first thread adds 1 (acq_rel); the last arriver adds 2^31 - size\n",
        "// (release: the count back to 0, the top bit flipped); the others spin on an acquire load until\n",
        "// the top bit differs from what their add returned. CTA barriers before and after, not `.aligned`\n",
        "// (a warp-specialised kernel's roles meet them from their own branches). A wait of 2^26 polls\n",
        "// (tens of seconds) is a group that never fills: a trap, not a hang.\n",
        "__device__ __forceinline__ void tirx_grid_group_sync(unsigned* word, unsigned size) {\n",
        "    asm volatile(\"barrier.sync 0;\" ::: \"memory\");\n",
        "    if ((threadIdx.x | threadIdx.y | threadIdx.z) == 0) {\n",
        "        unsigned old;\n",
        "        asm volatile(\"atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;\" : \"=r\"(old) : \"l\"(word) : \"memory\");\n",
        "        if (((old + 1u) & 0x7fffffffu) == size) {\n",
        "            asm volatile(\"red.release.gpu.global.add.u32 [%0], %1;\" :: \"l\"(word), \"r\"(0x80000000u - size) : \"memory\");\n",
        "        } else {\n",
        "            unsigned cur, polls = 0;\n",
        "            do {\n",
        "                asm volatile(\"ld.acquire.gpu.global.u32 %0, [%1];\" : \"=r\"(cur) : \"l\"(word) : \"memory\");\n",
        "                if (++polls == (1u << 26)) __trap();\n",
        "            } while (((cur ^ old) & 0x80000000u) == 0u);\n",
        "        }\n",
        "    }\n",
        "    asm volatile(\"barrier.sync 0;\" ::: \"memory\");\n",
        "}\n",
    )
    .to_string()
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
        MbarHelper::ArriveRemote => (
            "mbarrier.arrive on the barrier at `bar`'s offset in the cluster's CTA `rank` (release at cluster scope).",
            "void* bar, unsigned rank",
            concat!(
                "    unsigned ra;\n",
                "    asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(ra) : \"r\"(a), \"r\"(rank));\n",
                "    asm volatile(\"mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\" :: \"r\"(ra) : \"memory\");\n",
            ),
        ),
        MbarHelper::ArriveRemoteCta => (
            "mbarrier.arrive on the barrier at `bar`'s offset in the cluster's CTA `rank`, at CTA scope (no fence: what it orders for the peer is the reads before it).",
            "void* bar, unsigned rank",
            concat!(
                "    unsigned ra;\n",
                "    asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(ra) : \"r\"(a), \"r\"(rank));\n",
                "    asm volatile(\"mbarrier.arrive.shared::cluster.b64 _, [%0];\" :: \"r\"(ra) : \"memory\");\n",
            ),
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
    format!("// {doc}\n__device__ __forceinline__ void {}({sig}) {{\n{addr}{body}}}\n", Helper::Mbar(h).name())
}
