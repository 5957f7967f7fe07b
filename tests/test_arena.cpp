// SPDX-License-Identifier: Apache-2.0
#include <dtr/arena.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t u = 256; // one unit of the default alignment

// The message of the dtr::logic_error `f` throws (doctest 2.4.9 has no substring matcher).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const dtr::logic_error& e) {
        return e.what();
    }
    return "<no dtr::logic_error thrown>";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

struct layout_block {
    std::size_t offset, size;
    bool free;
    friend bool operator==(const layout_block&, const layout_block&) = default;
};

std::vector<layout_block> layout(const dtr::arena& a) {
    std::vector<layout_block> out;
    a.for_each_block([&](std::size_t o, std::size_t s, bool f) { out.push_back({o, s, f}); });
    return out;
}

// Every figure the arena reports, to show that a failed call changed nothing.
auto figures(const dtr::arena& a) {
    return std::tuple(a.capacity(), a.used_bytes(), a.free_bytes(), a.largest_free_block(),
                      a.live_allocations(), a.peak_used_bytes(), a.block_count(),
                      a.free_block_count(), layout(a).size());
}

std::size_t must(std::optional<std::size_t> offset) {
    REQUIRE(offset.has_value());
    return *offset;
}

} // namespace

static_assert(!std::is_copy_constructible_v<dtr::arena>);
static_assert(!std::is_copy_assignable_v<dtr::arena>);
static_assert(std::is_nothrow_move_constructible_v<dtr::arena>);
static_assert(std::is_nothrow_move_assignable_v<dtr::arena>);

TEST_CASE("a new arena is one free block") {
    const dtr::arena a(16 * u);
    CHECK(a.capacity() == 16 * u);
    CHECK(a.alignment() == dtr::arena::default_alignment);
    CHECK(a.used_bytes() == 0);
    CHECK(a.free_bytes() == 16 * u);
    CHECK(a.largest_free_block() == 16 * u);
    CHECK(a.fragmentation() == 0.0);
    CHECK(a.live_allocations() == 0);
    CHECK(layout(a) == std::vector<layout_block>{{0, 16 * u, true}});
    CHECK_NOTHROW(a.check_invariants());
}

TEST_CASE("allocate splits, deallocate coalesces left, right and both") {
    dtr::arena a(16 * u);
    const std::size_t x = must(a.allocate(u));
    const std::size_t y = must(a.allocate(2 * u));
    const std::size_t z = must(a.allocate(u));
    CHECK(x == 0);
    CHECK(y == u);
    CHECK(z == 3 * u);
    CHECK(a.used_bytes() == 4 * u);
    CHECK(a.live_allocations() == 3);
    CHECK(a.peak_used_bytes() == 4 * u);
    CHECK(layout(a) ==
          std::vector<layout_block>{
              {0, u, false}, {u, 2 * u, false}, {3 * u, u, false}, {4 * u, 12 * u, true}});

    SUBCASE("right: z merges with the free tail") {
        a.deallocate(z);
        CHECK(layout(a) ==
              std::vector<layout_block>{{0, u, false}, {u, 2 * u, false}, {3 * u, 13 * u, true}});
    }
    SUBCASE("left: y merges with the hole x left") {
        a.deallocate(x);
        a.deallocate(y);
        CHECK(layout(a) == std::vector<layout_block>{
                               {0, 3 * u, true}, {3 * u, u, false}, {4 * u, 12 * u, true}});
    }
    SUBCASE("both: y joins x's hole and the tail through z") {
        a.deallocate(x);
        a.deallocate(z);
        CHECK(a.free_block_count() == 2);
        a.deallocate(y);
        CHECK(layout(a) == std::vector<layout_block>{{0, 16 * u, true}});
        CHECK(a.used_bytes() == 0);
        CHECK(a.live_allocations() == 0);
        CHECK(a.peak_used_bytes() == 4 * u);
    }
    CHECK_NOTHROW(a.check_invariants());
}

