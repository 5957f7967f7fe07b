// SPDX-License-Identifier: Apache-2.0
// Pin guards meeting mutation, and the other findings of issue 10, each as the issue tells
// it: a guard kept across mutate() (read and write guards, both mutation scopes, the
// training-loop shape of a guard on a parameter across its update), a write guard kept across
// a call that reads the constant, an operator resetting the caller's input handle under
// mutation_scope::tensor through the span overload; then a guard outliving its runtime,
// view() from inside an operator, a huge host allocation under an unlimited budget, and
// recovery after dtr::thrashing.
//
// The semantics checked (include/dtr/pin_guard.hpp): a guard pins the storage version it was
// taken on for its whole life, whatever later happens to the handle; a call reading a storage
// under a live write guard throws dtr::logic_error and changes nothing.
#include "support/byte_ops.hpp"
#include "support/expect.hpp"

#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define DTR_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTR_TEST_ASAN 1
#endif
#endif

using dtr::tensor;
using namespace dtr_test;

namespace {

using host_rt = dtr::runtime<dtr::host_backend>;

template <class Guard>
std::vector<std::uint8_t> bytes_of(const Guard& g) {
    std::vector<std::uint8_t> v;
    for (std::byte b : g.span()) v.push_back(u8(b));
    return v;
}

//! In-place: every byte of input 0 gains `delta` (an SGD step, in miniature).
struct bump_op {
    int delta = 100;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        auto io = ctx.inout(0);
        for (std::size_t i = 0; i < io.size(); ++i)
            io.data()[i] = std::byte(static_cast<std::uint8_t>(u8(io.data()[i]) + delta));
    }
};

//! Fills the budget with evictable storages and reads them back, so that anything resident
//! and unpinned is likely evicted and its memory reused.
void churn(host_rt& rt, const tensor& from, int count) {
    std::vector<tensor> junk;
    for (int i = 0; i < count; ++i)
        junk.push_back(rt.call(add_op{i}, {junk.empty() ? from : junk.back()}, {.cost = 1}));
    for (auto it = junk.rbegin(); it != junk.rend(); ++it) (void)read(rt, *it);
    rt.check_invariants();
}

constexpr dtr::mutation_scope scopes[] = {dtr::mutation_scope::storage,
                                          dtr::mutation_scope::tensor};

const char* name(dtr::mutation_scope s) {
    return s == dtr::mutation_scope::storage ? "storage" : "tensor";
}

} // namespace

// ---- issue 10, failure 1: mutate() while a pin guard on the mutated tensor is alive ------

TEST_CASE(
    "a read guard kept across mutate() keeps showing the old version, which it keeps resident") {
    for (const auto scope : scopes) {
        CAPTURE(name(scope));
        host_rt rt({.budget = 128, .mutation = scope});
        tensor c = rt.constant(16, fill_with(1));
        tensor y = rt.call(add_op{1}, {c}, {.cost = 1});
        auto guard = rt.pin(y);
        const std::vector<std::uint8_t> before = bytes_of(guard);
        CHECK(before == pattern(1, 16, 1));
        rt.mutate(bump_op{}, {y}, {0}, 1);
        rt.check_invariants();
        // The handle names the new version; the guard still shows the old one, untouched.
        CHECK(read(rt, y) == pattern(1, 16, 101));
        CHECK(bytes_of(guard) == before);
        // The old version is pinned: pressure evicts other storages, never it.
        churn(rt, c, 12);
        CHECK(bytes_of(guard) == before);
        CHECK(read(rt, y) == pattern(1, 16, 101));
        const std::size_t with_guard = rt.storage_count();
        guard.reset();
        rt.check_invariants(); // pins at rest equal live guards: nothing wrapped
        CHECK(rt.storage_count() <= with_guard);
        CHECK(read(rt, y) == pattern(1, 16, 101));
        y.reset();
        c.reset();
        rt.check_invariants();
        CHECK(rt.storage_count() == 0);
        CHECK(rt.operator_count() == 0);
        CHECK(rt.backend().used_bytes() == 0);
    }
}

TEST_CASE(
    "a guard on a parameter kept across its update: the old version goes when the guard does") {
    for (const auto scope : scopes) {
        CAPTURE(name(scope));
        host_rt rt({.budget = 256, .mutation = scope});
        tensor w = rt.constant(32, fill_with(7));
        auto guard = rt.pin(w);
        rt.mutate(bump_op{1}, {w}, {0}, 1); // the SGD step
        CHECK(bytes_of(guard) == pattern(7, 32));
        CHECK(read(rt, w) == pattern(7, 32, 1));
        CHECK(rt.storage_count() == 2); // both versions: the old one is the guard's
        rt.check_invariants();
        guard.reset();
        rt.check_invariants();
        CHECK(rt.storage_count() == 1); // the old version was freed with the guard
        CHECK(rt.resident_bytes() == 32);
        w.reset();
        CHECK(rt.storage_count() == 0);
        CHECK(rt.backend().used_bytes() == 0);
    }
}

