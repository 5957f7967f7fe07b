// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::arena: a best-fit, coalescing allocator of offsets into one fixed region.
//!
//! Why it exists. DTR keeps resident bytes under a budget by evicting tensors. Earlier DTR
//! systems counted live bytes while the device allocator underneath fragmented, so the
//! physical footprint overshot the budget. dtr instead carves every allocation of a backend
//! (CUDA device memory, host memory in arena mode, or a simulated address space) out of ONE
//! region of exactly `capacity` bytes, so the budget holds physically and fragmentation is a
//! number the runtime (and its heuristics) can observe.
//!
//! Why out of band. The arena hands out *offsets* in [0, capacity) and never dereferences the
//! region: device memory must not be touched from the host, and a simulated region does not
//! exist at all. So no header is stored in front of a block; every block is described by a
//! host-side node owned by the arena.
//!
//! Algorithm. The region is tiled by blocks, each free or live. Two Boost.Intrusive red-black
//! trees link the same nodes:
//!  - `by_address_`: every block, ordered by offset. Finds the live block that starts at an
//!    offset (deallocate) and, through iterator neighbours, the blocks on either side of it
//!    (coalescing).
//!  - `free_by_size_`: free blocks only, ordered by (size, offset). `lower_bound(n, 0)` is the
//!    best fit: the smallest free block that can hold n bytes, the lowest address among equal
//!    sizes. Its last element is the largest free block.
//! allocate() takes the best-fit block and splits off the unused tail as a new free block;
//! the allocation sits at the low end of the hole. deallocate() merges the freed block with a
//! free neighbour on either side, so no two free blocks are ever adjacent.
//!
//! Nodes come from a pool owned by the arena: fixed-address chunks that grow geometrically
//! and a free list of recycled nodes. Once the pool has grown to the peak number of blocks,
//! allocate/deallocate do no heap allocation.
//!
//! Alignment rule. The alignment is a power of two (default 256, the CUDA allocation
//! granularity for our purposes; host users pass 64). The capacity is rounded DOWN to a
//! multiple of it and every request is rounded UP to a multiple of it, so every block starts
//! and ends on an alignment boundary and every returned offset is aligned (relative to the
//! region's base, which the backend aligns). A zero-byte request gets a block of one alignment
//! unit: like malloc(0) returning a unique pointer, every successful allocation then has its
//! own offset and can be freed like any other.
//!
//! Complexity, with n the number of blocks (at most 2 * live allocations + 1):
//! allocate O(log n); deallocate O(log n); statistics O(1); check_invariants O(n).
#pragma once

#include <dtr/error.hpp>

#include <boost/intrusive/options.hpp>
#include <boost/intrusive/set.hpp>
#include <boost/intrusive/set_hook.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dtr {

//! @brief Best-fit, coalescing allocator of aligned offsets in [0, capacity()).
//!
//! Not thread-safe: the runtime owning it serialises calls. Copying is deleted (the nodes are
//! owned and linked by address); moving transfers every block and leaves the source an empty
//! arena of capacity 0 (allocate() on it always returns std::nullopt).
class arena {
public:
    //! The alignment used when none is given: the CUDA allocation granularity we assume.
    static constexpr std::size_t default_alignment = 256;

    //! @brief Creates an arena with one free block covering [0, capacity rounded down).
    //! @param capacity  bytes of the region; rounded down to a multiple of `alignment` (the
    //!                  tail below one alignment unit can never hold an aligned block).
    //! @param alignment a power of two; every offset and block size is a multiple of it.
    //! Complexity: O(1).
    //! Throws: dtr::logic_error if `alignment` is not a power of two; std::bad_alloc if the
    //! first node cannot be allocated.
    explicit arena(std::size_t capacity, std::size_t alignment = default_alignment)
        : alignment_(alignment) {
        DTR_EXPECTS(alignment != 0 && (alignment & (alignment - 1)) == 0,
                    "arena: alignment " + std::to_string(alignment) + " is not a power of two");
        capacity_ = capacity & ~(alignment - 1);
        if (capacity_ != 0) {
            block& whole = acquire_node(0, capacity_);
            by_address_.insert(by_address_.end(), whole);
            free_by_size_.insert(whole);
        }
    }

    arena(const arena&) = delete;
    arena& operator=(const arena&) = delete;

