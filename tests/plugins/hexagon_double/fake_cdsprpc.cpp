// A test double of libcdsprpc.so: the FastRPC calls the hexagon plugin uses
// (declared as in plugins/backends/hexagon/fastrpc_api.hpp), with rpcmem
// backed by memfd, and a thread that plays the DSP by running the DSP-side
// dispatcher and portable kernels (plugins/backends/hexagon/dsp) natively.
// It enforces the API's contract — a session is open before any invoke, a
// buffer is mapped before an op uses it, every allocation and mapping is
// released — and records violations for fake_cdsprpc_violations().
//
// Injected faults, read at each invoke from DWELL_FAKE_DSP_FAIL:
// "error:N" (the Nth invoke's batch reports a DSP error), "rpc:N" (the Nth
// invoke itself fails), "slow:N:MS" (the Nth invoke answers after MS ms);
// N counts invokes since the variable last changed.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "dsp_protocol.h"
#include "fault_schedule.hpp"
#include "violation_log.hpp"

namespace {

struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    bool mapped = false;
};

struct State {
    std::mutex mutex;
    std::map<int, Buffer> buffers;  // by fd
    int sessions = 0;
    long invokes = 0;
    fake_vendor::ViolationLog violations;
    fake_vendor::FaultSchedule<1> faults{"DWELL_FAKE_DSP_FAIL"};  // counts invokes

    void violate(const std::string& what) { violations.add(what); }
};

State& state() {
    static State s;
    return s;
}

void* resolve(void* user, dwell_dsp_ref ref) {
    auto* s = static_cast<State*>(user);
    auto it = s->buffers.find(ref.fd);
    if (it == s->buffers.end() || !it->second.mapped) {
        s->violate("an op used fd " + std::to_string(ref.fd) + ", which is not mapped");
        return nullptr;
    }
    if (ref.offset >= it->second.size) return nullptr;
    return static_cast<uint8_t*>(it->second.data) + ref.offset;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* rpcmem_alloc(int heap, uint32_t flags, int size) {
    (void)heap;
    (void)flags;
    if (size <= 0) return nullptr;
    const int fd = ::memfd_create("fake-rpcmem", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    if (::ftruncate(fd, size) != 0) {
        ::close(fd);
        return nullptr;
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ::close(fd);
        return nullptr;
    }
    State& s = state();
    std::lock_guard lock(s.mutex);
    s.buffers[fd] = Buffer{p, static_cast<size_t>(size), false};
    return p;
}

__attribute__((visibility("default"))) int rpcmem_to_fd(void* p) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    for (const auto& [fd, b] : s.buffers)
        if (b.data == p) return fd;
    return -1;
}

__attribute__((visibility("default"))) void rpcmem_free(void* p) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    for (auto it = s.buffers.begin(); it != s.buffers.end(); ++it) {
        if (it->second.data != p) continue;
        if (it->second.mapped) s.violate("rpcmem_free of a buffer still mapped to the DSP");
        ::munmap(it->second.data, it->second.size);
        ::close(it->first);
        s.buffers.erase(it);
        return;
    }
    s.violate("rpcmem_free of memory rpcmem_alloc did not return");
}

__attribute__((visibility("default"))) int fastrpc_mmap(int domain, int fd, void* addr, int offset,
                                                        size_t len, int flags) {
    (void)flags;
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.buffers.find(fd);
    if (domain != 3 || it == s.buffers.end() || it->second.data != addr || offset != 0 ||
        len > it->second.size) {
        s.violate("fastrpc_mmap with arguments that do not name an rpcmem buffer");
        return -1;
    }
    it->second.mapped = true;
    return 0;
}

__attribute__((visibility("default"))) int fastrpc_munmap(int domain, int fd, void* addr,
                                                          size_t len) {
    (void)domain;
    (void)addr;
    (void)len;
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.buffers.find(fd);
    if (it == s.buffers.end() || !it->second.mapped) {
        s.violate("fastrpc_munmap of a buffer not mapped");
        return -1;
    }
    it->second.mapped = false;
    return 0;
}

