// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Recycled heap blocks for what the bridge makes once per operator call and frees in
//! bulk: recipes, storage references, managed tensors.
//!
//! A step makes thousands of these and frees them together when its activations go (at the
//! end of backward, or when a chain of temporaries is released). glibc's per-thread cache
//! keeps only seven blocks of a size; the rest of such a burst goes through its general
//! free and malloc paths (bin sorting, consolidation): about an eighth of the bridged time of
//! a chain of small operators in a profile. A free list per thread and block size serves them
//! in a few instructions instead (with it and a few allocations fewer per call, the TreeLSTM
//! at ratio 1.0 went from 1.80x plain PyTorch to 1.47x: examples/torch/results/overhead/
//! block-pool/).

#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace dtr_torch {

//! Blocks of `Size` bytes, kept on a free list of the calling thread when freed (at most
//! `Keep` of them; beyond that, and once the thread is exiting, they go back to the heap).
//! The cap bounds what a thread keeps: about 1 MiB of recipes (1 KiB each) and less of the
//! rest. Longer lists were no faster: side by side on the TreeLSTM, 16,384 took 1.51-1.85x
//! plain where 4,096 took 1.50-1.62x (blocks reused from deep in a list are cold in the
//! cache), and 1,024 took 1.50-1.53x where 4,096 took 1.53-1.59x.
//! A block may be freed on another thread than the one it came from (CUDA backward runs on
//! autograd's device threads): it joins that thread's list. What a list holds is freed when
//! its thread exits.
template <std::size_t Size, std::size_t Keep = 1024>
class block_pool {
    static_assert(Size >= sizeof(void*));

public:
    [[nodiscard]] static void* allocate() {
        state& s = state_;
        if (s.head != nullptr) {
            node* n = s.head;
            s.head = n->next;
            --s.count;
            return n;
        }
        return ::operator new(Size);
    }

    static void deallocate(void* p) noexcept {
        state& s = state_;
        if (!s.closed && s.count < Keep) {
            if (s.count == 0) (void)&closer_; // constructs this thread's closer (frees at exit)
            auto* n = static_cast<node*>(p);
            n->next = s.head;
            s.head = n;
            ++s.count;
            return;
        }
        ::operator delete(p);
    }

private:
    struct node {
        node* next;
    };
    // Trivially destructible, so that it stays usable while other thread-local objects are
    // destroyed after the closer has run: frees then go straight to the heap.
    struct state {
        node* head = nullptr;
        std::size_t count = 0;
        bool closed = false;
    };
    struct closer {
        ~closer() {
            state& s = state_;
            s.closed = true;
            while (s.head != nullptr) {
                node* n = s.head;
                s.head = n->next;
                ::operator delete(n);
            }
            s.count = 0;
        }
    };
    static inline thread_local state state_{};
    static inline thread_local closer closer_{};
};

//! A std allocator over block_pool for single objects (std::allocate_shared's control block
//! with the object in it); arrays go to the heap.
template <class T>
struct pooled_allocator {
    using value_type = T;

    pooled_allocator() = default;
    template <class U>
    pooled_allocator(const pooled_allocator<U>&) noexcept {}

    [[nodiscard]] T* allocate(std::size_t n) {
        static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
        if (n == 1) return static_cast<T*>(block_pool<sizeof(T)>::allocate());
        return std::allocator<T>().allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n == 1) {
            block_pool<sizeof(T)>::deallocate(p);
            return;
        }
        std::allocator<T>().deallocate(p, n);
    }

    template <class U>
    bool operator==(const pooled_allocator<U>&) const noexcept {
        return true;
    }
};

//! std::make_shared with the control block and the object in a pooled block.
template <class T, class... Args>
std::shared_ptr<T> make_pooled_shared(Args&&... args) {
    return std::allocate_shared<T>(pooled_allocator<T>(), std::forward<Args>(args)...);
}

} // namespace dtr_torch
