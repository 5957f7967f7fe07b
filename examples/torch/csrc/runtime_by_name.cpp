// SPDX-License-Identifier: Apache-2.0
#include "recipe.hpp"
#include "runtime_iface.hpp"

#include <dtr/concepts.hpp>
#include <dtr/heuristic/by_name.hpp>
#include <dtr/search/indexed.hpp>

#include <stdexcept>

namespace dtr_torch {
namespace {

template <class H>
class runtime_impl final : public runtime_iface {
public:
    runtime_impl(dtr::runtime_options opts, std::shared_ptr<block_table> table)
        : table_(table), rt_(opts, torch_backend(table)) {}

    outputs_t call(recipe_op op, std::span<const dtr::tensor> inputs, std::size_t outputs,
                   std::vector<std::uint32_t> mutates, std::optional<dtr::cost_t> cost,
                   std::uint64_t op_key) override {
        dtr::call_options o;
        o.mutates = std::move(mutates);
        o.cost = cost;
        o.op_key = op_key;
        outputs_t out;
        out.resize(outputs); // inline for up to two: no vector per call
        rt_.call_into(out, std::move(op), inputs, std::move(o));
        return out;
    }
    void begin_step() override { rt_.begin_step(); }
    dtr::tensor adopt(const c10::Storage& storage) override {
        block_table& t = *table_;
        t.pending = storage;
        t.has_pending = true;
        struct clear {
            block_table& t;
            ~clear() {
                t.has_pending = false;
                t.pending = c10::Storage();
            }
        } guard{t};
        return rt_.constant(storage.nbytes(), [](dtr::buffer_view<std::byte*>) {});
    }
    dtr::tensor copy_constant(const std::byte* src, std::size_t bytes) override {
        return rt_.constant(bytes, [&](dtr::buffer_view<std::byte*> b) {
            if (bytes != 0) rt_.backend().copy(b.data(), src, bytes);
        });
    }
    std::unique_ptr<pinned> pin(const dtr::tensor& t) override { return guarded(rt_.pin(t)); }
    std::unique_ptr<pinned> pin_for_write(const dtr::tensor& t) override {
        return guarded(rt_.pin_for_write(t));
    }
    bool evict(const dtr::tensor& t) override { return rt_.evict(t); }
    bool drop(const dtr::tensor& t) override { return rt_.drop(t); }
    void allow_offload(const dtr::tensor& t, bool allowed) override {
        rt_.allow_offload(t, allowed);
    }
    bool is_rematerializable(const dtr::tensor& t) const override {
        return rt_.is_rematerializable(t);
    }
    bool offload_allowed(const dtr::tensor& t) const override { return rt_.offload_allowed(t); }
    bool is_resident(const dtr::tensor& t) const override { return rt_.is_resident(t); }
    void set_budget(std::size_t bytes) override { rt_.set_budget(bytes); }
    std::size_t budget() const override { return rt_.budget(); }
    void set_remat_limit(double ns) override { rt_.set_remat_limit(ns); }
    void set_dealloc(dtr::dealloc_policy policy) override { rt_.set_dealloc(policy); }
    const dtr::counters& stats() const override { return rt_.stats(); }
    bool scores_with_forecast() const override {
        if constexpr (dtr::reads_forecast<H>)
            return rt_.forecast() != nullptr;
        else
            return false;
    }
    std::size_t storage_count() const override { return rt_.storage_count(); }
    std::size_t operator_count() const override { return rt_.operator_count(); }
    void check_invariants() const override { rt_.check_invariants(); }
    block_table& table() override { return *table_; }
    const char* heuristic_name() const override { return H::name; }

private:
    template <class Guard>
    static std::unique_ptr<pinned> guarded(Guard g) {
        struct holder final : pinned {
            explicit holder(Guard g) : g(std::move(g)) {}
            Guard g;
        };
        auto p = std::make_unique<holder>(std::move(g));
        p->data = reinterpret_cast<const std::byte*>(p->g.data().data());
        p->size = p->g.data().size();
        return p;
    }

    std::shared_ptr<block_table> table_;
    dtr::runtime<torch_backend, H> rt_;
};

} // namespace

std::unique_ptr<runtime_iface> make_runtime(const std::string& name, dtr::runtime_options opts,
                                            std::shared_ptr<block_table> table) {
    namespace h = dtr::heuristics;
    // The policies worth a bridge instantiation; each one compiles the whole runtime.
    if (name == h::dtr_eqclass::name)
        return std::make_unique<runtime_impl<h::dtr_eqclass>>(opts, table);
    if (name == h::dtr::name) return std::make_unique<runtime_impl<h::dtr>>(opts, table);
    if (name == h::dtr_local::name)
        return std::make_unique<runtime_impl<h::dtr_local>>(opts, table);
    if (name == h::dtr_held::name) return std::make_unique<runtime_impl<h::dtr_held>>(opts, table);
    if (name == h::dtr_held_bounded::name)
        return std::make_unique<runtime_impl<h::dtr_held_bounded>>(opts, table);
    if (name == h::dtr_next_use::name)
        return std::make_unique<runtime_impl<h::dtr_next_use>>(opts, table);
    if (name == h::dtr_held_next_use::name)
        return std::make_unique<runtime_impl<h::dtr_held_next_use>>(opts, table);
    using eqclass_indexed = dtr::search::indexed<h::dtr_eqclass>;
    if (name == eqclass_indexed::name)
        return std::make_unique<runtime_impl<eqclass_indexed>>(opts, table);
    using next_use_indexed = dtr::search::indexed<h::dtr_next_use>;
    if (name == next_use_indexed::name)
        return std::make_unique<runtime_impl<next_use_indexed>>(opts, table);
    if (name == h::lru::name) return std::make_unique<runtime_impl<h::lru>>(opts, table);
    if (name == h::largest::name) return std::make_unique<runtime_impl<h::largest>>(opts, table);
    if (name == h::msps::name) return std::make_unique<runtime_impl<h::msps>>(opts, table);
    throw std::invalid_argument("dtr_torch: unknown heuristic '" + name +
                                "' (the bridge offers dtr_eqclass, dtr, dtr_local, dtr_held, "
                                "dtr_held_bounded, dtr_next_use, dtr_held_next_use, "
                                "indexed:dtr_eqclass, indexed:dtr_next_use, lru, largest, msps)");
}

} // namespace dtr_torch
