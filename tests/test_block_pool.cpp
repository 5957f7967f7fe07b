// SPDX-License-Identifier: Apache-2.0
// The PyTorch bridge's per-thread block lists (examples/torch/csrc/block_pool.hpp): reuse,
// the cap, blocks freed on another thread than their own, and a thread's list freed when it
// exits. Standard C++ only, so it runs in every build, the sanitizer one included, where
// LeakSanitizer fails the run if an exited thread's list was not freed.
#include "../examples/torch/csrc/block_pool.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

using namespace dtr_torch;

namespace {

// A size no other test case uses, so that each case starts from an empty list.
template <std::size_t Tag>
using pool = block_pool<64 + 8 * Tag, 4>;

} // namespace

TEST_CASE("block_pool: a freed block is handed out again, last freed first") {
    using p = pool<1>;
    void* a = p::allocate();
    void* b = p::allocate();
    CHECK(a != b);
    p::deallocate(a);
    p::deallocate(b);
    CHECK(p::allocate() == b);
    CHECK(p::allocate() == a);
    p::deallocate(a);
    p::deallocate(b);
}

TEST_CASE("block_pool: beyond its cap a list gives blocks back to the heap") {
    using p = pool<2>; // keeps 4
    std::vector<void*> blocks;
    for (int i = 0; i < 10; ++i) blocks.push_back(p::allocate());
    for (void* b : blocks) p::deallocate(b);
    // The first four freed are kept, the other six went back: allocating four returns
    // exactly the kept ones, the last kept first; the fifth is new memory.
    std::set<void*> kept(blocks.begin(), blocks.begin() + 4);
    std::vector<void*> again;
    for (int i = 0; i < 4; ++i) again.push_back(p::allocate());
    CHECK(again.front() == blocks[3]);
    CHECK(std::set<void*>(again.begin(), again.end()) == kept);
    again.push_back(p::allocate());
    for (void* b : again) p::deallocate(b);
}

TEST_CASE(
    "block_pool: blocks made on one thread and freed on another join the freeing "
    "thread's list, and an exiting thread frees its list") {
    using p = pool<3>;
    std::vector<void*> made;
    std::thread maker([&] {
        for (int i = 0; i < 3; ++i) made.push_back(p::allocate());
    });
    maker.join();
    std::thread freer([&] {
        for (void* b : made) p::deallocate(b);
        // this thread's list now holds them: handed out here, last freed first
        void* b = p::allocate();
        CHECK(b == made.back());
        p::deallocate(b);
    }); // exits with three blocks on its list: freed by its closer (LeakSanitizer checks)
    freer.join();
}

TEST_CASE("pooled_allocator: shared objects and hash-map nodes through the lists") {
    struct counted {
        int* alive;
        explicit counted(int* a) : alive(a) { ++*alive; }
        ~counted() { --*alive; }
    };
    int alive = 0;
    {
        std::vector<std::shared_ptr<counted>> v;
        for (int i = 0; i < 100; ++i) v.push_back(make_pooled_shared<counted>(&alive));
        CHECK(alive == 100);
        std::thread t([&] { v.clear(); }); // freed on another thread, which then exits
        t.join();
        CHECK(alive == 0);
        v.push_back(make_pooled_shared<counted>(&alive));
        CHECK(alive == 1);
    }
    CHECK(alive == 0);
    std::unordered_map<int, std::uint64_t, std::hash<int>, std::equal_to<int>,
                       pooled_allocator<std::pair<const int, std::uint64_t>>>
        m;
    for (int i = 0; i < 1000; ++i) m.emplace(i, static_cast<std::uint64_t>(i) * 3);
    for (int i = 0; i < 1000; i += 2) m.erase(i);
    CHECK(m.size() == 500);
    CHECK(m.at(999) == 2997);
}