TEST_CASE("best fit: smallest hole that fits, lowest address among equals") {
    dtr::arena a(32 * u);
    // Holes of 3, 1, 2 and 2 units (in address order) between live one-unit blocks, then
    // a 20-unit tail.
    const std::size_t h1 = must(a.allocate(3 * u));
    (void)must(a.allocate(u));
    const std::size_t h2 = must(a.allocate(u));
    (void)must(a.allocate(u));
    const std::size_t h3 = must(a.allocate(2 * u));
    (void)must(a.allocate(u));
    const std::size_t h4 = must(a.allocate(2 * u));
    (void)must(a.allocate(u));
    for (const std::size_t h : {h1, h2, h3, h4}) a.deallocate(h);
    REQUIRE(a.free_block_count() == 5);
    CHECK(a.largest_free_block() == 20 * u);

    CHECK(a.allocate(2 * u - 10) == h3); // rounds to 2 units; h3 and h4 tie, h3 is lower
    CHECK(a.allocate(2 * u) == h4);
    CHECK(a.allocate(1) == h2);
    CHECK(a.allocate(2 * u) == h1);     // only the 3-unit hole and the tail are left: take 3
    CHECK(a.allocate(u) == h1 + 2 * u); // the unit split off h1 is now the best fit
    CHECK(a.allocate(3 * u) == 12 * u); // nothing left but the tail
    CHECK_NOTHROW(a.check_invariants());
}

TEST_CASE("sizes round up to the alignment, capacity rounds down") {
    dtr::arena a(1000, 64);
    CHECK(a.capacity() == 960);
    CHECK(a.allocate(1) == 0);
    CHECK(a.allocate(65) == 64);
    CHECK(a.used_bytes() == 64 + 128);
    CHECK(a.allocate(64) == 192);
    CHECK(a.allocate(960 - 256) == 256);
    CHECK(a.free_bytes() == 0);
    CHECK_NOTHROW(a.check_invariants());

    CHECK(dtr::arena(255).capacity() == 0); // below one unit: nothing to hand out
    CHECK_FALSE(dtr::arena(255).allocate(0).has_value());
    CHECK(dtr::arena(100, 1).capacity() == 100);
}

TEST_CASE("a zero-byte request gets its own one-unit block") {
    dtr::arena a(4 * u);
    const std::size_t p = must(a.allocate(0));
    const std::size_t q = must(a.allocate(0));
    CHECK(p != q);
    CHECK(a.used_bytes() == 2 * u);
    a.deallocate(p, 0);
    a.deallocate(q);
    CHECK(a.used_bytes() == 0);
    CHECK_NOTHROW(a.check_invariants());
}

TEST_CASE("alignment must be a power of two") {
    for (const std::size_t bad : {std::size_t{0}, std::size_t{3}, std::size_t{96}}) {
        const std::string what = error_of([&] { dtr::arena a(4096, bad); });
        CHECK(contains(what, "alignment " + std::to_string(bad) + " is not a power of two"));
    }
    CHECK_NOTHROW(dtr::arena(4096, 1));
    CHECK_NOTHROW(dtr::arena(4096, 4096));
}

TEST_CASE("exhaustion returns no block and changes nothing") {
    dtr::arena a(8 * u);
    const std::size_t x = must(a.allocate(3 * u));
    (void)must(a.allocate(u));
    (void)must(a.allocate(4 * u));
    a.deallocate(x);
    // 3 units free in one hole; 4 do not fit anywhere.
    const auto before = figures(a);
    CHECK_FALSE(a.allocate(3 * u + 1).has_value());
    CHECK_FALSE(a.allocate(9 * u).has_value());
    CHECK_FALSE(a.allocate(std::numeric_limits<std::size_t>::max()).has_value());
    CHECK(figures(a) == before);
    CHECK_NOTHROW(a.check_invariants());
    CHECK(a.allocate(3 * u) == x);
    CHECK_FALSE(a.allocate(0).has_value()); // full: not even a minimal block
}

