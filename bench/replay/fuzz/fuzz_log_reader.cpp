// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief libFuzzer target: feeds arbitrary bytes to dtr::replay::log_reader (and to the JSON
//! parser underneath it).
//!
//! A dtr::parse_error (json::error for the direct JSON call) is the expected answer to bad
//! input; anything else escaping is a bug, and so is a crash, a sanitizer report, or a record
//! that breaks the reader's documented guarantees, which are checked here after every record.
#include <dtr_tools/json.hpp>
#include <dtr_tools/replay/log_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace {

namespace replay = dtr::replay;
namespace instr = dtr::replay::instr;

// Not assert(): release builds keep NDEBUG, and a broken guarantee must stop the fuzzer.
void require(bool ok) {
    if (!ok) __builtin_trap();
}

void check_record(const replay::log_reader& reader, const replay::record& r) {
    require(r.line >= 1 && r.line <= reader.stats().lines);
    const auto known = [&](replay::name_id id) { return id < reader.name_count(); };
    std::visit(
        [&](const auto& op) {
            using T = std::decay_t<decltype(op)>;
            if constexpr (std::is_same_v<T, instr::constant>) {
                require(known(op.name) && reader.is_bound(op.name));
            } else if constexpr (std::is_same_v<T, instr::call>) {
                require(op.op < reader.op_count());
                for (auto a : op.args) require(known(a));
                for (const auto& res : op.results) {
                    require(known(res.name) && reader.is_bound(res.name));
                    require(res.alias >= -1 &&
                            res.alias < static_cast<std::int64_t>(op.args.size()));
                }
            } else if constexpr (std::is_same_v<T, instr::mutate>) {
                require(op.op < reader.op_count());
                for (auto a : op.args) require(known(a) && reader.is_bound(a));
                std::vector<bool> seen(op.args.size(), false);
                for (auto m : op.mutated) {
                    require(m < op.args.size() && !seen[m]);
                    seen[m] = true;
                }
            } else if constexpr (std::is_same_v<T, instr::copy> ||
                                 std::is_same_v<T, instr::copy_from>) {
                require(known(op.dst) && reader.is_bound(op.dst));
                require(known(op.src) && reader.is_bound(op.src));
            } else if constexpr (std::is_same_v<T, instr::release>) {
                require(known(op.name) && !reader.is_bound(op.name));
            }
        },
        r.op);
}

void read_log(const std::string& text, replay::log_reader_options options) {
    std::istringstream in(text);
    replay::log_reader reader(in, "fuzz", options);
    replay::record r;
    std::size_t records = 0;
    try {
        while (reader.next(r)) {
            ++records;
            check_record(reader, r);
        }
    } catch (const dtr::parse_error& e) {
        require(e.source() == "fuzz");
        require(e.line() <= reader.stats().lines);
    }
    const auto& s = reader.stats();
    require(s.records() == records);
    require(s.bound_names <= reader.name_count());
    require(s.lines >= s.blank_lines + s.skipped_lines);
    if (options.strict)
        require(s.blank_lines == 0 && s.unknown_releases == 0 && s.reused_names == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        (void)dtr::json::parse(text);
    } catch (const dtr::json::error& e) {
        require(e.offset() <= text.size() && e.line() >= 1 && e.column() >= 1);
    }
    read_log(text, {});
    read_log(text, {.skip_before_start = false});
    read_log(text, {.skip_before_start = false, .strict = true});
    return 0;
}