    //! @brief Takes over every block of `other`, which becomes an empty arena of capacity 0
    //! (same alignment). Complexity: O(1). Throws: nothing.
    arena(arena&& other) noexcept : alignment_(other.alignment_) { swap(other); }

    //! @brief Releases this arena's blocks, then takes over `other`'s (left empty, capacity
    //! 0). Complexity: O(blocks of *this). Throws: nothing.
    arena& operator=(arena&& other) noexcept {
        arena taken(std::move(other));
        swap(taken);
        return *this; // `taken` now holds our old blocks and releases them
    }

    //! @brief Releases every block and node. Complexity: O(n).
    ~arena() {
        // Safe-mode hooks: the trees unlink their nodes when destroyed, so the trees must go
        // before the pool that owns the nodes. Clearing explicitly makes that independent of
        // member order.
        free_by_size_.clear();
        by_address_.clear();
    }

    //! @brief Exchanges the whole state of two arenas. Complexity: O(1). Throws: nothing.
    void swap(arena& other) noexcept {
        using std::swap;
        swap(alignment_, other.alignment_);
        swap(capacity_, other.capacity_);
        swap(used_, other.used_);
        swap(peak_used_, other.peak_used_);
        swap(live_, other.live_);
        swap(chunks_, other.chunks_);
        swap(recycled_, other.recycled_);
        swap(pool_nodes_, other.pool_nodes_);
        swap(recycled_count_, other.recycled_count_);
        by_address_.swap(other.by_address_);
        free_by_size_.swap(other.free_by_size_);
    }
    friend void swap(arena& a, arena& b) noexcept { a.swap(b); }

    //! @brief Reserves the best-fit block for `bytes` (rounded up to the alignment; 0 counts
    //! as one alignment unit) and returns its offset, or std::nullopt when no free block is
    //! large enough. Exhaustion is not an error: the runtime evicts and retries, so on
    //! std::nullopt the arena is unchanged.
    //! Complexity: O(log n) in the number of blocks.
    //! Throws: std::bad_alloc only if the node pool must grow and the host heap is
    //! exhausted; the arena is then unchanged.
    [[nodiscard]] std::optional<std::size_t> allocate(std::size_t bytes) {
        const std::optional<std::size_t> need = rounded(bytes);
        if (!need) return std::nullopt;
        auto hole = free_by_size_.lower_bound(size_key{*need, 0}, size_order{});
        if (hole == free_by_size_.end()) return std::nullopt;
        block& b = *hole;

        // Take the node for the tail first: it is the only step that can throw.
        block* tail = b.size > *need ? &acquire_node(b.offset + *need, b.size - *need) : nullptr;
        free_by_size_.erase(hole);
        if (tail != nullptr) {
            b.size = *need;
            by_address_.insert_before(std::next(by_address_.iterator_to(b)), *tail);
            free_by_size_.insert(*tail);
        }
        b.free = false;
        used_ += b.size;
        peak_used_ = std::max(peak_used_, used_);
        ++live_;
        return b.offset;
    }

    //! Where allocate(bytes, placement) puts a block.
    enum class placement : std::uint8_t {
        best_fit, //!< the smallest hole that holds it, at the hole's low end (allocate(bytes))
        //! The highest-addressed hole that holds it, at the hole's high end: blocks placed
        //! this way pile up from the top of the region, away from best-fit ones, so that
        //! long-lived blocks (constants) do not sit between short-lived ones.
        high,
    };

    //! @brief allocate(bytes) for placement::best_fit; for placement::high, the top of the
    //! highest-addressed free block large enough. std::nullopt (arena unchanged) when no free
    //! block is large enough.
    //! Complexity: O(log n) for best_fit; O(n) worst case for high (a scan from the top).
    //! Throws: std::bad_alloc only if the node pool must grow; the arena is then unchanged.
    [[nodiscard]] std::optional<std::size_t> allocate(std::size_t bytes, placement where) {
        if (where == placement::best_fit) return allocate(bytes);
        const std::optional<std::size_t> need = rounded(bytes);
        if (!need) return std::nullopt;
        auto top = std::find_if(by_address_.rbegin(), by_address_.rend(),
                                [&](const block& c) { return c.free && c.size >= *need; });
        if (top == by_address_.rend()) return std::nullopt;
        const auto it = std::prev(top.base());
        block& b = *it;
        block* taken = &b;
        if (b.size > *need) {
            // The live block is a new node at the top; `b` stays free, smaller (its size is
            // its key in the size index: out while it changes).
            taken = &acquire_node(b.offset + b.size - *need, *need); // the only step that can throw
            free_by_size_.erase(free_by_size_.iterator_to(b));
            b.size -= *need;
            free_by_size_.insert(b);
            by_address_.insert_before(std::next(it), *taken);
        } else {
            free_by_size_.erase(free_by_size_.iterator_to(b));
        }
        taken->free = false;
        used_ += taken->size;
        peak_used_ = std::max(peak_used_, used_);
        ++live_;
        return taken->offset;
    }