TEST_CASE("fragmentation on a hand-made layout") {
    dtr::arena a(16 * u);
    (void)must(a.allocate(2 * u));                 // [0, 2)
    const std::size_t b = must(a.allocate(4 * u)); // [2, 6)
    const std::size_t c = must(a.allocate(u));     // [6, 7)
    const std::size_t d = must(a.allocate(4 * u)); // [7, 11)
    (void)must(a.allocate(u));                     // [11, 12), tail [12, 16) free
    CHECK(a.fragmentation() == 0.0);               // one hole: no fragmentation

    a.deallocate(b);
    a.deallocate(d);
    // Three 4-unit holes: 12 units free, the largest 4.
    CHECK(a.free_bytes() == 12 * u);
    CHECK(a.largest_free_block() == 4 * u);
    CHECK(a.free_block_count() == 3);
    CHECK(a.fragmentation() == doctest::Approx(1.0 - 4.0 / 12.0));

    a.deallocate(c); // joins b, c and d: 9 units, plus the 4-unit tail
    CHECK(a.largest_free_block() == 9 * u);
    CHECK(a.fragmentation() == doctest::Approx(1.0 - 9.0 / 13.0));

    (void)must(a.allocate(9 * u));
    (void)must(a.allocate(4 * u));
    CHECK(a.free_bytes() == 0);
    CHECK(a.fragmentation() == 0.0); // nothing free: defined as 0
    CHECK_NOTHROW(a.check_invariants());
}

TEST_CASE("deallocate rejects bad offsets and double frees, naming the offset") {
    dtr::arena a(16 * u);
    const std::size_t x = must(a.allocate(u));
    const std::size_t y = must(a.allocate(2 * u));
    (void)must(a.allocate(u));
    const auto before = figures(a);

    SUBCASE("inside a block") {
        const std::string what = error_of([&] { a.deallocate(x + 100); });
        CHECK(contains(what, "arena::deallocate(100)"));
        CHECK(contains(what, "not the start of a live allocation"));
    }
    SUBCASE("past the end") {
        CHECK(contains(error_of([&] { a.deallocate(1u << 30); }), "arena::deallocate(1073741824)"));
    }
    SUBCASE("the free tail") {
        const std::string what = error_of([&] { a.deallocate(4 * u); });
        CHECK(contains(what, "arena::deallocate(1024)"));
        CHECK(contains(what, "already free"));
    }
    SUBCASE("wrong size") {
        const std::string what = error_of([&] { a.deallocate(y, u); });
        CHECK(contains(what, "arena::deallocate(256, 256)"));
        CHECK(contains(what, "holds 512 bytes"));
        CHECK_NOTHROW(a.deallocate(y, 2 * u - 1)); // same size after rounding
        (void)a.allocate(2 * u);                   // put it back for the figures check below
    }
    CHECK(figures(a) == before);
    CHECK_NOTHROW(a.check_invariants());

    SUBCASE("double free of a block that stayed a block") {
        a.deallocate(y); // neighbours x and the one-unit block are live: no merge
        const std::string what = error_of([&] { a.deallocate(y); });
        CHECK(contains(what, "arena::deallocate(256)"));
        CHECK(contains(what, "double free"));
        CHECK_NOTHROW(a.check_invariants());
    }
    SUBCASE("double free of a block that merged away") {
        a.deallocate(x);
        a.deallocate(y); // merges into x's hole: offset 256 is no block any more
        const std::string what = error_of([&] { a.deallocate(y); });
        CHECK(contains(what, "arena::deallocate(256)"));
        CHECK(contains(what, "not the start of a live allocation"));
        CHECK_NOTHROW(a.check_invariants());
    }
}

TEST_CASE("reset frees everything and keeps the peak") {
    dtr::arena a(16 * u);
    for (int i = 0; i < 5; ++i) (void)must(a.allocate(u + 1));
    CHECK(a.used_bytes() == 10 * u);
    a.reset();
    CHECK(layout(a) == std::vector<layout_block>{{0, 16 * u, true}});
    CHECK(a.live_allocations() == 0);
    CHECK(a.peak_used_bytes() == 10 * u);
    a.reset_peak();
    CHECK(a.peak_used_bytes() == 0);
    CHECK(a.allocate(16 * u) == 0);
    CHECK_NOTHROW(a.check_invariants());
}

