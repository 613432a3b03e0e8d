// fa3_capi.cu -- plain-C API around FlashAttention-3 (Hopper, sm_90a) forward.
//
// Fills Flash_fwd_params the way hopper/flash_api.cpp (mha_fwd + set_params_fprop) does for a
// plain dense forward: no varlen, no paged KV, no split-KV, no softcap, no local window,
// no append-KV, no rotary, no qv, no PackGQA; heads_k may divide heads (GQA/MQA without packing).
// Then calls run_mha_fwd_<90, T, D, D, false, false, false, false> through a per-instantiation
// entry point (fa3_inst.cu).  All failures return a nonzero code; fa3_last_error() gives the text.
//
// Return codes:
//   0 ok
//   1 invalid argument
//   2 instantiation for (dtype, head_dim) not compiled into this library
//   3 unsupported / unusable device (needs compute capability 9.0, i.e. H100/H200)
//   4 a CUDA error was already pending before the call (it has been consumed; FA3 not launched)
//   5 CUDA or CUTLASS error while launching (incl. cudaGetLastError() after the launch)
//   6 unknown exception
//
// Scheduler workspace: the causal kernels use FA3's DynamicPersistentTileScheduler, which needs
// one int32 tile counter in device memory that is zero at kernel start (the kernel never resets
// it).  mha_fwd allocates a fresh torch tensor and zero_()s it on every call.  Here the caller
// passes `workspace` (>= FA3_WORKSPACE_BYTES = 16 bytes of device memory, 4-byte aligned); for
// causal calls we cudaMemsetAsync(workspace, 0, 4, stream) right before the launch.  The
// workspace must not be shared by launches that can run concurrently (use one per stream).
// Non-causal calls do not touch it (may be NULL).

#include "fa3_common.h"
#include "flash.h"

#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <string>

#define FA3_ABI_VERSION 1
#define FA3_WORKSPACE_BYTES 16

enum { FA3_DTYPE_E4M3 = 0, FA3_DTYPE_BF16 = 1 };

// ---- weak references to the instantiation entry points (absent => nullptr) ----
extern "C" {
__attribute__((weak, visibility("hidden"))) int fa3_entry_e4m3_hd64(Flash_fwd_params*, cudaStream_t, char*, size_t);
__attribute__((weak, visibility("hidden"))) int fa3_entry_e4m3_hd128(Flash_fwd_params*, cudaStream_t, char*, size_t);
__attribute__((weak, visibility("hidden"))) int fa3_entry_e4m3_hd256(Flash_fwd_params*, cudaStream_t, char*, size_t);
__attribute__((weak, visibility("hidden"))) int fa3_entry_bf16_hd64(Flash_fwd_params*, cudaStream_t, char*, size_t);
__attribute__((weak, visibility("hidden"))) int fa3_entry_bf16_hd128(Flash_fwd_params*, cudaStream_t, char*, size_t);
__attribute__((weak, visibility("hidden"))) int fa3_entry_bf16_hd256(Flash_fwd_params*, cudaStream_t, char*, size_t);
}

// run_flash_fwd references prepare_varlen_num_blocks() in a branch that is dead for Varlen=false.
// We do not compile flash_prepare_scheduler.cu; provide a definition so the .so never has an
// unresolved symbol.  It can only be reached for varlen, which this library never sets up.
void prepare_varlen_num_blocks(Flash_fwd_params&, cudaStream_t, bool, int, int, bool) {
    throw fa3_detail::Error("prepare_varlen_num_blocks: varlen is not supported by libfa3");
}

