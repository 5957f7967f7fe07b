// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief op_function: the type-erased, immovable holder of an operator's callable.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace dtr::detail {

//! Holds any callable invocable as `void(Context&)`. Operators are kept for as long as an
//! output may need recomputing, so the holder lives inside its op record and is never moved;
//! small callables (the common lambda capturing a few scalars) are stored inline, larger
//! ones on the heap.
template <class Context>
class op_function {
public:
    static constexpr std::size_t inline_size = 48;

    template <class F>
        requires(!std::is_same_v<std::remove_cvref_t<F>, op_function>)
    explicit op_function(F&& f) {
        using stored = std::decay_t<F>;
        static_assert(std::is_invocable_v<stored&, Context&>,
                      "a dtr operator must be callable as op(dtr::op_context<Backend>&)");
        if constexpr (sizeof(stored) <= inline_size &&
                      alignof(stored) <= alignof(std::max_align_t)) {
            ::new (static_cast<void*>(storage_)) stored(std::forward<F>(f));
            target_ = reinterpret_cast<stored*>(storage_);
            destroy_ = [](void* p) noexcept { static_cast<stored*>(p)->~stored(); };
        } else {
            target_ = new stored(std::forward<F>(f));
            destroy_ = [](void* p) noexcept { delete static_cast<stored*>(p); };
        }
        invoke_ = [](void* p, Context& ctx) { (*static_cast<stored*>(p))(ctx); };
    }

    op_function(const op_function&) = delete;
    op_function& operator=(const op_function&) = delete;
    ~op_function() { destroy_(target_); }

    void operator()(Context& ctx) const { invoke_(target_, ctx); }

private:
    alignas(std::max_align_t) unsigned char storage_[inline_size];
    void* target_;
    void (*invoke_)(void*, Context&);
    void (*destroy_)(void*) noexcept;
};

} // namespace dtr::detail