TEST_CASE(
    "a guard taken after the mutation keeps the new version unevictable when the old guard goes") {
    for (const auto scope : scopes) {
        CAPTURE(name(scope));
        host_rt rt({.budget = 96, .mutation = scope});
        tensor c = rt.constant(16, fill_with(3));
        tensor y = rt.call(add_op{1}, {c}, {.cost = 1});
        auto old_guard = rt.pin(y);
        rt.mutate(bump_op{}, {y}, {0}, 1);
        auto new_guard = rt.pin(y);
        const std::vector<std::uint8_t> expected = pattern(3, 16, 101);
        CHECK(bytes_of(new_guard) == expected);
        old_guard.reset(); // must unpin the old version, not the new one
        rt.check_invariants();
        CHECK_FALSE(rt.evict(y));
        churn(rt, c, 12);
        CHECK(rt.is_resident(y));
        CHECK(bytes_of(new_guard) == expected); // AddressSanitizer: no use after free
        new_guard.reset();
        rt.check_invariants();
        CHECK(rt.evict(y));
        CHECK(read(rt, y) == expected); // recomputed bit for bit
        y.reset();
        c.reset();
        CHECK(rt.storage_count() == 0);
        CHECK(rt.backend().used_bytes() == 0);
    }
}

TEST_CASE(
    "a write guard kept across mutate() of its constant: the mutation is refused and changes "
    "nothing") {
    for (const auto scope : scopes) {
        CAPTURE(name(scope));
        host_rt rt({.mutation = scope});
        tensor c = rt.constant(16);
        tensor view = rt.view(c, 4, 8);
        auto guard = rt.pin_for_write(c);
        for (std::size_t i = 0; i < 16; ++i)
            guard.span()[i] = std::byte(static_cast<std::uint8_t>(40 + i));
        const std::size_t storages = rt.storage_count(), ops = rt.operator_count(),
                          resident = rt.resident_bytes();
        const std::string why = logic_error_of([&] { rt.mutate(bump_op{}, {c}, {0}, 1); });
        CHECK(contains(why, "write guard"));
        CHECK(
            contains(logic_error_of([&] { rt.mutate(bump_op{}, {view}, {0}, 1); }), "write guard"));
        CHECK(rt.storage_count() == storages);
        CHECK(rt.operator_count() == ops);
        CHECK(rt.resident_bytes() == resident);
        rt.check_invariants();
        // The guard is intact and still writable: no operator has read the constant.
        guard.span()[0] = std::byte{39};
        CHECK(bytes_of(guard)[0] == 39);
        guard.reset();
        rt.mutate(bump_op{1}, {c}, {0}, 1);
        std::vector<std::uint8_t> expected = pattern(40, 16, 1);
        expected[0] = 40;
        CHECK(read(rt, c) == expected);
        rt.check_invariants();
        view.reset();
        c.reset();
        CHECK(rt.storage_count() == 0);
        CHECK(rt.backend().used_bytes() == 0);
    }
}

// ---- issue 10, failure 2: a write guard kept across a call that reads the constant -------

TEST_CASE(
    "a call reading a constant under a live write guard is refused, so recomputation stays "
    "bit-identical") {
    host_rt rt({.budget = 64});
    tensor c = rt.constant(16);
    auto guard = rt.pin_for_write(c);
    for (std::size_t i = 0; i < 16; ++i) guard.span()[i] = std::byte(static_cast<std::uint8_t>(i));
    const std::size_t storages = rt.storage_count(), ops = rt.operator_count();
    tensor y;
    const std::string why = logic_error_of([&] { y = rt.call(add_op{1}, {c}, {.cost = 1}); });
    CHECK(contains(why, "write guard"));
    CHECK(contains(why, "pin_for_write"));
    CHECK_FALSE(y.valid());
    CHECK(rt.storage_count() == storages);
    CHECK(rt.operator_count() == ops);
    rt.check_invariants();
    // Nothing read the constant: writing is still allowed, and it is what the operator sees.
    for (std::size_t i = 0; i < 16; ++i)
        guard.span()[i] = std::byte(static_cast<std::uint8_t>(2 * i));
    guard.reset();
    y = rt.call(add_op{1}, {c}, {.cost = 1});
    std::vector<std::uint8_t> expected(16);
    for (std::size_t i = 0; i < 16; ++i) expected[i] = static_cast<std::uint8_t>(2 * i + 1);
    CHECK(read(rt, y) == expected);
    REQUIRE(rt.evict(y));
    CHECK(read(rt, y) == expected); // recomputed from the same bytes
    // And once an operator has read it, the constant can no longer be written.
    CHECK(contains(logic_error_of([&] { (void)rt.pin_for_write(c); }), "already read"));
    rt.check_invariants();
}

