// Owning handles for NNRt objects: each *_Destroy takes the address of the
// handle, so a unique_ptr with a deleter that holds the function table
// releases it exactly once, and every failure path of the plugin frees what
// it made. Plus the one error type the plugin throws for a failed NNRt call.
//
// Thread-safety: as the objects they own (one thread at a time).
// Ownership: each handle owns its object; the table must outlive it (it is
// loaded for the process).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "nnrt_api.hpp"

namespace dwell::nnrt {

template <typename T>
struct Destroyer {
    const NnrtApi* api = nullptr;
    void operator()(T* p) const;
};

template <>
inline void Destroyer<OH_NNModel>::operator()(OH_NNModel* p) const {
    api->OH_NNModel_Destroy(&p);
}
template <>
inline void Destroyer<OH_NNCompilation>::operator()(OH_NNCompilation* p) const {
    api->OH_NNCompilation_Destroy(&p);
}
template <>
inline void Destroyer<OH_NNExecutor>::operator()(OH_NNExecutor* p) const {
    api->OH_NNExecutor_Destroy(&p);
}
template <>
inline void Destroyer<NN_TensorDesc>::operator()(NN_TensorDesc* p) const {
    api->OH_NNTensorDesc_Destroy(&p);
}
template <>
inline void Destroyer<NN_Tensor>::operator()(NN_Tensor* p) const {
    api->OH_NNTensor_Destroy(&p);
}
template <>
inline void Destroyer<NN_QuantParam>::operator()(NN_QuantParam* p) const {
    api->OH_NNQuantParam_Destroy(&p);
}

template <typename T>
using Handle = std::unique_ptr<T, Destroyer<T>>;

// A failed NNRt call: the message names the call and its return code.
class NnrtError : public std::runtime_error {
public:
    NnrtError(const std::string& call, int32_t rc)
        : std::runtime_error(call + " failed with " + return_code_name(rc)), rc_(rc) {}
    explicit NnrtError(const std::string& what) : std::runtime_error(what), rc_(OH_NN_FAILED) {}
    int32_t code() const { return rc_; }

private:
    int32_t rc_;
};

// Takes ownership of what a *_Create / *_Construct returned; null means the
// call failed and throws naming it.
template <typename T>
Handle<T> own(const NnrtApi& api, T* p, const char* call) {
    if (p == nullptr) throw NnrtError(std::string(call) + " returned null");
    return Handle<T>(p, Destroyer<T>{&api});
}

// Throws unless an NNRt call succeeded.
inline void check(OH_NN_ReturnCode rc, const char* call) {
    if (rc != OH_NN_SUCCESS) throw NnrtError(call, rc);
}

}  // namespace dwell::nnrt