namespace {

thread_local char g_err[2048] = "";

int set_err(int code, char const* fmt, ...) __attribute__((format(printf, 2, 3)));
int set_err(int code, char const* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(g_err, sizeof(g_err), fmt, ap);
    va_end(ap);
    return code;
}

fa3_entry_fn lookup(int dtype, int head_dim) {
    if (dtype == FA3_DTYPE_E4M3) {
        if (head_dim == 64) return fa3_entry_e4m3_hd64;
        if (head_dim == 128) return fa3_entry_e4m3_hd128;
        if (head_dim == 256) return fa3_entry_e4m3_hd256;
    } else if (dtype == FA3_DTYPE_BF16) {
        if (head_dim == 64) return fa3_entry_bf16_hd64;
        if (head_dim == 128) return fa3_entry_bf16_hd128;
        if (head_dim == 256) return fa3_entry_bf16_hd256;
    }
    return nullptr;
}

char const* dtype_name(int dtype) {
    return dtype == FA3_DTYPE_E4M3 ? "e4m3" : dtype == FA3_DTYPE_BF16 ? "bf16" : "?";
}

// Cached compute capability per device (0 = not queried yet).
int g_cc[128] = {0};

int round_multiple(int x, int m) { return (x + m - 1) / m * m; }

bool aligned16(void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

FA3_API int fa3_abi_version(void) { return FA3_ABI_VERSION; }
FA3_API int fa3_workspace_bytes(void) { return FA3_WORKSPACE_BYTES; }
FA3_API char const* fa3_last_error(void) { return g_err; }

// 1 if the (dtype, head_dim) instantiation is compiled into this library.
FA3_API int fa3_has_kernel(int dtype, int head_dim) { return lookup(dtype, head_dim) != nullptr ? 1 : 0; }

// Human-readable environment info (runtime/driver versions, device, built kernels). Returns 0 if the
// CUDA driver/runtime is usable, else nonzero (the text still describes what failed).
FA3_API int fa3_info(char* buf, int buflen) {
    std::string s;
    char tmp[512];
    int rt = 0, drv = 0, rc = 0;
    (cudaRuntimeGetVersion)(&rt);
    cudaError_t e = cudaDriverGetVersion(&drv);
    std::snprintf(tmp, sizeof(tmp), "libfa3 abi=%d cudart(static)=%d.%d driver=%d.%d", FA3_ABI_VERSION,
                  rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10);
    s += tmp;
    if (e != cudaSuccess) { rc = 3; s += std::string(" [cudaDriverGetVersion: ") + cudaGetErrorString(e) + "]"; }
    if (drv != 0 && drv < rt) {
        rc = 3;
        s += " [driver older than the static CUDA runtime: the kernels cannot run; need a driver supporting CUDA >= the runtime version]";
    }
    int dev = -1, n = 0;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        rc = 3;
        s += std::string(" [cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + "]";
        (cudaGetLastError)();
    } else {
        cudaGetDevice(&dev);
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
            std::snprintf(tmp, sizeof(tmp), " devices=%d current=%d (%s, sm_%d%d, %d SMs)", n, dev, prop.name,
                          prop.major, prop.minor, prop.multiProcessorCount);
            s += tmp;
            if (!(prop.major == 9 && prop.minor == 0)) { rc = 3; s += " [not sm_90: kernels are sm_90a only]"; }
        }
        (cudaGetLastError)();
    }
    s += " kernels:";
    int const dts[2] = {FA3_DTYPE_E4M3, FA3_DTYPE_BF16};
    int const hds[3] = {64, 128, 256};
    for (int dt : dts) for (int hd : hds) {
        if (lookup(dt, hd)) { std::snprintf(tmp, sizeof(tmp), " %s_hd%d", dtype_name(dt), hd); s += tmp; }
    }
    if (buf && buflen > 0) { std::snprintf(buf, size_t(buflen), "%s", s.c_str()); }
    return rc;
}