// ---- issue 10, failure 3: an operator resets the caller's input handle ------------------

TEST_CASE(
    "an operator resetting the caller's input handle while it runs (span overload, tensor scope)") {
    for (const auto scope : scopes) {
        CAPTURE(name(scope));
        host_rt rt({.budget = 256, .mutation = scope});
        tensor c = rt.constant(16, fill_with(5));
        // The only handle of the mutated tensor is in the caller's span, and the operator
        // drops it: afterwards the new version has no handle.
        {
            std::vector<tensor> in{rt.call(add_op{1}, {c}, {.cost = 1})};
            auto op = [&in](dtr::op_context<dtr::host_backend>& ctx) {
                if (!ctx.rematerializing()) in[0].reset();
                bump_op{}(ctx);
            };
            rt.mutate(op, std::span<const tensor>(in), {0}, 1);
            CHECK_FALSE(in[0].valid());
            rt.check_invariants();
        }
        CHECK(rt.storage_count() == 1); // the constant only: the rest is unreachable
        // Another handle to the same tensor survives, and sees the new version.
        {
            std::vector<tensor> in{rt.call(add_op{1}, {c}, {.cost = 1})};
            tensor kept = in[0];
            auto op = [&in](dtr::op_context<dtr::host_backend>& ctx) {
                if (!ctx.rematerializing()) in[0].reset();
                bump_op{}(ctx);
            };
            rt.mutate(op, std::span<const tensor>(in), {0}, 1);
            rt.check_invariants();
            CHECK(read(rt, kept) == pattern(5, 16, 101));
            REQUIRE(rt.evict(kept));
            CHECK(read(rt, kept) == pattern(5, 16, 101)); // its recipe re-runs the operator
        }
        rt.check_invariants();
        CHECK(rt.storage_count() == 1);
        c.reset();
        CHECK(rt.storage_count() == 0);
        CHECK(rt.operator_count() == 0);
        CHECK(rt.backend().used_bytes() == 0);
    }
}

// ---- the smaller findings ------------------------------------------------------------------

TEST_CASE("a pin guard outliving its runtime is safe, like a tensor") {
    std::optional<host_rt::read_guard> read_guard;
    std::optional<host_rt::write_guard> write_guard;
    std::optional<host_rt::read_guard> moved_into;
    {
        host_rt rt;
        tensor c = rt.constant(8, fill_with(1));
        tensor d = rt.constant(8);
        tensor e = rt.call(add_op{1}, {c}, {.cost = 1});
        read_guard.emplace(rt.pin(c));
        write_guard.emplace(rt.pin_for_write(d));
        auto g = rt.pin(e);
        moved_into.emplace(std::move(g));
        CHECK(bytes_of(*read_guard) == pattern(1, 8));
    }
    CHECK(read_guard->active());
    CHECK(
        contains(logic_error_of([&] { (void)read_guard->data(); }), "runtime has been destroyed"));
    CHECK(
        contains(logic_error_of([&] { (void)write_guard->span(); }), "runtime has been destroyed"));
    CHECK(read_guard->handle().orphaned());
    read_guard->reset(); // harmless
    CHECK_FALSE(read_guard->active());
    read_guard.reset();
    write_guard.reset(); // destroyed without reset
    CHECK_THROWS_AS((void)moved_into->data(), dtr::logic_error);
    moved_into.reset();
}

TEST_CASE("view() from inside an operator is refused") {
    host_rt rt;
    tensor c = rt.constant(16, fill_with(0));
    const std::size_t storages = rt.storage_count();
    const std::string why = logic_error_of([&] {
        (void)rt.call(
            [&](dtr::op_context<dtr::host_backend>& ctx) {
                tensor v = rt.view(c, 0, 4);
                ctx.alias(0, 0);
            },
            {c}, {.cost = 1});
    });
    CHECK(contains(why, "view() called from inside an operator"));
    CHECK(rt.storage_count() == storages);
    CHECK(rt.operator_count() == 0);
    rt.check_invariants();
    CHECK(read(rt, c) == pattern(0, 16));
}

