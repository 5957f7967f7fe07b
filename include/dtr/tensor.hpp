// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::tensor, the reference-counted handle a framework holds for each tensor.
//!
//! A tensor is a byte range (offset, length) of one storage, the unit of eviction. Several
//! tensors may view one storage. The handle does not depend on the backend or heuristic,
//! so framework code that stores handles need not be templated on the runtime.
#pragma once

#include <dtr/error.hpp>

#include <boost/intrusive/list_hook.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace dtr {

class tensor;

namespace detail {

struct storage_header;
struct tensor_node;

//! The part of every runtime the handles talk to; the one virtual call sits on the slow
//! path (last handle of a tensor dropped).
class runtime_base {
public:
    virtual void release_tensor(tensor_node* node) noexcept = 0;

protected:
    runtime_base() = default;
    ~runtime_base() = default;
};

using tensor_hook =
    boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;

//! One user-visible tensor: a view (offset, length) onto its current storage version.
//! Lives while a handle refers to it. When its runtime is destroyed first, the node is
//! orphaned (`owner == nullptr`) and freed by the last handle.
struct tensor_node {
    runtime_base* owner;
    storage_header* storage;
    std::size_t offset;
    std::size_t length;
    std::uint64_t refs = 1;
    tensor_hook hook{};                   //!< membership in storage_header::tensors
    tensor_node* next_deferred = nullptr; //!< link while its release waits for the runtime
};

// Out of line so that the compiler's use-after-free analysis does not see a delete behind
// every handle destructor (g++ 12 then warns about handles that share a node).
[[gnu::noinline]] inline void free_orphan(tensor_node* node) noexcept { delete node; }

inline void drop_reference(tensor_node* node) noexcept {
    if (--node->refs != 0) return;
    if (node->owner != nullptr)
        node->owner->release_tensor(node);
    else
        free_orphan(node);
}

} // namespace detail

//! @brief Handle to a tensor managed by a dtr::runtime. Copying shares the tensor (one more
//! reference); destroying the last handle releases it (evict or banish, per the runtime's
//! dealloc_policy). An empty handle (default-constructed, moved-from or reset) refers to
//! nothing and every runtime operation rejects it with dtr::logic_error.
//!
//! Not thread-safe, like the runtime it belongs to.
class tensor {
public:
    //! @brief An empty handle.
    tensor() noexcept = default;
    //! @brief Effects: shares `other`'s tensor (one more reference). Complexity: constant.
    tensor(const tensor& other) noexcept : node_(other.node_) {
        if (node_ != nullptr) ++node_->refs;
    }
    //! @brief Effects: takes `other`'s reference; `other` becomes empty.
    tensor(tensor&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
    //! @brief Effects: refers to `other`'s tensor; the reference held before is dropped
    //! as by reset().
    tensor& operator=(tensor other) noexcept {
        std::swap(node_, other.node_);
        return *this;
    }
    //! @brief Effects: as reset().
    ~tensor() { reset(); }

    //! @brief Drops this handle's reference.
    //!
    //! Effects: the handle becomes empty. When it held the tensor's last reference, the
    //! runtime releases the tensor (evicts or banishes its storage, per dealloc_policy; a
    //! release during a runtime operation is handled when that operation ends); an orphaned
    //! tensor is freed.
    //! Complexity: constant, plus the release's work when it is the last reference.
    void reset() noexcept {
        if (auto* node = std::exchange(node_, nullptr)) detail::drop_reference(node);
    }

    //! @brief Returns: whether the handle refers to a tensor (possibly an orphan).
    [[nodiscard]] bool valid() const noexcept { return node_ != nullptr; }
    //! @brief Returns: valid().
    explicit operator bool() const noexcept { return valid(); }

    //! @brief Returns: the size in bytes of the tensor's view (not of its whole storage).
    //! Throws: dtr::logic_error on an empty handle.
    [[nodiscard]] std::size_t size() const {
        DTR_EXPECTS(node_ != nullptr, "size() of an empty tensor handle (released or moved-from)");
        return node_->length;
    }

    //! @brief Returns: the byte offset of the tensor's view within its storage.
    //! Throws: dtr::logic_error on an empty handle.
    [[nodiscard]] std::size_t offset() const {
        DTR_EXPECTS(node_ != nullptr,
                    "offset() of an empty tensor handle (released or moved-from)");
        return node_->offset;
    }

    //! @brief Returns: whether the handle refers to a tensor whose runtime has been
    //! destroyed (such a handle can only be destroyed or reset).
    [[nodiscard]] bool orphaned() const noexcept {
        return node_ != nullptr && node_->owner == nullptr;
    }

    //! @brief Returns: the number of handles sharing this tensor, 0 for an empty handle
    //! (diagnostics and tests).
    [[nodiscard]] std::uint64_t use_count() const noexcept { return node_ ? node_->refs : 0; }

    //! @brief Returns: whether both handles refer to the same tensor (two empty handles
    //! compare equal).
    friend bool operator==(const tensor& a, const tensor& b) noexcept { return a.node_ == b.node_; }

private:
    template <class, class>
    friend class runtime;
    explicit tensor(detail::tensor_node* adopted) noexcept : node_(adopted) {}
    [[nodiscard]] detail::tensor_node* node() const noexcept { return node_; }

    detail::tensor_node* node_ = nullptr;
};

} // namespace dtr
