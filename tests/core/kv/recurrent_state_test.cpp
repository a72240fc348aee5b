// The session's recurrent state store (ABI 1.6): zero-filled, every layer's
// states at their own place in one buffer charged to the budget as KV
// memory, refused in one line when it does not fit or is absurd.
#include "dwell/core/kv/recurrent_state.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

uint64_t kv_used(const MemoryPool& pool) {
    return pool.stats().used_by[static_cast<int>(MemoryUse::Kv)];
}

TEST(RecurrentState, EveryLayerHasItsStatesZeroFilledInOneChargedBuffer) {
    MemoryPool pool(kPage, 0);
    RecurrentState s(pool, 3, {6, 2});
    EXPECT_FALSE(s.empty());
    EXPECT_EQ(s.bytes(), 3u * 8 * sizeof(float));
    EXPECT_GE(kv_used(pool), s.bytes());
    ASSERT_EQ(s.all().size(), 24u);
    for (float v : s.all()) EXPECT_EQ(v, 0.0f);
    // Layer l's state 0, then its state 1, layer after layer.
    for (int32_t l = 0; l < 3; ++l) {
        const dwell_tensor* t0 = s.tensor(l, 0);
        const dwell_tensor* t1 = s.tensor(l, 1);
        ASSERT_NE(t0, nullptr);
        ASSERT_NE(t1, nullptr);
        EXPECT_EQ(t0->dtype, DWELL_F32);
        EXPECT_EQ(dwell_tensor_nelements(t0), 6);
        EXPECT_EQ(dwell_tensor_nelements(t1), 2);
        EXPECT_EQ(static_cast<const float*>(t0->data), s.all().data() + l * 8);
        EXPECT_EQ(static_cast<const float*>(t1->data), s.all().data() + l * 8 + 6);
        s.values(l, 1)[1] = static_cast<float>(l + 1);
    }
    EXPECT_EQ(s.all()[7], 1.0f);
    EXPECT_EQ(s.all()[23], 3.0f);
    EXPECT_EQ(s.tensor(3, 0), nullptr);
    EXPECT_EQ(s.tensor(-1, 0), nullptr);
    EXPECT_EQ(s.tensor(0, 2), nullptr);

    std::vector<float> copy(s.all().begin(), s.all().end());
    s.clear();
    EXPECT_EQ(s.all()[7], 0.0f);
    s.assign(copy);
    EXPECT_EQ(s.all()[23], 3.0f);
    EXPECT_THROW(s.assign(std::vector<float>(5)), Error);
}

TEST(RecurrentState, AModelWithoutStateTakesNoMemory) {
    MemoryPool pool(kPage, 0);
    RecurrentState s(pool, 4, {0, 0});
    EXPECT_TRUE(s.empty());
    EXPECT_EQ(kv_used(pool), 0u);
    EXPECT_EQ(s.tensor(0, 0), nullptr);
    EXPECT_TRUE(s.all().empty());
    s.assign({});
    RecurrentState one(pool, 2, {4, 0});
    EXPECT_NE(one.tensor(1, 0), nullptr);
    EXPECT_EQ(one.tensor(1, 1), nullptr);  // no state 1
}

TEST(RecurrentState, RefusesWhatDoesNotFitTheBudgetOrIsAbsurd) {
    MemoryPool pool(kPage, 2 * kPage);
    try {
        RecurrentState s(pool, 64, {1024, 0});  // 256 KiB
        FAIL() << "a state over the budget was allocated";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY) << e.what();
        EXPECT_NE(std::string(e.what()).find("the recurrent state of 64 layers"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(RecurrentState(pool, 1, {-1, 0}), Error);
    EXPECT_THROW(RecurrentState(pool, 1, {0, RecurrentState::kMaxElements + 1}), Error);
}

}  // namespace
}  // namespace dwell