// The forward.  Layouts (strides in ELEMENTS; last dim must be contiguous):
//   q   [batch, seqlen_q, num_heads,   head_dim]  dtype e4m3 or bf16
//   k,v [batch, seqlen_k, num_heads_k, head_dim]  same dtype as q
//   out [batch, seqlen_q, num_heads,   head_dim]  bf16 (for both e4m3 and bf16 inputs)
//   softmax_lse [batch, num_heads, seqlen_q] float32, contiguous (natural-log LSE of scaled scores)
//   q/k/v_descale: float32 [batch, num_heads_k] or NULL (=1.0); only used for e4m3, must be NULL for bf16.
//   device: CUDA device index of the tensors (or -1 = use current); num_sm <= 0 => queried.
//   stream: cudaStream_t as integer (e.g. torch.cuda.current_stream().cuda_stream).
FA3_API int fa3_fwd(
    int dtype, int head_dim,
    void const* q, void const* k, void const* v, void* out, float* softmax_lse,
    int64_t q_batch_stride, int64_t q_row_stride, int64_t q_head_stride,
    int64_t k_batch_stride, int64_t k_row_stride, int64_t k_head_stride,
    int64_t v_batch_stride, int64_t v_row_stride, int64_t v_head_stride,
    int64_t o_batch_stride, int64_t o_row_stride, int64_t o_head_stride,
    int batch, int seqlen_q, int seqlen_k, int num_heads, int num_heads_k,
    float softmax_scale, int is_causal,
    float const* q_descale, float const* k_descale, float const* v_descale,
    int64_t q_descale_batch_stride, int64_t q_descale_head_stride,
    int64_t k_descale_batch_stride, int64_t k_descale_head_stride,
    int64_t v_descale_batch_stride, int64_t v_descale_head_stride,
    int* workspace, int num_sm, int device, uintptr_t stream_handle)
{
    g_err[0] = '\0';
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);

    // ---------------- argument validation (mirrors mha_fwd's TORCH_CHECKs) ----------------
    if (dtype != FA3_DTYPE_E4M3 && dtype != FA3_DTYPE_BF16) return set_err(1, "dtype must be 0 (e4m3) or 1 (bf16), got %d", dtype);
    if (head_dim != 64 && head_dim != 128 && head_dim != 256) return set_err(1, "head_dim must be 64, 128 or 256, got %d", head_dim);
    fa3_entry_fn entry = lookup(dtype, head_dim);
    if (!entry) return set_err(2, "FA3 instantiation %s_hd%d is not compiled into this libfa3.so", dtype_name(dtype), head_dim);
    if (!q || !k || !v || !out || !softmax_lse) return set_err(1, "null q/k/v/out/softmax_lse pointer");
    if (batch <= 0 || seqlen_q <= 0 || seqlen_k <= 0 || num_heads <= 0 || num_heads_k <= 0)
        return set_err(1, "sizes must be positive: batch=%d seqlen_q=%d seqlen_k=%d heads=%d heads_k=%d",
                       batch, seqlen_q, seqlen_k, num_heads, num_heads_k);
    if (num_heads % num_heads_k != 0)
        return set_err(1, "num_heads (%d) must be a multiple of num_heads_k (%d)", num_heads, num_heads_k);
    if (!(softmax_scale > 0.f) || softmax_scale != softmax_scale) return set_err(1, "softmax_scale must be > 0");
    // TMA needs 16-byte aligned base addresses and 16-byte multiple strides (except the unit stride).
    int const in_bytes = dtype == FA3_DTYPE_E4M3 ? 1 : 2;
    struct { char const* name; void const* p; int64_t sb, sr, sh; int eb; } const tens[4] = {
        {"q", q, q_batch_stride, q_row_stride, q_head_stride, in_bytes},
        {"k", k, k_batch_stride, k_row_stride, k_head_stride, in_bytes},
        {"v", v, v_batch_stride, v_row_stride, v_head_stride, in_bytes},
        {"out", out, o_batch_stride, o_row_stride, o_head_stride, 2}};
    for (auto const& t : tens) {
        if (!aligned16(t.p)) return set_err(1, "%s pointer must be 16-byte aligned", t.name);
        if (t.sr <= 0 || t.sh <= 0 || t.sb < 0)
            return set_err(1, "%s strides must be positive (batch=%lld row=%lld head=%lld)", t.name,
                           (long long)t.sb, (long long)t.sr, (long long)t.sh);
        if ((t.sb * t.eb) % 16 || (t.sr * t.eb) % 16 || (t.sh * t.eb) % 16)
            return set_err(1, "%s strides (batch=%lld row=%lld head=%lld elements) must be multiples of 16 bytes", t.name,
                           (long long)t.sb, (long long)t.sr, (long long)t.sh);
    }
    if (dtype == FA3_DTYPE_BF16 && (q_descale || k_descale || v_descale))
        return set_err(1, "q/k/v_descale are only supported for e4m3 inputs");

    // ---------------- device ----------------
    cudaError_t e;
    int cur = -1;
    e = (cudaGetDevice)(&cur);
    if (e != cudaSuccess) { (cudaGetLastError)(); return set_err(3, "cudaGetDevice failed: %s: %s", cudaGetErrorName(e), cudaGetErrorString(e)); }
    if (device >= 0 && device != cur) {
        e = cudaSetDevice(device);
        if (e != cudaSuccess) { (cudaGetLastError)(); return set_err(3, "cudaSetDevice(%d) failed: %s: %s", device, cudaGetErrorName(e), cudaGetErrorString(e)); }
        cur = device;
    }
    if (cur < 0 || cur >= 128) return set_err(3, "device index %d out of range", cur);
    if (g_cc[cur] == 0) {
        int major = 0, minor = 0;
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cur);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cur);
        if (e != cudaSuccess) { (cudaGetLastError)(); return set_err(3, "cudaDeviceGetAttribute failed: %s: %s", cudaGetErrorName(e), cudaGetErrorString(e)); }
        g_cc[cur] = major * 10 + minor;
    }
    if (g_cc[cur] != 90) return set_err(3, "FA3 kernels are compiled for sm_90a only; device %d is sm_%d", cur, g_cc[cur]);
    if (num_sm <= 0) {
        e = cudaDeviceGetAttribute(&num_sm, cudaDevAttrMultiProcessorCount, cur);
        if (e != cudaSuccess) { (cudaGetLastError)(); return set_err(3, "cudaDeviceGetAttribute(SM count) failed: %s", cudaGetErrorString(e)); }
    }

    // An error left pending by someone else would otherwise be reported as an FA3 launch failure.
    e = (cudaGetLastError)();
    if (e != cudaSuccess)
        return set_err(4, "a CUDA error was already pending before the FA3 call (FA3 not launched): %s: %s",
                       cudaGetErrorName(e), cudaGetErrorString(e));

    // ---------------- mha_fwd / set_params_fprop ----------------
    // causal=true is the same as causal=false when seqlen_q == 1 (mha_fwd does this too).
    bool causal = is_causal != 0;
    int window_size_left = -1, window_size_right = -1;
    int const attention_chunk = 0;
    if (seqlen_q == 1 && window_size_left == -1 && window_size_right == -1 && attention_chunk == 0) { causal = false; }
    if (causal) { window_size_right = 0; }

    Flash_fwd_params params;
    params = {};
    params.is_bf16 = dtype == FA3_DTYPE_BF16;
    params.is_e4m3 = dtype == FA3_DTYPE_E4M3;
    params.q_ptr = const_cast<void*>(q);
    params.k_ptr = const_cast<void*>(k);
    params.v_ptr = const_cast<void*>(v);
    params.q_row_stride = q_row_stride;
    params.k_row_stride = k_row_stride;
    params.v_row_stride = v_row_stride;
    params.q_head_stride = q_head_stride;
    params.k_head_stride = k_head_stride;
    params.v_head_stride = v_head_stride;
    params.v_dim_stride = 1;
    params.o_ptr = out;
    params.o_row_stride = o_row_stride;
    params.o_head_stride = o_head_stride;
    params.q_batch_stride = q_batch_stride;
    params.o_batch_stride = o_batch_stride;
    params.k_batch_stride = k_batch_stride;
    params.v_batch_stride = v_batch_stride;
    params.cu_seqlens_q = nullptr;
    params.cu_seqlens_k = nullptr;
    params.seqused_q = nullptr;
    params.seqused_k = nullptr;
    params.softmax_lse_ptr = softmax_lse;
    params.b = batch;
    params.h = num_heads;
    params.h_k = num_heads_k;
    params.seqlen_q = seqlen_q;
    params.seqlen_k = seqlen_k;
    params.seqlen_q_rounded = round_multiple(seqlen_q, 128);
    params.seqlen_k_rounded = round_multiple(seqlen_k, 128);
    params.d = head_dim;
    params.d_rounded = head_dim;  // round_up_headdim(64|128|256) == itself
    params.scale_softmax = softmax_scale;
    params.softcap = 0.f;
    params.p_dropout = 1.f;  // 1 - p_dropout(=0)
    params.p_dropout_in_uint8_t = uint8_t(255);
    params.rp_dropout = 1.f;
    params.is_causal = window_size_left < 0 && window_size_right == 0 && attention_chunk == 0;
    params.is_local = (window_size_left >= 0 || window_size_right >= 0 || attention_chunk >= 1) && !params.is_causal;
    if (window_size_left < 0) { window_size_left = seqlen_k - 1; }
    if (window_size_right < 0) { window_size_right = seqlen_q - 1; }
    params.window_size_left = window_size_left;
    params.window_size_right = window_size_right;
    params.attention_chunk = attention_chunk;
    params.arch = g_cc[cur];
    params.num_sm = num_sm;  // sm_margin = 0
    // mha_fwd, after set_params_fprop:
    params.total_q = batch * seqlen_q;
    params.total_k = batch * seqlen_k;
    params.b_k = batch;
    params.dv = head_dim;
    params.dv_rounded = head_dim;
    params.page_table = nullptr;
    params.page_size = 1;
    params.num_pages = 0;
    params.knew_ptr = nullptr;
    params.vnew_ptr = nullptr;
    params.prepare_varlen_pdl = false;       // use_prepare_varlen = is_varlen = false
    params.num_splits_dynamic_ptr = nullptr;
    params.pagedkv_tma = false;              // get_pagedkv_tma(): no page table
    params.num_splits = 1;                   // get_num_splits() == 1 with FLASHATTENTION_DISABLE_SPLIT
    params.pack_gqa = false;                 // get_pack_gqa() == false with FLASHATTENTION_DISABLE_PACKGQA (or h == h_k)
    bool const scheduler_needs_semaphore = params.is_causal || params.is_local;  // arch 90, num_splits 1, !varlen
    params.varlen_sort_batches = !params.is_local;
    params.head_swizzle = params.is_causal || params.is_local;
    params.skip_scheduler_metadata_computation = false;
    params.num_m_blocks_ptr = nullptr;
    params.varlen_batch_idx_ptr = nullptr;
    params.num_nheads_in_l2_ptr = nullptr;
    params.tile_count_semaphore = nullptr;
    params.tile_count_semaphore_offset = 0;  // deviation: our semaphore lives at offset 0 of `workspace`
    if (scheduler_needs_semaphore) {
        if (!workspace) return set_err(1, "causal attention needs a device workspace of >= %d bytes (got NULL)", FA3_WORKSPACE_BYTES);
        if (reinterpret_cast<uintptr_t>(workspace) & 3u) return set_err(1, "workspace must be 4-byte aligned");
        params.tile_count_semaphore = workspace;
    }
    params.rotary_dim = 0;
    params.qv_ptr = nullptr;
    params.kv_batch_idx = nullptr;
    params.leftpad_k = nullptr;
    if (params.is_e4m3) {
        params.q_descale_ptr = const_cast<float*>(q_descale);
        params.k_descale_ptr = const_cast<float*>(k_descale);
        params.v_descale_ptr = const_cast<float*>(v_descale);
        params.q_descale_batch_stride = q_descale_batch_stride;
        params.q_descale_head_stride = q_descale_head_stride;
        params.k_descale_batch_stride = k_descale_batch_stride;
        params.k_descale_head_stride = k_descale_head_stride;
        params.v_descale_batch_stride = v_descale_batch_stride;
        params.v_descale_head_stride = v_descale_head_stride;
    }

    // ---------------- launch ----------------
    if (scheduler_needs_semaphore) {
        // mha_fwd: tile_count_semaphore.zero_() on the current stream before run_mha_fwd.
        e = cudaMemsetAsync(workspace, 0, sizeof(int), stream);
        if (e != cudaSuccess) {
            (cudaGetLastError)();
            return set_err(5, "cudaMemsetAsync(workspace) failed: %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
        }
    }
    char err[1536] = "";
    int rc = entry(&params, stream, err, sizeof(err));
    if (rc != 0) {
        (cudaGetLastError)();  // clear a non-sticky launch error so later calls are not blamed
        return set_err(rc, "FA3 %s_hd%d %s launch failed: %s", dtype_name(dtype), head_dim,
                       params.is_causal ? "causal" : "non-causal", err);
    }
    e = (cudaGetLastError)();
    if (e != cudaSuccess)
        return set_err(5, "FA3 %s_hd%d %s: cudaGetLastError after launch: %s: %s", dtype_name(dtype), head_dim,
                       params.is_causal ? "causal" : "non-causal", cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}
