// fa3_common.h -- included FIRST by every translation unit of libfa3.so.
//
// Purpose: FA3's cuda_check.h makes CHECK_CUDA / CHECK_CUTLASS call exit(1) on error,
// which would kill the whole Python process.  We pull in FA3's cuda_check.h here (it is
// `#pragma once`, so the later `#include "cuda_check.h"` inside flash_fwd_launch_template.h
// becomes a no-op) and then redefine the two macros to throw a C++ exception instead.
// The exception is caught in the extern "C" entry point of each instantiation TU and turned
// into an error code + error string.
//
// We also wrap cudaGetLastError() so that the CUDA error that cutlass::kernel_launch()
// swallows (it calls cudaGetLastError() and only returns Status::kErrorInternal) is kept
// and reported in the error string.
#pragma once

#include <cuda_runtime_api.h>
#include <cutlass/cutlass.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#define FA3_API extern "C" __attribute__((visibility("default")))
#define FA3_HIDDEN __attribute__((visibility("hidden")))

namespace fa3_detail {

// Last non-success code returned by any cudaGetLastError() call made by FA3/CUTLASS host code.
inline thread_local cudaError_t captured_error = cudaSuccess;

inline cudaError_t capture_last_error() {
    cudaError_t e = (cudaGetLastError)();   // parenthesised name: not macro-expanded
    if (e != cudaSuccess) { captured_error = e; }
    return e;
}

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda(cudaError_t e, char const* expr, char const* file, int line) {
    char buf[1024];
    std::snprintf(buf, sizeof(buf), "CUDA error %d (%s: %s) from `%s` at %s:%d",
                  int(e), cudaGetErrorName(e), cudaGetErrorString(e), expr, file, line);
    throw Error(buf);
}

[[noreturn]] inline void throw_cutlass(cutlass::Status s, char const* expr, char const* file, int line) {
    char buf[1024];
    cudaError_t e = captured_error;
    if (e != cudaSuccess) {
        std::snprintf(buf, sizeof(buf), "CUTLASS error (%s) from `%s` at %s:%d; underlying CUDA error %d (%s: %s)",
                      cutlass::cutlassGetStatusString(s), expr, file, line,
                      int(e), cudaGetErrorName(e), cudaGetErrorString(e));
    } else {
        std::snprintf(buf, sizeof(buf), "CUTLASS error (%s) from `%s` at %s:%d",
                      cutlass::cutlassGetStatusString(s), expr, file, line);
    }
    throw Error(buf);
}

// Run f(); convert any exception into (nonzero code, message in err).
template <typename F>
inline int guarded(char* err, size_t errlen, F&& f) {
    captured_error = cudaSuccess;
    try {
        f();
        return 0;
    } catch (std::exception const& ex) {
        if (err && errlen) { std::snprintf(err, errlen, "%s", ex.what()); }
        return 5;
    } catch (...) {
        if (err && errlen) { std::snprintf(err, errlen, "unknown C++ exception in FA3 launch"); }
        return 6;
    }
}

}  // namespace fa3_detail

#define cudaGetLastError() ::fa3_detail::capture_last_error()

#include "cuda_check.h"   // FA3's; #pragma once => skipped when flash_fwd_launch_template.h includes it

#undef CHECK_CUDA
#undef CHECK_CUTLASS
#define CHECK_CUDA(call)                                                                   \
    do {                                                                                   \
        cudaError_t fa3_status_ = (call);                                                  \
        if (fa3_status_ != cudaSuccess) {                                                  \
            ::fa3_detail::throw_cuda(fa3_status_, #call, __FILE__, __LINE__);              \
        }                                                                                  \
    } while (0)
#define CHECK_CUTLASS(call)                                                                \
    do {                                                                                   \
        cutlass::Status fa3_cstatus_ = (call);                                             \
        if (fa3_cstatus_ != cutlass::Status::kSuccess) {                                   \
            ::fa3_detail::throw_cutlass(fa3_cstatus_, #call, __FILE__, __LINE__);          \
        }                                                                                  \
    } while (0)
// CHECK_CUDA_KERNEL_LAUNCH() is defined by cuda_check.h as CHECK_CUDA(cudaGetLastError()),
// so it picks up both redefinitions above at its point of use.

// Signature of the per-instantiation entry points (defined in fa3_inst.cu, hidden visibility,
// referenced weakly from fa3_capi.cu so the library links with any subset of instantiations).
struct Flash_fwd_params;
typedef int (*fa3_entry_fn)(Flash_fwd_params* params, cudaStream_t stream, char* err, size_t errlen);