namespace {

//! Host memory whose system allocator fails above `limit` bytes, as ::operator new does for a
//! request no machine can serve. (Under AddressSanitizer a real one aborts the process
//! instead of throwing, so this is how a sanitized build sees that path.)
class failing_host_backend : public dtr::host_backend {
public:
    explicit failing_host_backend(std::size_t limit = std::size_t{1} << 20) noexcept
        : limit_(limit) {}
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        if (bytes > limit_) throw std::bad_alloc();
        return host_backend::allocate(bytes);
    }

private:
    std::size_t limit_;
};

template <class Runtime>
void check_huge_requests(Runtime& rt, std::size_t huge) {
    tensor small = rt.constant(16, fill_with(2));
    tensor y = rt.call(add_op{1}, {small}, {.cost = 1});
    for (int what = 0; what < 2; ++what) {
        CAPTURE(what);
        const std::size_t storages = rt.storage_count();
        try {
            if (what == 0)
                (void)rt.constant(huge);
            else
                (void)rt.call(
                    [huge](dtr::op_context<typename Runtime::backend_type>& ctx) {
                        (void)ctx.output(0, huge);
                    },
                    {small}, {.cost = 1});
            FAIL("no exception for a request of ", huge, " bytes");
        } catch (const dtr::out_of_memory& e) {
            CHECK(contains(e.what(), "system allocator"));
            CHECK(e.info().requested == huge);
        } catch (const std::bad_alloc& e) {
            FAIL("a plain std::bad_alloc escaped instead of dtr::out_of_memory: ",
                 std::string(e.what()));
        }
        CHECK(rt.storage_count() == storages);
        rt.check_invariants();
    }
    CHECK(read(rt, y) == pattern(2, 16, 1)); // nothing computed was lost
}

} // namespace

TEST_CASE(
    "a host allocation the system cannot serve, under an unlimited budget, is a "
    "dtr::out_of_memory"){SUBCASE("a backend whose system allocator throws std::bad_alloc"){
    dtr::runtime<failing_host_backend> rt;
check_huge_requests(rt, std::size_t{1} << 30);
}
#ifndef DTR_TEST_ASAN
SUBCASE("host_backend and ::operator new") {
    host_rt rt;
    check_huge_requests(rt, std::size_t{1} << 62);
}
#endif
}

TEST_CASE("after dtr::thrashing, raising the budget or the limit lets the program go on") {
    auto thrash = [](host_rt& rt, std::vector<tensor>& chain) {
        tensor x = rt.constant(16, fill_with(0));
        chain.push_back(x);
        for (int i = 0; i < 10; ++i)
            chain.push_back(rt.call(add_op{1}, {chain.back()}, {.cost = 1}));
        // Cycle through the chain, three links fitting beside the constant: every read
        // recomputes.
        for (std::size_t round = 0; round < 100; ++round) {
            try {
                (void)read(rt, chain[1 + round % 10]);
            } catch (const dtr::thrashing& e) {
                CHECK(e.remat_cost() > 10);
                // Durations as people read them, not "10.000000 ns".
                CHECK(contains(e.what(), "exceeds the limit of 10 ns"));
                CHECK_FALSE(contains(e.what(), ".000000"));
                return true;
            }
        }
        return false;
    };
    SUBCASE("set_budget") {
        host_rt rt({.budget = 64, .remat_limit = 10});
        std::vector<tensor> chain;
        REQUIRE(thrash(rt, chain));
        rt.check_invariants();
        rt.set_budget(std::size_t{1} << 20);
        // Restoring each evicted link at most once costs at most 10: within the limit.
        for (std::size_t i = 0; i < chain.size(); ++i) {
            std::vector<std::uint8_t> got;
            CHECK_NOTHROW(got = read(rt, chain[i]));
            CHECK(got == pattern(0, 16, static_cast<int>(i)));
        }
        rt.check_invariants();
    }
    SUBCASE("set_remat_limit") {
        host_rt rt({.budget = 64, .remat_limit = 10});
        std::vector<tensor> chain;
        REQUIRE(thrash(rt, chain));
        // A further recomputation under the exhausted allowance still thrashes...
        (void)rt.evict(chain[1]);
        CHECK_THROWS_AS((void)read(rt, chain[1]), dtr::thrashing);
        CHECK_THROWS_AS(rt.set_remat_limit(-1), dtr::logic_error);
        // ... until the allowance restarts, on the same tight budget.
        rt.set_remat_limit(1e6);
        for (std::size_t round = 0; round < 30; ++round) {
            const std::size_t i = 1 + round % 10;
            std::vector<std::uint8_t> got;
            CHECK_NOTHROW(got = read(rt, chain[i]));
            CHECK(got == pattern(0, 16, static_cast<int>(i)));
        }
        rt.check_invariants();
    }
}