TEST_CASE("moving transfers the blocks and leaves an empty arena") {
    dtr::arena a(16 * u, 64);
    const std::size_t x = must(a.allocate(100));
    (void)must(a.allocate(300));

    dtr::arena b(std::move(a));
    CHECK(b.capacity() == 16 * u);
    CHECK(b.live_allocations() == 2);
    CHECK_NOTHROW(b.check_invariants());
    CHECK(a.capacity() == 0); // NOLINT(bugprone-use-after-move): the moved-from state is documented
    CHECK(a.block_count() == 0);
    CHECK_FALSE(a.allocate(1).has_value());
    CHECK_NOTHROW(a.check_invariants());

    dtr::arena c(4 * u);
    (void)must(c.allocate(u));
    c = std::move(b); // c's own block is released with its old state
    CHECK(c.live_allocations() == 2);
    c.deallocate(x);
    CHECK_NOTHROW(c.check_invariants());
    CHECK(b.capacity() == 0); // NOLINT(bugprone-use-after-move)

    a = std::move(c);
    a.reset();
    CHECK(a.block_count() == 1);
    CHECK_NOTHROW(a.check_invariants());
}

// ---------------------------------------------------------------------------------------
// Randomized comparison against a brute-force model.

namespace {

// The obvious implementation: a sorted vector of blocks, best fit by linear scan.
class reference_arena {
public:
    reference_arena(std::size_t capacity, std::size_t alignment)
        : capacity_(capacity / alignment * alignment), alignment_(alignment) {
        reset();
    }

    std::optional<std::size_t> allocate(std::size_t bytes) {
        if (bytes > capacity_) return std::nullopt;
        const std::size_t units = bytes == 0 ? 1 : (bytes - 1) / alignment_ + 1;
        const std::size_t need = units * alignment_;
        std::size_t best = blocks_.size();
        for (std::size_t i = 0; i < blocks_.size(); ++i) {
            const layout_block& b = blocks_[i];
            if (b.free && b.size >= need && (best == blocks_.size() || b.size < blocks_[best].size))
                best = i; // strict < keeps the lowest address among equal sizes
        }
        if (best == blocks_.size()) return std::nullopt;
        layout_block& b = blocks_[best];
        const std::size_t offset = b.offset;
        if (b.size > need) {
            const layout_block tail{b.offset + need, b.size - need, true};
            b.size = need;
            blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(best) + 1, tail);
        }
        blocks_[best].free = false;
        used_ += need;
        peak_ = std::max(peak_, used_);
        ++live_;
        return offset;
    }

    // false where the real arena must throw.
    bool deallocate(std::size_t offset) {
        std::size_t i = 0;
        while (i < blocks_.size() && blocks_[i].offset != offset) ++i;
        if (i == blocks_.size() || blocks_[i].free) return false;
        used_ -= blocks_[i].size;
        --live_;
        blocks_[i].free = true;
        if (i + 1 < blocks_.size() && blocks_[i + 1].free) {
            blocks_[i].size += blocks_[i + 1].size;
            blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        }
        if (i > 0 && blocks_[i - 1].free) {
            blocks_[i - 1].size += blocks_[i].size;
            blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        }
        return true;
    }

    void reset() {
        blocks_.clear();
        if (capacity_ != 0) blocks_.push_back({0, capacity_, true});
        used_ = 0;
        live_ = 0;
    }

    std::size_t block_size(std::size_t offset) const {
        for (const layout_block& b : blocks_)
            if (b.offset == offset) return b.size;
        return 0;
    }

    void check_matches(const dtr::arena& a) const {
        std::size_t largest = 0, holes = 0;
        for (const layout_block& b : blocks_)
            if (b.free) {
                largest = std::max(largest, b.size);
                ++holes;
            }
        const std::size_t free = capacity_ - used_;
        REQUIRE(a.capacity() == capacity_);
        REQUIRE(a.used_bytes() == used_);
        REQUIRE(a.free_bytes() == free);
        REQUIRE(a.largest_free_block() == largest);
        REQUIRE(a.live_allocations() == live_);
        REQUIRE(a.peak_used_bytes() == peak_);
        REQUIRE(a.block_count() == blocks_.size());
        REQUIRE(a.free_block_count() == holes);
        const double frag =
            free == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(free);
        REQUIRE(a.fragmentation() == frag);
    }

    const std::vector<layout_block>& blocks() const { return blocks_; }
    std::size_t capacity() const { return capacity_; }

private:
    std::size_t capacity_, alignment_;
    std::vector<layout_block> blocks_;
    std::size_t used_ = 0, peak_ = 0, live_ = 0;
};

std::uint64_t stress_seed() {
    if (const char* env = std::getenv("DTR_ARENA_SEED")) return std::strtoull(env, nullptr, 0);
    return 0x5eed'da7a'2021ULL;
}

} // namespace