__attribute__((visibility("default"))) int remote_handle_control(uint32_t req, void* data,
                                                                 uint32_t len) {
    struct Cap {
        uint32_t domain, attribute, capability;
    };
    if (req != 2 || data == nullptr || len < sizeof(Cap)) return -1;
    auto* cap = static_cast<Cap*>(data);
    cap->capability = cap->attribute == 6 ? 0x68 : 0;  // ARCH_VER: v68
    return 0;
}

__attribute__((visibility("default"))) int remote_handle64_open(const char* uri, uint64_t* h) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (uri == nullptr || std::strstr(uri, "libdwell_dsp_skel.so") == nullptr ||
        std::strstr(uri, "_dom=cdsp") == nullptr) {
        s.violate("remote_handle64_open of an unexpected URI");
        return -1;
    }
    ++s.sessions;
    *h = 0x5eed0000u + static_cast<uint64_t>(s.sessions);
    return 0;
}

__attribute__((visibility("default"))) int remote_handle64_close(uint64_t h) {
    (void)h;
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.sessions <= 0) s.violate("remote_handle64_close without an open session");
    --s.sessions;
    return 0;
}

__attribute__((visibility("default"))) int remote_handle64_invoke(uint64_t h, uint32_t scalars,
                                                                  void* args_) {
    (void)h;
    struct Buf {
        void* pv;
        size_t len;
    };
    auto* args = static_cast<Buf*>(args_);  // remote_arg: a union whose buf member comes first
    State& s = state();
    fake_vendor::ScheduledCall call;  // "kind:N[:MS]": the Nth invoke fails that way
    {
        std::lock_guard lock(s.mutex);
        if (s.sessions <= 0) {
            s.violate("remote_handle64_invoke before a session was opened");
            return -1;
        }
        ++s.invokes;
        call = s.faults.count(0);
    }
    const uint32_t method = (scalars >> 24) & 0x1f, n_in = (scalars >> 16) & 0xff,
                   n_out = (scalars >> 8) & 0xff;
    // The skel generated from dwell_dsp.idl unmarshals run() this way.
    const auto* lengths = static_cast<const dwell_dsp_run_lengths*>(args[0].pv);
    if (method != DWELL_DSP_METHOD_RUN || n_in != 2 || n_out != 1 ||
        args[0].len != sizeof(dwell_dsp_run_lengths) || lengths->batch_len != args[1].len ||
        lengths->result_len != args[2].len || args[1].len != sizeof(dwell_dsp_batch) ||
        args[2].len != sizeof(dwell_dsp_result)) {
        std::lock_guard lock(s.mutex);
        s.violate("remote_handle64_invoke with an unexpected method or buffers");
        return -1;
    }
    long ms = 0;
    if (call.is("rpc")) return 0x80000001;  // a FastRPC error code
    // The DSP: its own thread, as on a phone; the caller waits for it.
    const auto* batch = static_cast<const dwell_dsp_batch*>(args[1].pv);
    auto* result = static_cast<dwell_dsp_result*>(args[2].pv);
    const bool slow = call.is("slow", &ms);
    const bool error = call.is("error");
    std::thread dsp([&] {
        if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        std::lock_guard lock(s.mutex);
        dwell_dsp_run_batch(batch, resolve, &s, result);
        if (error) {
            result->status = 1;
            result->failed_op = 0;
            std::strcpy(result->message, "injected DSP error");
        }
    });
    dsp.join();
    return 0;
}

// For tests: the contract violations seen so far, plus what is still open
// (sessions, buffers), as text; returns its length (0: clean).
__attribute__((visibility("default"))) int fake_cdsprpc_violations(char* out, int cap) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    std::string all = s.violations.lines;
    if (s.sessions != 0) all += std::to_string(s.sessions) + " session(s) still open\n";
    if (!s.buffers.empty())
        all += std::to_string(s.buffers.size()) + " rpcmem buffer(s) not freed\n";
    return fake_vendor::copy_text(all, out, cap);
}

__attribute__((visibility("default"))) long fake_cdsprpc_invokes() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return s.invokes;
}

}  // extern "C"
