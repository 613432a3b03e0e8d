// fa3_inst.cu -- one FA3 forward instantiation per object file.
// Compiled several times by build.sh with
//   -DFA3_INST_E4M3 or -DFA3_INST_BF16, and -DFA3_INST_HDIM=64|128|256
// It explicitly instantiates
//   run_mha_fwd_<90, T, HDIM, HDIM, /*Split=*/false, /*PagedKVNonTMA=*/false, /*Has_softcap=*/false, /*PackGQA=*/false>
// (same as FA3's instantiations/flash_fwd_hdim{HDIM}_{e4m3,bf16}_sm90.cu). Causal and non-causal are
// both compiled in (run_mha_fwd_ dispatches on params.is_causal at runtime via CAUSAL_LOCAL_SWITCH).
#include "fa3_common.h"
#include "flash_fwd_launch_template.h"

#if !defined(FA3_INST_HDIM)
#error "define FA3_INST_HDIM"
#endif

#if defined(FA3_INST_E4M3)
using FA3Element = cutlass::float_e4m3_t;
#define FA3_ENTRY_NAME_(hd) fa3_entry_e4m3_hd##hd
#elif defined(FA3_INST_BF16)
using FA3Element = cutlass::bfloat16_t;
#define FA3_ENTRY_NAME_(hd) fa3_entry_bf16_hd##hd
#else
#error "define FA3_INST_E4M3 or FA3_INST_BF16"
#endif
#define FA3_ENTRY_NAME(hd) FA3_ENTRY_NAME_(hd)

template void run_mha_fwd_<90, FA3Element, FA3_INST_HDIM, FA3_INST_HDIM, false, false, false, false>(Flash_fwd_params &params, cudaStream_t stream);

extern "C" FA3_HIDDEN int FA3_ENTRY_NAME(FA3_INST_HDIM)(Flash_fwd_params* params, cudaStream_t stream, char* err, size_t errlen) {
    return fa3_detail::guarded(err, errlen, [&] {
        run_mha_fwd_<90, FA3Element, FA3_INST_HDIM, FA3_INST_HDIM, false, false, false, false>(*params, stream);
    });
}
