#include "neuron_adapter_api.hpp"

#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"

namespace dwell::apu {

namespace {

plugin_kit::LoadedLibrary<NeuronAdapterApi> load(const std::string& library) {
    // A library lacking a call stays loaded: dlclose of a vendor library
    // that may have started threads is not safe.
    return plugin_kit::load_vendor_library<NeuronAdapterApi>(
        library, "NeuronAdapter", [](const auto& resolve, NeuronAdapterApi& a) {
#define DWELL_APU_RESOLVE(name) resolve(#name, a.name)
            return DWELL_APU_RESOLVE(Neuron_getVersion) &&
                   DWELL_APU_RESOLVE(NeuronMemory_createFromFd) &&
                   DWELL_APU_RESOLVE(NeuronMemory_free) && DWELL_APU_RESOLVE(NeuronModel_create) &&
                   DWELL_APU_RESOLVE(NeuronModel_free) && DWELL_APU_RESOLVE(NeuronModel_finish) &&
                   DWELL_APU_RESOLVE(NeuronModel_addOperand) &&
                   DWELL_APU_RESOLVE(NeuronModel_setOperandValue) &&
                   DWELL_APU_RESOLVE(NeuronModel_setOperandSymmPerChannelQuantParams) &&
                   DWELL_APU_RESOLVE(NeuronModel_addOperation) &&
                   DWELL_APU_RESOLVE(NeuronModel_identifyInputsAndOutputs) &&
                   DWELL_APU_RESOLVE(NeuronCompilation_create) &&
                   DWELL_APU_RESOLVE(NeuronCompilation_free) &&
                   DWELL_APU_RESOLVE(NeuronCompilation_finish) &&
                   DWELL_APU_RESOLVE(NeuronCompilation_setPreference) &&
                   DWELL_APU_RESOLVE(NeuronCompilation_setPriority) &&
                   DWELL_APU_RESOLVE(NeuronCompilation_setCaching) &&
                   DWELL_APU_RESOLVE(NeuronExecution_create) &&
                   DWELL_APU_RESOLVE(NeuronExecution_free) &&
                   DWELL_APU_RESOLVE(NeuronExecution_setInputFromMemory) &&
                   DWELL_APU_RESOLVE(NeuronExecution_setOutputFromMemory) &&
                   DWELL_APU_RESOLVE(NeuronExecution_compute);
#undef DWELL_APU_RESOLVE
        });
}

}  // namespace

const std::vector<std::string>& default_library_names() {
    // The NeuroPilot names, newest first: the SDK adapter, the one some
    // vendor partitions ship, then the plain adapter.
    static const std::vector<std::string> names = {
        "libneuronusdk_adapter.mtk.so", "libneuron_adapter_mgvi.so", "libneuron_adapter.so"};
    return names;
}

const NeuronAdapterApi* load_neuron_adapter(const std::string& library, std::string& why) {
    return plugin_kit::load_once<NeuronAdapterApi>(library, why, load);
}

const NeuronAdapterApi* load_first_neuron_adapter(const std::vector<std::string>& libraries,
                                                  std::string& loaded, std::string& why) {
    std::string tried, last;
    for (const std::string& lib : libraries) {
        std::string w;
        if (const NeuronAdapterApi* api = load_neuron_adapter(lib, w)) {
            loaded = lib;
            return api;
        }
        // A library that loads but lacks a call is worth naming on its own.
        if (w.find(" not found") == std::string::npos) last = w;
        tried += (tried.empty() ? "" : ", ") + lib;
    }
    why = last.empty() ? "NeuronAdapter library not found (tried " + tried + ")" : last;
    return nullptr;
}

std::string neuron_result_name(int code) {
    static const char* const names[] = {
        "NEURON_NO_ERROR",        "NEURON_OUT_OF_MEMORY", "NEURON_INCOMPLETE",
        "NEURON_UNEXPECTED_NULL", "NEURON_BAD_DATA",      "NEURON_OP_FAILED",
        "NEURON_UNMAPPABLE",      "NEURON_BAD_STATE",     "NEURON_BAD_VERSION"};
    const std::string name = code >= 0 && code < static_cast<int>(sizeof names / sizeof names[0])
                                 ? names[code]
                                 : "result";
    return name + " (" + std::to_string(code) + ")";
}

}  // namespace dwell::apu