    //! @brief Frees the live allocation that starts at `offset` and merges it with free
    //! neighbours on both sides.
    //! Complexity: O(log n) in the number of blocks.
    //! Throws: dtr::logic_error naming `offset` if it is not the start of a live allocation
    //! (a bad offset or a double free); the arena is then unchanged.
    void deallocate(std::size_t offset) { release(find_live(offset)); }

    //! @brief Like deallocate(offset), and also checks that `bytes` is the size the block was
    //! requested with (compared after rounding, as allocate rounds).
    //! Complexity: O(log n). Throws: dtr::logic_error naming `offset` on a bad offset, a
    //! double free, or a size that does not match; the arena is then unchanged.
    void deallocate(std::size_t offset, std::size_t bytes) {
        const auto it = find_live(offset);
        const std::optional<std::size_t> need = rounded(bytes);
        DTR_EXPECTS(need && *need == it->size,
                    "arena::deallocate(" + std::to_string(offset) + ", " + std::to_string(bytes) +
                        "): the block holds " + std::to_string(it->size) + " bytes, not " +
                        std::to_string(need.value_or(bytes)));
        release(it);
    }

    //! @brief Frees every allocation: one free block covers the region again. The peak is
    //! kept (see reset_peak()). Complexity: O(n). Throws: nothing (the node the whole block
    //! needs is one of the nodes just recycled).
    void reset() noexcept {
        free_by_size_.clear();
        by_address_.clear_and_dispose([this](block* b) { recycle(*b); });
        used_ = 0;
        live_ = 0;
        if (capacity_ != 0) {
            block& whole = acquire_node(0, capacity_);
            by_address_.insert(by_address_.end(), whole);
            free_by_size_.insert(whole);
        }
    }

    //! @brief Restarts peak tracking from the bytes in use now. Complexity: O(1).
    void reset_peak() noexcept { peak_used_ = used_; }

