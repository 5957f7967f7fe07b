// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief op_context: what an operator sees while it runs (its inputs, a way to ask for its
//! outputs, the backend).
//!
//! An operator is any callable `void(dtr::op_context<Backend>&)`. It must be pure and
//! deterministic: given the same input bytes it writes the same output bytes and asks for
//! the same output sizes and aliases, because the runtime may run it again, at any time,
//! to rematerialize an evicted output. It must not call back into the runtime, nor
//! capture tensor handles (that would keep them alive for as long as the recipe lives).
#pragma once

#include <dtr/buffer_view.hpp>
#include <dtr/error.hpp>

#include <cstddef>
#include <span>
#include <string>

namespace dtr {

namespace detail {

//! How one input appears to a running operator. `writable` is set for inputs that the
//! call mutates (and for other inputs that view a mutated storage): they point into the
//! storage's new version.
template <class Backend>
struct input_binding {
    typename Backend::const_pointer data{};
    typename Backend::pointer writable{};
    std::size_t size = 0;
    bool mutated = false;
};

//! Implemented by the runtime for the operator it is running: output allocation goes
//! through the budget (and may evict), aliases are recorded or verified.
template <class Backend>
class executor {
public:
    virtual buffer_view<typename Backend::pointer> allocate_output(std::size_t index,
                                                                   std::size_t bytes) = 0;
    virtual void alias_output(std::size_t output, std::size_t input, std::size_t offset,
                              std::size_t length) = 0;

protected:
    executor() = default;
    ~executor() = default;
};

} // namespace detail

//! @brief The running operator's view of its call.
template <class Backend>
class op_context {
public:
    using pointer = typename Backend::pointer;
    using const_pointer = typename Backend::const_pointer;

    op_context(Backend& backend, detail::executor<Backend>& exec,
               std::span<const detail::input_binding<Backend>> inputs, std::size_t outputs,
               bool rematerializing) noexcept
        : backend_(&backend),
          exec_(&exec),
          inputs_(inputs),
          outputs_(outputs),
          rematerializing_(rematerializing) {}

    //! @brief Number of inputs of this call.
    [[nodiscard]] std::size_t num_inputs() const noexcept { return inputs_.size(); }
    //! @brief Number of outputs this call must produce (each through output() or alias()).
    [[nodiscard]] std::size_t num_outputs() const noexcept { return outputs_; }
    //! @brief True when this run restores evicted outputs rather than computing new ones.
    [[nodiscard]] bool rematerializing() const noexcept { return rematerializing_; }
    //! @brief The backend, e.g. for its stream or handles.
    [[nodiscard]] Backend& backend() const noexcept { return *backend_; }

    //! @brief Read-only bytes of input `i`.
    //! Throws: dtr::logic_error when `i` is out of range.
    [[nodiscard]] buffer_view<const_pointer> input(std::size_t i) const {
        check_input(i);
        return {inputs_[i].data, inputs_[i].size};
    }

    //! @brief Writable bytes of input `i`, which the call declared as mutated
    //! (call_options::mutates). They start as a copy of the input's bytes.
    //! Throws: dtr::logic_error when `i` is out of range or not mutated by this call.
    [[nodiscard]] buffer_view<pointer> inout(std::size_t i) const {
        check_input(i);
        DTR_EXPECTS(inputs_[i].mutated, "inout(" + std::to_string(i) +
                                            "): input is not declared as mutated by this call "
                                            "(list it in call_options::mutates)");
        return {inputs_[i].writable, inputs_[i].size};
    }

    //! @brief Allocates output `i` with `bytes` bytes, which the operator must fill. May
    //! evict other storages to stay under the budget.
    //! Throws: dtr::out_of_memory when the budget cannot hold it; dtr::logic_error when `i`
    //! is out of range or already produced, or (while rematerializing) when `bytes` differs
    //! from the first run (a non-deterministic operator).
    buffer_view<pointer> output(std::size_t i, std::size_t bytes) {
        return exec_->allocate_output(i, bytes);
    }

    //! @brief Makes output `i` a view of input `in` (bytes [offset, offset + length) of
    //! that input): no memory is allocated; the output shares the input's storage.
    void alias(std::size_t i, std::size_t in, std::size_t offset, std::size_t length) {
        exec_->alias_output(i, in, offset, length);
    }
    //! @brief Makes output `i` a view of the whole of input `in`.
    void alias(std::size_t i, std::size_t in) {
        check_input(in);
        exec_->alias_output(i, in, 0, inputs_[in].size);
    }

private:
    void check_input(std::size_t i) const {
        DTR_EXPECTS(i < inputs_.size(), "input index " + std::to_string(i) +
                                            " out of range: the operator has " +
                                            std::to_string(inputs_.size()) + " inputs");
    }

    Backend* backend_;
    detail::executor<Backend>* exec_;
    std::span<const detail::input_binding<Backend>> inputs_;
    std::size_t outputs_;
    bool rematerializing_;
};

} // namespace dtr
