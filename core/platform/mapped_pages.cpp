#include "dwell/core/platform/mapped_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace dwell {
namespace {

struct MapEntry {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    bool readable_only_private = false;  // "r--p" or "r-xp"
    bool file_backed = false;            // a non-zero inode
};

// The /proc/self/maps line holding `addr`, if any.
bool find_mapping(uintptr_t addr, MapEntry* out) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        uintmax_t begin = 0, end = 0, offset = 0, inode = 0;
        char perms[5] = {};
        unsigned dev_major = 0, dev_minor = 0;
        if (std::sscanf(line.c_str(), "%" SCNxMAX "-%" SCNxMAX " %4s %" SCNxMAX " %x:%x %" SCNuMAX,
                        &begin, &end, perms, &offset, &dev_major, &dev_minor, &inode) != 7) {
            continue;
        }
        if (addr < begin || addr >= end) continue;
        out->begin = static_cast<uintptr_t>(begin);
        out->end = static_cast<uintptr_t>(end);
        out->readable_only_private = perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p';
        out->file_backed = inode != 0;
        return true;
    }
    return false;
}

}  // namespace

size_t drop_file_backed_pages(const void* data, size_t bytes) {
    if (data == nullptr || bytes == 0) return 0;
    const auto first = reinterpret_cast<uintptr_t>(data);
    const uintptr_t last = first + bytes;
    MapEntry m;
    if (!find_mapping(first, &m) || last > m.end) return 0;
    if (!m.readable_only_private || !m.file_backed) return 0;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    // Only pages wholly inside the range: neighbours may still be in use.
    const uintptr_t begin = (first + page - 1) / page * page;
    const uintptr_t end = last / page * page;
    if (end <= begin) return 0;
    // The page start as an offset from `data`, so the pointer keeps its
    // provenance.
    auto* start = const_cast<char*>(static_cast<const char*>(data)) + (begin - first);
    if (madvise(start, end - begin, MADV_DONTNEED) != 0) return 0;
    return end - begin;
}

}  // namespace dwell
