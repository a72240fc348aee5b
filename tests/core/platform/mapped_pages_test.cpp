// drop_file_backed_pages gives back the resident pages of a read-only file
// mapping without changing what reads see, and refuses any memory whose
// contents would be lost (anonymous or writable mappings).
#include "dwell/core/platform/mapped_pages.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

namespace dwell {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBytes = size_t{16} << 20;

// Resident bytes of this process (statm's second field, in pages).
size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

uint64_t checksum(const unsigned char* p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += 512) s = s * 31 + p[i];
    return s;
}

class MappedPages : public ::testing::Test {
protected:
    void SetUp() override {
        std::random_device rd;
        path_ = fs::temp_directory_path() / ("dwell-pages-" + std::to_string(rd()));
        std::vector<unsigned char> bytes(kBytes);
        std::mt19937 rng(5);
        for (auto& b : bytes) b = static_cast<unsigned char>(rng());
        std::ofstream(path_, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()),
                   static_cast<std::streamsize>(kBytes));
        want_ = checksum(bytes.data(), kBytes);
        fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
        ASSERT_GE(fd_, 0);
    }
    void TearDown() override {
        if (fd_ >= 0) ::close(fd_);
        fs::remove(path_);
    }
    fs::path path_;
    int fd_ = -1;
    uint64_t want_ = 0;
};

TEST_F(MappedPages, ReadOnlyFileMappingIsDroppedAndStillReads) {
    void* m = ::mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd_, 0);
    ASSERT_NE(m, MAP_FAILED);
    const auto* p = static_cast<const unsigned char*>(m);
    EXPECT_EQ(checksum(p, kBytes), want_);  // every page resident now
    const size_t before = resident_bytes();
    // An unaligned start: only whole pages inside the range go.
    const size_t dropped = drop_file_backed_pages(p + 100, kBytes - 100);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    EXPECT_EQ(dropped, kBytes - page);
    const size_t after = resident_bytes();
    EXPECT_LT(after + kBytes / 2, before) << "before " << before << ", after " << after;
    EXPECT_EQ(checksum(p, kBytes), want_);  // read back from the file
    ::munmap(m, kBytes);
}

TEST_F(MappedPages, AnonymousAndWritableMemoryIsLeftAlone) {
    std::vector<unsigned char> heap(kBytes, 7);
    EXPECT_EQ(drop_file_backed_pages(heap.data(), heap.size()), 0u);
    EXPECT_EQ(heap[kBytes / 2], 7);

    void* shared = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    ASSERT_NE(shared, MAP_FAILED);
    EXPECT_EQ(drop_file_backed_pages(shared, kBytes), 0u);
    ::munmap(shared, kBytes);

    EXPECT_EQ(drop_file_backed_pages(nullptr, 10), 0u);
    EXPECT_EQ(drop_file_backed_pages(heap.data(), 0), 0u);
}

TEST_F(MappedPages, RangeRunningPastItsMappingIsLeftAlone) {
    void* m = ::mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd_, 0);
    ASSERT_NE(m, MAP_FAILED);
    EXPECT_EQ(drop_file_backed_pages(m, kBytes + 4096), 0u);
    ::munmap(m, kBytes);
}

}  // namespace
}  // namespace dwell