TEST_CASE("randomized operations match a brute-force best-fit model") {
    const std::uint64_t seed = stress_seed();
    std::printf("arena stress seed: %llu (set DTR_ARENA_SEED to replay)\n",
                static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    INFO("seed " << seed);

    struct config {
        std::size_t capacity, alignment, operations;
    };
    // Sizes of 200k operations in all: three alignments, and a capacity that is not a multiple
    // of its alignment.
    const config configs[] = {{std::size_t{1} << 20, 256, 80'000},
                              {1'000'003, 64, 80'000},
                              {std::size_t{1} << 15, 1, 40'000}};

    std::mt19937_64 rng(seed);
    std::size_t allocations = 0, exhausted = 0, frees = 0, rejected = 0;
    for (const config& cfg : configs) {
        INFO("capacity " << cfg.capacity << ", alignment " << cfg.alignment);
        dtr::arena a(cfg.capacity, cfg.alignment);
        reference_arena ref(cfg.capacity, cfg.alignment);
        std::vector<std::pair<std::size_t, std::size_t>> live; // (offset, bytes requested)

        auto draw = [&](std::size_t lo, std::size_t hi) {
            return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
        };
        auto request = [&]() -> std::size_t {
            const std::size_t p = draw(0, 99);
            if (p < 5) return 0;
            if (p < 65) return draw(1, 8 * cfg.alignment);       // small
            if (p < 95) return draw(1, ref.capacity() / 64 + 1); // medium
            if (p < 99) return draw(1, ref.capacity() / 4 + 1);  // large
            return draw(ref.capacity() / 2, ref.capacity() * 2); // often too large
        };

        for (std::size_t op = 0; op < cfg.operations; ++op) {
            INFO("operation " << op);
            const std::size_t kind = draw(0, 999);
            // Lean towards allocation while few blocks are live so the arena fills up and
            // both exhaustion and dense fragmentation get exercised.
            const bool alloc = live.empty() || kind < (live.size() < 64 ? 700u : 520u);
            if (kind == 999) {
                a.reset();
                ref.reset();
                live.clear();
            } else if (alloc) {
                const std::size_t bytes = request();
                const std::optional<std::size_t> got = a.allocate(bytes);
                const std::optional<std::size_t> want = ref.allocate(bytes);
                REQUIRE(got == want);
                if (got) {
                    live.emplace_back(*got, bytes);
                    ++allocations;
                } else {
                    ++exhausted;
                }
            } else if (kind < 990) {
                const std::size_t i = draw(0, live.size() - 1);
                const auto [offset, requested] = live[i];
                live[i] = live.back();
                live.pop_back();
                REQUIRE(ref.deallocate(offset));
                if (kind % 2 == 0)
                    a.deallocate(offset);
                else
                    a.deallocate(offset, requested); // the sized overload, same outcome
                ++frees;
            } else {
                // A bad offset: anywhere, often aligned, sometimes a freed block's start.
                const std::size_t offset =
                    draw(0, 1) ? draw(0, ref.capacity() / cfg.alignment) * cfg.alignment
                               : draw(0, ref.capacity() + 10);
                if (ref.block_size(offset) != 0) {
                    bool is_live = false;
                    for (const auto& l : live) is_live = is_live || l.first == offset;
                    if (is_live) continue; // a valid free: not what this branch tests
                }
                const auto before = figures(a);
                const std::string what = error_of([&] { a.deallocate(offset); });
                REQUIRE(contains(what, "arena::deallocate(" + std::to_string(offset) + ")"));
                REQUIRE(figures(a) == before);
                ++rejected;
            }
            ref.check_matches(a);
            if (op % 1000 == 999) {
                REQUIRE_NOTHROW(a.check_invariants());
                REQUIRE(layout(a) == ref.blocks());
            }
        }
        REQUIRE_NOTHROW(a.check_invariants());
        REQUIRE(layout(a) == ref.blocks());
    }
    std::printf("arena stress: %zu allocations, %zu exhausted, %zu frees, %zu bad frees\n",
                allocations, exhausted, frees, rejected);
    CHECK(exhausted > 100); // the mix must reach the full-arena regime
    CHECK(rejected > 100);
}
