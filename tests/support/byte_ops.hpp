// SPDX-License-Identifier: Apache-2.0
// Small deterministic operators over byte buffers, shared by the runtime tests.
#pragma once

#include <dtr/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace dtr_test {

using host_context = dtr::op_context<dtr::host_backend>;

inline std::uint8_t u8(std::byte b) { return std::to_integer<std::uint8_t>(b); }

//! out[i] = in[i] + delta (one output, same size as the input).
struct add_op {
    int delta = 1;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        auto in = ctx.input(0);
        auto out = ctx.output(0, in.size());
        if constexpr (std::is_pointer_v<typename Ctx::pointer>)
            for (std::size_t i = 0; i < in.size(); ++i)
                out.data()[i] = std::byte(static_cast<std::uint8_t>(u8(in.data()[i]) + delta));
    }
};

//! Output `index` of `bytes` bytes: out[i] = i + salt + sum over inputs k of
//! in_k[i % size_k] * (k + 1). As an operator: one output, salt 0.
struct mix_op {
    std::size_t bytes = 16;
    template <class Ctx>
    void write(Ctx& ctx, std::size_t index, unsigned salt) const {
        auto out = ctx.output(index, bytes);
        if constexpr (std::is_pointer_v<typename Ctx::pointer>) {
            for (std::size_t i = 0; i < bytes; ++i) {
                unsigned v = static_cast<unsigned>(i) + salt;
                for (std::size_t k = 0; k < ctx.num_inputs(); ++k) {
                    auto in = ctx.input(k);
                    if (in.size() != 0)
                        v += u8(in.data()[i % in.size()]) * static_cast<unsigned>(k + 1);
                }
                out.data()[i] = std::byte(static_cast<std::uint8_t>(v));
            }
        }
    }
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        write(ctx, 0, 0);
    }
};

//! Fills a fresh buffer with a byte pattern: first = seed, then seed + 1, ...
inline auto fill_with(std::uint8_t seed) {
    return [seed](dtr::buffer_view<std::byte*> buf) {
        for (std::size_t i = 0; i < buf.size(); ++i)
            buf.data()[i] = std::byte(static_cast<std::uint8_t>(seed + i));
    };
}

//! The bytes of `t`, read through a pin.
template <class Runtime>
std::vector<std::uint8_t> read(Runtime& rt, const dtr::tensor& t) {
    auto guard = rt.pin(t);
    auto span = guard.span();
    std::vector<std::uint8_t> bytes(span.size());
    if (!span.empty()) std::memcpy(bytes.data(), span.data(), span.size());
    return bytes;
}

} // namespace dtr_test