    //! @brief Bytes of the region the arena manages (the constructor's capacity, rounded down).
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    //! @brief The alignment of every offset and block size.
    [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
    //! @brief Bytes in live blocks (aligned sizes, not the sizes requested).
    [[nodiscard]] std::size_t used_bytes() const noexcept { return used_; }
    //! @brief Bytes in free blocks: capacity() - used_bytes().
    [[nodiscard]] std::size_t free_bytes() const noexcept { return capacity_ - used_; }
    //! @brief The largest request that would succeed now. Complexity: O(1).
    [[nodiscard]] std::size_t largest_free_block() const noexcept {
        // The rightmost node is cached in the tree header, so rbegin() is constant time.
        return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->size;
    }
    //! @brief 1 - largest_free_block() / free_bytes(); 0 when nothing is free. 0 means all
    //! free bytes are one block; close to 1 means they are scattered in small holes.
    [[nodiscard]] double fragmentation() const noexcept {
        const std::size_t free = free_bytes();
        if (free == 0) return 0.0;
        return 1.0 - static_cast<double>(largest_free_block()) / static_cast<double>(free);
    }
    //! @brief Number of live allocations.
    [[nodiscard]] std::size_t live_allocations() const noexcept { return live_; }
    //! @brief The most bytes ever live at once (since construction or reset_peak()).
    [[nodiscard]] std::size_t peak_used_bytes() const noexcept { return peak_used_; }
    //! @brief Number of blocks, free and live, tiling the region.
    [[nodiscard]] std::size_t block_count() const noexcept { return by_address_.size(); }
    //! @brief Number of free blocks (holes).
    [[nodiscard]] std::size_t free_block_count() const noexcept { return free_by_size_.size(); }

    //! @brief Calls `fn(offset, size, is_free)` for every block in address order, e.g. to
    //! draw the layout. Complexity: O(n). Throws: whatever `fn` throws.
    template <class Fn>
    void for_each_block(Fn&& fn) const {
        for (const block& b : by_address_) fn(b.offset, b.size, b.free);
    }

    //! @brief Walks every structure and throws dtr::logic_error describing the first broken
    //! invariant: blocks tile [0, capacity) exactly with aligned, non-empty blocks; no two
    //! free blocks are adjacent; the size index holds exactly the free blocks, in order; the
    //! counters match the blocks; the node pool accounts for every node. For tests.
    //! Complexity: O(n).
    void check_invariants() const {
        auto fail = [](const std::string& what) {
            DTR_EXPECTS(false, "arena invariant broken: " + what);
        };
        std::size_t next = 0, used = 0, live = 0, free_blocks = 0, largest = 0;
        bool previous_free = false;
        for (const block& b : by_address_) {
            const std::string at = "block at " + std::to_string(b.offset);
            if (b.offset != next)
                fail(at + " should start at " + std::to_string(next) + " (gap or overlap)");
            if (b.size == 0 || b.size % alignment_ != 0 || b.offset % alignment_ != 0)
                fail(at + " has size " + std::to_string(b.size) + ", not a positive multiple of " +
                     std::to_string(alignment_));
            if (b.size > capacity_ - b.offset) fail(at + " runs past the capacity");
            if (b.free) {
                if (previous_free) fail(at + " is free and so is its left neighbour");
                if (!b.size_hook.is_linked()) fail(at + " is free but missing from the size index");
                ++free_blocks;
                largest = std::max(largest, b.size);
            } else {
                if (b.size_hook.is_linked()) fail(at + " is live but in the size index");
                used += b.size;
                ++live;
            }
            previous_free = b.free;
            next = b.offset + b.size;
        }
        if (next != capacity_)
            fail("blocks end at " + std::to_string(next) + ", capacity is " +
                 std::to_string(capacity_));
        if (free_blocks != free_by_size_.size())
            fail("size index holds " + std::to_string(free_by_size_.size()) + " blocks, " +
                 std::to_string(free_blocks) + " are free");
        const block* prev = nullptr;
        for (const block& b : free_by_size_) {
            if (!b.free) fail("size index holds live block at " + std::to_string(b.offset));
            if (prev != nullptr && !size_order{}(*prev, b))
                fail("size index out of order at " + std::to_string(b.offset));
            prev = &b;
        }
        if (used != used_)
            fail("used_bytes() is " + std::to_string(used_) + ", blocks say " +
                 std::to_string(used));
        if (live != live_)
            fail("live_allocations() is " + std::to_string(live_) + ", blocks say " +
                 std::to_string(live));
        if (largest != largest_free_block()) fail("largest_free_block() disagrees with blocks");
        if (peak_used_ < used_) fail("peak below current use");
        std::size_t recycled = 0;
        for (const block* r = recycled_; r != nullptr; r = r->next_recycled) ++recycled;
        if (recycled != recycled_count_ || by_address_.size() + recycled != pool_nodes_)
            fail("node pool leaks: " + std::to_string(pool_nodes_) + " nodes, " +
                 std::to_string(by_address_.size()) + " in use, " + std::to_string(recycled) +
                 " recycled");
    }

private:
    // Safe-link hooks: Boost.Intrusive asserts (in debug builds) if a node is linked twice or
    // destroyed while linked, and check_invariants() can ask whether a node is indexed.
    using hook =
        boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;

    //! One block of the region, described out of band.
    struct block {
        std::size_t offset = 0;
        std::size_t size = 0;
        bool free = true;
        block* next_recycled = nullptr; // free-list link while the node sits in the pool
        hook address_hook;              // in by_address_: always, while in use
        hook size_hook;                 // in free_by_size_: while `free`
    };

    struct offset_of {
        using type = std::size_t;
        const std::size_t& operator()(const block& b) const noexcept { return b.offset; }
    };

    // (size, offset): the key of the best-fit index, and a probe for lower_bound.
    struct size_key {
        std::size_t size;
        std::size_t offset;
    };
    struct size_order {
        static bool less(std::size_t s1, std::size_t o1, std::size_t s2, std::size_t o2) noexcept {
            return s1 < s2 || (s1 == s2 && o1 < o2);
        }
        bool operator()(const block& a, const block& b) const noexcept {
            return less(a.size, a.offset, b.size, b.offset);
        }
        bool operator()(const block& a, const size_key& k) const noexcept {
            return less(a.size, a.offset, k.size, k.offset);
        }
        bool operator()(const size_key& k, const block& b) const noexcept {
            return less(k.size, k.offset, b.size, b.offset);
        }
    };

    using address_index =
        boost::intrusive::set<block,
                              boost::intrusive::member_hook<block, hook, &block::address_hook>,
                              boost::intrusive::key_of_value<offset_of>>;
    using size_index =
        boost::intrusive::set<block, boost::intrusive::member_hook<block, hook, &block::size_hook>,
                              boost::intrusive::compare<size_order>>;

    // Chunks double up to this many nodes, so the pool never over-reserves by much.
    static constexpr std::size_t max_chunk_nodes = std::size_t{1} << 16;

    //! The aligned size of a request, or nullopt when it cannot fit the region at all (which
    //! also keeps the rounding from overflowing).
    [[nodiscard]] std::optional<std::size_t> rounded(std::size_t bytes) const noexcept {
        if (bytes > capacity_) return std::nullopt;
        if (bytes == 0) return alignment_;
        return (bytes + alignment_ - 1) & ~(alignment_ - 1); // bytes <= capacity_: no overflow
    }

    address_index::iterator find_live(std::size_t offset) {
        const auto it = by_address_.find(offset);
        DTR_EXPECTS(it != by_address_.end(),
                    "arena::deallocate(" + std::to_string(offset) +
                        "): not the start of a live allocation (bad offset, or a double free "
                        "after the block merged with a neighbour)");
        DTR_EXPECTS(!it->free, "arena::deallocate(" + std::to_string(offset) +
                                   "): the block is already free (double free)");
        return it;
    }

    void release(address_index::iterator it) noexcept {
        block* b = &*it;
        used_ -= b->size;
        --live_;
        // Right neighbour first: `b` keeps its offset, so its place in by_address_ holds.
        if (auto right = std::next(it); right != by_address_.end() && right->free) {
            block& r = *right;
            free_by_size_.erase(free_by_size_.iterator_to(r));
            b->size += r.size;
            by_address_.erase(right);
            recycle(r);
        }
        if (it != by_address_.begin()) {
            if (auto left = std::prev(it); left->free) {
                block& l = *left;
                // `l` changes size, which is part of its key: take it out while it changes.
                free_by_size_.erase(free_by_size_.iterator_to(l));
                l.size += b->size;
                by_address_.erase(it);
                recycle(*b);
                b = &l;
            }
        }
        b->free = true;
        free_by_size_.insert(*b);
    }

    block& acquire_node(std::size_t offset, std::size_t size) {
        if (recycled_ == nullptr) grow_pool();
        block* b = recycled_;
        recycled_ = b->next_recycled;
        --recycled_count_;
        b->next_recycled = nullptr;
        b->offset = offset;
        b->size = size;
        b->free = true;
        return *b;
    }

    void recycle(block& b) noexcept {
        b.next_recycled = recycled_;
        recycled_ = &b;
        ++recycled_count_;
    }

    void grow_pool() {
        const std::size_t n = std::clamp<std::size_t>(pool_nodes_, 16, max_chunk_nodes);
        chunks_.reserve(chunks_.size() + 1); // may throw before anything changes
        auto chunk = std::make_unique<block[]>(n);
        for (std::size_t i = n; i-- > 0;) recycle(chunk[i]); // lowest address handed out first
        chunks_.push_back(std::move(chunk));
        pool_nodes_ += n;
    }

    std::size_t alignment_;
    std::size_t capacity_ = 0;
    std::size_t used_ = 0;
    std::size_t peak_used_ = 0;
    std::size_t live_ = 0;
    // The pool is declared before the indexes so that it is destroyed after them.
    std::vector<std::unique_ptr<block[]>> chunks_;
    block* recycled_ = nullptr;
    std::size_t pool_nodes_ = 0;
    std::size_t recycled_count_ = 0;
    address_index by_address_;
    size_index free_by_size_;
};

// =====================================================================================
// Fragmentation-aware eviction: the cheapest window of adjacent blocks
// =====================================================================================

//! @brief One block of a region as the window search sees it (see cheapest_window()).
struct window_block {
    //! What evicting the block means.
    enum class kind : std::uint8_t {
        free,      //!< a hole: part of any window at no cost
        evictable, //!< a live block the runtime may evict, at cost `score`
        fixed,     //!< a live block that must stay (pinned, constant, running operator): a wall
    };
    std::size_t offset = 0;
    std::size_t size = 0;
    kind what = kind::free;
    //! The cost of evicting it (evictable blocks): the heuristic's score, lower is cheaper.
    //! Negative scores count as 0 and NaN as +infinity, so that sums stay ordered.
    double score = 0;
};

//! @brief The window cheapest_window() chose: blocks [first, last) of its input.
struct window_choice {
    std::size_t first = 0;         //!< index of the first block of the window
    std::size_t last = 0;          //!< index one past the last block
    std::size_t offset = 0;        //!< address of the window's first byte
    std::size_t size = 0;          //!< bytes the window spans (free and evicted together)
    double score = 0;              //!< sum of the evictable blocks' scores
    std::size_t evictions = 0;     //!< evictable blocks in the window
    std::size_t evicted_bytes = 0; //!< their bytes
};

//! @brief Among the runs of adjacent blocks that contain no fixed block and span at least
//! `need` bytes, the one whose eviction costs least: lowest total score, then fewest
//! evictions, then fewest evicted bytes, then lowest address. Evicting its evictable blocks
//! leaves one free block of at least `need` bytes (free neighbours coalesce), which is
//! what an allocation refused for fragmentation needs.
//!
//! Why this and not "evict in heuristic order until a block appears": the heuristic's
//! victims are scattered over the region, so freeing `need` contiguous bytes that way can
//! take many evictions of storages that are nowhere near each other; the window evicts only
//! neighbours, and picks the neighbourhood whose eviction is cheapest.
//!
//! @param blocks the region's blocks in address order (e.g. from arena::for_each_block);
//!        two blocks that are not adjacent (a gap in the offsets) are treated as separated
//!        by a wall.
//! @param need   the size of the block wanted, already rounded as the allocator rounds.
//! @returns the chosen window, or std::nullopt when no run without fixed blocks spans
//!          `need` bytes (evicting everything evictable would not help either).
//! Complexity: O(n + the total length of the windows examined), n = blocks.size():
//! two pointers (scores are non-negative, so for each last block the shortest window
//! ending there is the cheapest), and each candidate's score is summed afresh rather than
//! kept as a running difference, which could lose small scores next to large ones.
//! @par Throws: nothing.
[[nodiscard]] inline std::optional<window_choice> cheapest_window(
    std::span<const window_block> blocks, std::size_t need) noexcept {
    auto cost_of = [](const window_block& b) noexcept {
        if (b.what != window_block::kind::evictable) return 0.0;
        if (std::isnan(b.score)) return std::numeric_limits<double>::infinity();
        return b.score < 0 ? 0.0 : b.score;
    };
    auto better = [](const window_choice& a, const window_choice& b) noexcept {
        if (a.score != b.score) return a.score < b.score;
        if (a.evictions != b.evictions) return a.evictions < b.evictions;
        if (a.evicted_bytes != b.evicted_bytes) return a.evicted_bytes < b.evicted_bytes;
        return a.offset < b.offset;
    };
    std::optional<window_choice> best;
    std::size_t l = 0, span = 0;
    for (std::size_t r = 0; r < blocks.size(); ++r) {
        const window_block& b = blocks[r];
        const bool adjacent = r > l && blocks[r - 1].offset + blocks[r - 1].size == b.offset;
        if (b.what == window_block::kind::fixed) {
            l = r + 1;
            span = 0;
            continue;
        }
        if (r > l && !adjacent) { // a hole in the description: start afresh here
            l = r;
            span = 0;
        }
        span += b.size;
        while (l < r && span - blocks[l].size >= need) span -= blocks[l++].size;
        if (span < need) continue;
        window_choice c;
        c.first = l;
        c.last = r + 1;
        c.offset = blocks[l].offset;
        c.size = span;
        for (std::size_t i = l; i <= r; ++i) {
            if (blocks[i].what != window_block::kind::evictable) continue;
            c.score += cost_of(blocks[i]);
            ++c.evictions;
            c.evicted_bytes += blocks[i].size;
        }
        if (!best || better(c, *best)) best = c;
    }
    return best;
}

} // namespace dtr
