// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Streaming reader of DTR operator logs: raw JSON lines in, validated typed records out.
//!
//! The format (one JSON object per line, see the published logs' README) spreads one logical
//! instruction over several lines: a CONSTANT is followed by its MEMORY line, a CALL by a
//! MEMORY and an ALIAS line per result. log_reader groups those lines, checks every field and
//! every name, and hands out one `record` per logical instruction, so the replay driver never
//! sees a half-formed or inconsistent instruction.
//!
//! ## Line checks
//!
//! Each line must hold exactly the fields of its INSTRUCTION (unknown, missing and duplicate
//! fields are errors). Names are non-empty strings; MEMORY and TIME are non-negative decimal
//! integers written as strings; ALIAS is "-1" or an index into the CALL's ARGS; MUTATE is a
//! list of distinct JSON integers indexing ARGS (the published logs write these as numbers,
//! unlike every other value).
//!
//! ## Names, ids and binding
//!
//! Tensor names are interned to dense ids (name_id) in order of first definition; operator
//! names get their own dense ids (op_id). An id identifies a *name*, not a tensor: COPY gives
//! a tensor a second name, COPY_FROM and MUTATE change what a name refers to.
//!
//! Every name holds exactly one external reference, so a name is **bound** from its
//! definition (CONSTANT, CALL result, COPY destination) until its RELEASE. Rules:
//! - a definition of a bound name is an error (redefinition);
//! - a use of a name that is not bound is an error: CALL/MUTATE ARGS, COPY SRC, COPY_FROM DST
//!   and SRC (never defined, or used after its RELEASE);
//! - COPY_FROM rebinds DST to SRC's tensor and MUTATE gives its mutated ARGS new versions;
//!   both leave the names bound (the driver tracks the tensors behind them);
//! - RELEASE unbinds; releasing an already released name is an error.
//!
//! ## Tolerances (each one counted in log_statistics, none silent)
//! - RELEASE of a name never defined: skipped, no record (the published simulator ignores
//!   these too); counted in unknown_releases.
//! - A definition of a name released earlier: accepted as a fresh binding with the same id;
//!   counted in reused_names.
//! - Blank (whitespace-only) lines: skipped; counted in blank_lines.
//! - Lines before the first ANNOTATE START (option skip_before_start, on by default): each is
//!   still checked as a line (JSON, fields, kinds, values) but not grouped or bound; counted
//!   in skipped_lines.
//! Option `strict` turns the first three into errors. The eight published logs contain none
//! of them.
//!
//! Every error is a dtr::parse_error naming the source, the 1-based line and the problem.
#pragma once

#include <dtr/error.hpp>
#include <dtr_tools/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace dtr::replay {

//! @brief Dense id of a tensor name, in order of first definition.
using name_id = std::uint32_t;
//! @brief Dense id of an operator name, in order of first appearance.
using op_id = std::uint32_t;

//! @brief The ANNOTATE markers of the format.
enum class annotation : std::uint8_t {
    start,    //!< the measured iteration begins
    backward, //!< the backward pass begins (once per step)
    step      //!< another training step begins (a log that records several: bench/trace)
};

//! @brief The logical instructions of a log, one struct per kind.
namespace instr {

//! @brief ANNOTATE START, BACKWARD or STEP.
struct annotate {
    annotation what;
};

//! @brief A tensor that exists before the iteration (never evictable); binds `name`.
struct constant {
    name_id name;
    std::uint64_t bytes; //!< from its MEMORY line
};

//! @brief One result of a CALL.
struct call_result {
    name_id name;
    //! Bytes as logged. For a view (alias >= 0) this is the size of the shared storage: the
    //! result adds no memory (the published simulator counts it as 0).
    std::uint64_t bytes;
    std::int32_t alias; //!< -1: fresh storage; else index into call::args whose storage it shares
    [[nodiscard]] bool is_view() const noexcept { return alias >= 0; }
};

//! @brief A pure operator call; binds every result name.
struct call {
    op_id op;
    std::vector<name_id> args;        //!< may repeat a name (e.g. mul(x, x))
    std::vector<call_result> results; //!< distinct names, in logged order
    std::uint64_t time_ns;
};

//! @brief An in-place operator: each args[mutated[k]] gets a new version.
struct mutate {
    op_id op;
    std::vector<name_id> args;
    std::vector<std::uint32_t> mutated; //!< distinct indices into args
    std::uint64_t time_ns;
};

//! @brief `dst` becomes a second name of `src`'s tensor; binds dst.
struct copy {
    name_id dst;
    name_id src;
};

//! @brief `dst` (bound) is rebound to `src`'s tensor; dst's old tensor loses a reference.
struct copy_from {
    name_id dst;
    name_id src;
};

//! @brief The program drops `name` (its one reference); unbinds it.
struct release {
    name_id name;
};

} // namespace instr

//! @brief One logical instruction; the alternative tells the kind.
using instruction = std::variant<instr::annotate, instr::constant, instr::call, instr::mutate,
                                 instr::copy, instr::copy_from, instr::release>;

//! @brief An instruction with the 1-based line where it starts (its CONSTANT/CALL line).
struct record {
    instruction op;
    std::size_t line = 0;
};

//! @brief How log_reader treats the optional parts of the format.
struct log_reader_options {
    //! Skip (but still check line by line) everything before the first ANNOTATE START; a log
    //! without one is then an error.
    bool skip_before_start = true;
    //! Reject what is otherwise tolerated: RELEASE of unknown names, redefinition of released
    //! names, blank lines.
    bool strict = false;
};

//! @brief What a log_reader has read so far, tolerated oddities included.
struct log_statistics {
    std::size_t lines = 0;         //!< physical lines read
    std::size_t blank_lines = 0;   //!< whitespace-only lines, ignored
    std::size_t skipped_lines = 0; //!< non-blank lines before ANNOTATE START, checked only
    std::size_t annotates = 0;     //!< records of each kind returned
    std::size_t constants = 0;
    std::size_t calls = 0;
    std::size_t mutates = 0;
    std::size_t copies = 0;
    std::size_t copy_froms = 0;
    std::size_t releases = 0;
    std::size_t call_results = 0;               //!< results over all CALLs
    std::size_t view_results = 0;               //!< of which views (ALIAS >= 0)
    std::size_t unknown_releases = 0;           //!< RELEASEs of never-defined names, skipped
    std::size_t first_unknown_release_line = 0; //!< 0: none
    std::size_t reused_names = 0;               //!< definitions of names released earlier
    std::size_t bound_names = 0;                //!< names bound now (at the end: the log's outputs)

    //! @brief Records returned so far.
    [[nodiscard]] std::size_t records() const noexcept {
        return annotates + constants + calls + mutates + copies + copy_froms + releases;
    }

    //! @brief One line per figure, "name: value", for reports.
    friend std::ostream& operator<<(std::ostream& os, const log_statistics& s) {
        return os << "lines: " << s.lines << "\nblank lines: " << s.blank_lines
                  << "\nskipped lines (before START): " << s.skipped_lines
                  << "\nrecords: " << s.records() << "\n  annotate: " << s.annotates
                  << "\n  constant: " << s.constants << "\n  call: " << s.calls
                  << " (results: " << s.call_results << ", views: " << s.view_results << ")"
                  << "\n  mutate: " << s.mutates << "\n  copy: " << s.copies
                  << "\n  copy_from: " << s.copy_froms << "\n  release: " << s.releases
                  << "\nunknown releases (ignored): " << s.unknown_releases
                  << (s.unknown_releases
                          ? " first at line " + std::to_string(s.first_unknown_release_line)
                          : std::string{})
                  << "\nreused names: " << s.reused_names << "\nbound names: " << s.bound_names
                  << '\n';
    }
};

namespace detail {

//! Interns strings to dense ids; names stay addressable by id. Node-based map, so the
//! pointers kept in `by_id_` survive rehashing and moves.
class interner {
public:
    [[nodiscard]] std::optional<std::uint32_t> find(std::string_view s) const {
        const auto it = ids_.find(s);
        if (it == ids_.end()) return std::nullopt;
        return it->second;
    }
    //! Returns the id of `s`, adding it when new; nullopt once 2^32 - 1 ids exist.
    [[nodiscard]] std::optional<std::uint32_t> intern(std::string_view s) {
        if (const auto it = ids_.find(s); it != ids_.end()) return it->second;
        if (by_id_.size() >= std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
        const auto id = static_cast<std::uint32_t>(by_id_.size());
        const auto [it, inserted] = ids_.emplace(std::string(s), id);
        by_id_.push_back(&it->first);
        return id;
    }
    [[nodiscard]] const std::string& name(std::uint32_t id) const { return *by_id_[id]; }
    [[nodiscard]] std::size_t size() const noexcept { return by_id_.size(); }

private:
    struct hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    std::unordered_map<std::string, std::uint32_t, hash, std::equal_to<>> ids_;
    std::vector<const std::string*> by_id_;
};

//! A name quoted for a message; control bytes escaped, long names shortened.
inline std::string quoted(std::string_view s) {
    constexpr std::size_t limit = 64;
    std::string out = "\"";
    for (std::size_t k = 0; k < s.size() && k < limit; ++k) {
        const auto c = static_cast<unsigned char>(s[k]);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (s.size() > limit) out += "...";
    return out + '"';
}

// Line kinds of the format; MEMORY and ALIAS only occur inside groups.
enum class line_op : std::uint8_t {
    annotate,
    constant,
    memory,
    call,
    alias,
    mutate,
    copy,
    copy_from,
    release
};
inline constexpr std::array<std::string_view, 9> line_op_names = {
    "ANNOTATE", "CONSTANT", "MEMORY", "CALL", "ALIAS", "MUTATE", "COPY", "COPY_FROM", "RELEASE"};

enum field : unsigned {
    f_instruction,
    f_name,
    f_memory,
    f_args,
    f_result,
    f_time,
    f_alias,
    f_mutate,
    f_dst,
    f_src,
    f_annotation,
    field_count
};
inline constexpr std::array<std::string_view, field_count> field_names = {
    "INSTRUCTION", "NAME",   "MEMORY", "ARGS", "RESULT",    "TIME",
    "ALIAS",       "MUTATE", "DST",    "SRC",  "ANNOTATION"};

constexpr unsigned bit(field f) noexcept { return 1u << f; }
// Exactly these fields, all required, per line kind (indexed by line_op).
inline constexpr std::array<unsigned, 9> line_fields = {
    bit(f_instruction) | bit(f_annotation),
    bit(f_instruction) | bit(f_name),
    bit(f_instruction) | bit(f_name) | bit(f_memory),
    bit(f_instruction) | bit(f_name) | bit(f_args) | bit(f_result) | bit(f_time),
    bit(f_instruction) | bit(f_name) | bit(f_alias),
    bit(f_instruction) | bit(f_name) | bit(f_args) | bit(f_mutate) | bit(f_time),
    bit(f_instruction) | bit(f_dst) | bit(f_src),
    bit(f_instruction) | bit(f_dst) | bit(f_src),
    bit(f_instruction) | bit(f_name),
};

//! One physical line after line-level checks. Views point into the reader's current DOM
//! and die with the next line.
struct raw_line {
    line_op op = line_op::annotate;
    std::array<const json::value*, field_count> field{};
    std::string_view name, dst, src;
    std::uint64_t memory = 0;
    std::uint64_t time = 0;
    std::int64_t alias = -1;
    annotation ann = annotation::start;
};

} // namespace detail

//! @brief Reads a DTR operator log as a stream of validated records.
//!
//! Reads one line at a time (memory use is bounded by the longest line plus the name
//! tables), so logs of any length stream through. Not thread-safe; movable, not copyable.
//! After next() has thrown, the reader is spent: further calls throw dtr::logic_error.
class log_reader {
public:
    //! @brief Reads from `in`; `source` names it in errors. `in` must outlive the reader.
    explicit log_reader(std::istream& in, std::string source = "<stream>",
                        log_reader_options options = {})
        : in_(&in),
          source_(std::move(source)),
          options_(options),
          started_(!options.skip_before_start) {}

    //! @brief Opens the log at `path` (the reader owns the file).
    //! @throws dtr::parse_error (line 0) when the file cannot be opened.
    [[nodiscard]] static log_reader open(const std::filesystem::path& path,
                                         log_reader_options options = {}) {
        auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
        if (!file->is_open()) {
            const int err = errno;
            throw parse_error(
                path.string(), 0,
                "cannot open for reading" +
                    (err ? ": " + std::generic_category().message(err) : std::string{}));
        }
        log_reader reader(*file, path.string(), options);
        reader.owned_ = std::move(file);
        return reader;
    }

    log_reader(log_reader&&) noexcept = default;
    log_reader& operator=(log_reader&&) noexcept = default;
    log_reader(const log_reader&) = delete;
    log_reader& operator=(const log_reader&) = delete;
    ~log_reader() = default;

    //! @brief Reads the next instruction into `out`; false at the end of the log.
    //!
    //! Complexity: linear in the length of the lines read, amortized O(1) per name.
    //! @throws dtr::parse_error for malformed input (source, line, problem);
    //! dtr::logic_error when called after an earlier throw.
    bool next(record& out) {
        DTR_EXPECTS(!failed_, "log_reader for " + source_ + " used after it reported an error");
        try {
            return next_impl(out);
        } catch (...) {
            failed_ = true;
            throw;
        }
    }

    //! @brief The next instruction, or nullopt at the end. @throws as next(record&).
    std::optional<record> next() {
        record r;
        if (!next(r)) return std::nullopt;
        return r;
    }

    //! @brief The name behind an id. @throws dtr::logic_error for an id never handed out.
    [[nodiscard]] const std::string& name(name_id id) const {
        DTR_EXPECTS(id < names_.size(), "unknown name id " + std::to_string(id));
        return names_.name(id);
    }
    //! @brief Names interned so far; ids are 0 .. name_count() - 1.
    [[nodiscard]] std::size_t name_count() const noexcept { return names_.size(); }
    //! @brief The id of a defined name, if any.
    [[nodiscard]] std::optional<name_id> find_name(std::string_view name) const {
        return names_.find(name);
    }
    //! @brief Whether the name is bound now (defined and not released).
    [[nodiscard]] bool is_bound(name_id id) const noexcept {
        return id < bound_.size() && bound_[id];
    }

    //! @brief The operator name behind an id. @throws dtr::logic_error for an unknown id.
    [[nodiscard]] const std::string& op_name(op_id id) const {
        DTR_EXPECTS(id < ops_.size(), "unknown operator id " + std::to_string(id));
        return ops_.name(id);
    }
    //! @brief Operator names interned so far.
    [[nodiscard]] std::size_t op_count() const noexcept { return ops_.size(); }

    [[nodiscard]] const log_statistics& stats() const noexcept { return stats_; }
    [[nodiscard]] const std::string& source() const noexcept { return source_; }
    [[nodiscard]] const log_reader_options& options() const noexcept { return options_; }
    //! @brief Whether ANNOTATE START has been seen (always true without skip_before_start).
    [[nodiscard]] bool started() const noexcept { return started_; }

private:
    using line_op = detail::line_op;

    std::unique_ptr<std::istream> owned_; // set by open() only
    std::istream* in_;
    std::string source_;
    log_reader_options options_;
    bool started_;
    bool failed_ = false;
    bool done_ = false;

    std::string text_;    // the current physical line
    json::parser parser_; // reused: keeps its scratch memory between lines
    json::value dom_;     // the current line's parse; raw_'s views point into it
    detail::raw_line raw_;
    std::vector<std::string> pending_; // names of a group, kept across its lines
    std::vector<bool> seen_;           // scratch for MUTATE duplicate checks

    detail::interner names_;
    detail::interner ops_;
    std::vector<bool> bound_; // by name_id
    log_statistics stats_;

    [[noreturn]] void fail(std::size_t line, const std::string& problem) const {
        throw parse_error(source_, line, problem);
    }
    [[noreturn]] void fail(const std::string& problem) const { fail(stats_.lines, problem); }

    std::string_view kind() const noexcept {
        return detail::line_op_names[static_cast<std::size_t>(raw_.op)];
    }

    // ---- physical lines ---------------------------------------------------------------

    // Reads and checks the next non-blank line into raw_; false at end of input.
    bool read_line() {
        for (;;) {
            if (!std::getline(*in_, text_)) {
                if (in_->bad()) fail(stats_.lines + 1, "read error");
                return false;
            }
            ++stats_.lines;
            if (text_.find_first_not_of(" \t\r\n") == std::string::npos) {
                if (options_.strict) fail("blank line (strict mode)");
                ++stats_.blank_lines;
                continue;
            }
            check_line();
            return true;
        }
    }

    static int field_of(std::string_view key) noexcept {
        for (unsigned f = 0; f < detail::field_count; ++f)
            if (detail::field_names[f] == key) return static_cast<int>(f);
        return -1;
    }

    const json::value& field(detail::field f) const { return *raw_.field[f]; }

    std::string field_label(detail::field f) const {
        return "field \"" + std::string(detail::field_names[f]) + "\"";
    }

    std::string_view name_field(detail::field f) {
        const json::value& v = field(f);
        if (!v.is_string())
            fail(field_label(f) + " must be a string (a name), got " +
                 std::string(json::kind_name(v.type())));
        if (v.as_string().empty()) fail(field_label(f) + " is an empty name");
        return v.as_string();
    }

    // A non-negative decimal integer in a string (MEMORY bytes, TIME nanoseconds).
    std::uint64_t count_field(detail::field f) {
        const json::value& v = field(f);
        const std::string_view what = detail::field_names[f];
        if (!v.is_string())
            fail(std::string(what) + " must be a string holding a decimal integer, got " +
                 std::string(json::kind_name(v.type())));
        const std::string& s = v.as_string();
        std::uint64_t n = 0;
        const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec == std::errc::result_out_of_range)
            fail(std::string(what) + " " + detail::quoted(s) + " is out of range");
        if (ec != std::errc{} || ptr != s.data() + s.size()) {
            if (!s.empty() && s[0] == '-' && s.size() > 1 &&
                s.find_first_not_of("0123456789", 1) == std::string::npos)
                fail(std::string(what) + " must not be negative, got " + detail::quoted(s));
            fail(std::string(what) + " " + detail::quoted(s) + " is not a decimal integer");
        }
        return n;
    }

    void list_of_names(detail::field f) {
        const json::value& v = field(f);
        if (!v.is_array())
            fail(field_label(f) + " must be a list of names, got " +
                 std::string(json::kind_name(v.type())));
        std::size_t k = 0;
        for (const json::value& e : v.as_array()) {
            if (!e.is_string())
                fail(std::string(detail::field_names[f]) + " entry " + std::to_string(k) +
                     " must be a string (a name), got " + std::string(json::kind_name(e.type())));
            if (e.as_string().empty())
                fail(std::string(detail::field_names[f]) + " entry " + std::to_string(k) +
                     " is an empty name");
            ++k;
        }
    }

    // Everything that can be checked from one line alone.
    void check_line() {
        try {
            dom_ = parser_.parse(text_);
        } catch (const json::error& e) {
            fail("bad JSON at column " + std::to_string(e.column()) + ": " + e.problem());
        }
        if (!dom_.is_object())
            fail("line is not a JSON object (got " + std::string(json::kind_name(dom_.type())) +
                 ")");
        raw_.field.fill(nullptr);
        const std::string* unknown = nullptr;
        for (const auto& [key, v] : dom_.as_object()) {
            const int f = field_of(key);
            if (f < 0) {
                if (!unknown) unknown = &key;
                continue;
            }
            if (raw_.field[static_cast<std::size_t>(f)])
                fail("duplicate field " + detail::quoted(key));
            raw_.field[static_cast<std::size_t>(f)] = &v;
        }

        const json::value* ins = raw_.field[detail::f_instruction];
        if (!ins) fail("missing field \"INSTRUCTION\"");
        if (!ins->is_string())
            fail("field \"INSTRUCTION\" must be a string, got " +
                 std::string(json::kind_name(ins->type())));
        const auto& names = detail::line_op_names;
        const auto it = std::find(names.begin(), names.end(), ins->as_string());
        if (it == names.end()) fail("unknown INSTRUCTION " + detail::quoted(ins->as_string()));
        raw_.op = static_cast<line_op>(it - names.begin());

        if (unknown)
            fail("unknown field " + detail::quoted(*unknown) + " in a " + std::string(kind()) +
                 " line");
        const unsigned allowed = detail::line_fields[static_cast<std::size_t>(raw_.op)];
        for (unsigned f = 0; f < detail::field_count; ++f) {
            const bool want = allowed & (1u << f);
            const bool have = raw_.field[f] != nullptr;
            if (have && !want)
                fail(field_label(static_cast<detail::field>(f)) + " does not belong in a " +
                     std::string(kind()) + " line");
            if (want && !have)
                fail(std::string(kind()) + " line is missing " +
                     field_label(static_cast<detail::field>(f)));
        }

        using namespace detail;
        if (allowed & bit(f_name)) raw_.name = name_field(f_name);
        if (allowed & bit(f_dst)) raw_.dst = name_field(f_dst);
        if (allowed & bit(f_src)) raw_.src = name_field(f_src);
        if (allowed & bit(f_memory)) raw_.memory = count_field(f_memory);
        if (allowed & bit(f_time)) raw_.time = count_field(f_time);
        if (allowed & bit(f_args)) list_of_names(f_args);
        if (allowed & bit(f_result)) list_of_names(f_result);
        if (allowed & bit(f_annotation)) check_annotation();
        if (allowed & bit(f_alias)) check_alias();
        if (allowed & bit(f_mutate)) check_mutate();
    }

    void check_annotation() {
        const json::value& v = field(detail::f_annotation);
        if (!v.is_string())
            fail("field \"ANNOTATION\" must be a string, got " +
                 std::string(json::kind_name(v.type())));
        if (v.as_string() == "START")
            raw_.ann = annotation::start;
        else if (v.as_string() == "BACKWARD")
            raw_.ann = annotation::backward;
        else if (v.as_string() == "STEP")
            raw_.ann = annotation::step;
        else
            fail("ANNOTATION " + detail::quoted(v.as_string()) +
                 " is none of START, BACKWARD and STEP");
    }

    void check_alias() {
        const json::value& v = field(detail::f_alias);
        if (!v.is_string())
            fail("ALIAS must be a string holding an integer, got " +
                 std::string(json::kind_name(v.type())));
        const std::string& s = v.as_string();
        std::int64_t a = 0;
        const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), a);
        if (ec == std::errc::result_out_of_range)
            fail("ALIAS " + detail::quoted(s) + " is out of range");
        if (ec != std::errc{} || ptr != s.data() + s.size())
            fail("ALIAS " + detail::quoted(s) + " is not an integer");
        if (a < -1) fail("ALIAS " + s + " is out of range (-1 or an index into ARGS)");
        raw_.alias = a;
    }

    void check_mutate() {
        const json::value& v = field(detail::f_mutate);
        if (!v.is_array())
            fail("field \"MUTATE\" must be a list of indices, got " +
                 std::string(json::kind_name(v.type())));
        const std::size_t nargs = field(detail::f_args).as_array().size();
        seen_.assign(nargs, false);
        std::size_t k = 0;
        for (const json::value& e : v.as_array()) {
            if (!e.is_int64())
                fail("MUTATE entry " + std::to_string(k) +
                     " must be an integer index into ARGS, got " +
                     (e.is_number() ? "a non-integral number"
                                    : std::string(json::kind_name(e.type()))));
            const std::int64_t i = e.as_int64();
            if (i < 0 || static_cast<std::uint64_t>(i) >= nargs)
                fail("MUTATE index " + std::to_string(i) + " is out of range: the line has " +
                     std::to_string(nargs) + " ARGS");
            if (seen_[static_cast<std::size_t>(i)])
                fail("MUTATE index " + std::to_string(i) + " is listed twice");
            seen_[static_cast<std::size_t>(i)] = true;
            ++k;
        }
    }

    // ---- names ------------------------------------------------------------------------

    // The id of a bound name used as `role`; error when undefined or released.
    name_id use(std::string_view name, std::string_view role) const {
        const auto id = names_.find(name);
        if (!id) fail(subject(role, name) + " is used before it is defined");
        if (!bound_[*id]) fail(subject(role, name) + " is used after its RELEASE");
        return *id;
    }

    // "argument "x5" of CALL "add"", "COPY source "x7"": what a message is about.
    std::string subject(std::string_view role, std::string_view name) const {
        std::string s = std::string(role) + " " + detail::quoted(name);
        if (raw_.op == line_op::call || raw_.op == line_op::mutate)
            s += " of " + std::string(kind()) + " " + detail::quoted(raw_.name);
        return s;
    }

    // Errors unless `name` may be defined now (line = where the definition is).
    void check_definable(std::string_view name, std::string_view role, std::size_t line) const {
        const auto id = names_.find(name);
        if (!id) return;
        if (bound_[*id])
            fail(line, std::string(role) + " " + detail::quoted(name) +
                           " is already bound (redefinition)");
        if (options_.strict)
            fail(line, std::string(role) + " " + detail::quoted(name) +
                           " redefines a released name (strict mode)");
    }

    name_id bind(std::string_view name, std::size_t line) {
        const auto id = names_.intern(name);
        if (!id) fail(line, "too many distinct names (more than 2^32 - 1)");
        if (*id < bound_.size()) {
            ++stats_.reused_names; // check_definable ran: it was released
        } else {
            bound_.resize(*id + 1u, false);
        }
        bound_[*id] = true;
        ++stats_.bound_names;
        return *id;
    }

    op_id intern_op(std::string_view name) {
        const auto id = ops_.intern(name);
        if (!id) fail("too many distinct operator names (more than 2^32 - 1)");
        return *id;
    }

    // ---- groups -----------------------------------------------------------------------

    // Reads the next line of a group and checks it is `want` for `name`.
    void expect(line_op want, std::string_view name, std::string_view head, std::size_t head_line) {
        const std::string_view want_text = detail::line_op_names[static_cast<std::size_t>(want)];
        if (!read_line())
            fail(head_line, "truncated log: end of input inside the " + std::string(head) +
                                " group of this line (expected " + std::string(want_text) +
                                " for " + detail::quoted(name) + ")");
        if (raw_.op != want)
            fail("expected " + std::string(want_text) + " for " + detail::quoted(name) +
                 " of the " + std::string(head) + " at line " + std::to_string(head_line) +
                 ", got " + std::string(kind()));
        if (raw_.name != name)
            fail(std::string(want_text) + " line names " + detail::quoted(raw_.name) +
                 ", expected " + detail::quoted(name) + " (the " + std::string(head) + " at line " +
                 std::to_string(head_line) + ")");
    }

    bool next_impl(record& out) {
        for (;;) {
            if (done_ || !read_line()) {
                done_ = true;
                if (!started_)
                    fail(stats_.lines, "no ANNOTATE START in the log (" +
                                           std::to_string(stats_.lines) +
                                           " lines); read it with skip_before_start = false");
                return false;
            }
            const std::size_t line = stats_.lines;
            if (!started_) {
                if (raw_.op != line_op::annotate || raw_.ann != annotation::start) {
                    ++stats_.skipped_lines;
                    continue;
                }
                started_ = true;
            }
            out.line = line;
            switch (raw_.op) {
                case line_op::annotate:
                    out.op = instr::annotate{raw_.ann};
                    ++stats_.annotates;
                    return true;
                case line_op::constant:
                    read_constant(out, line);
                    return true;
                case line_op::call:
                    read_call(out, line);
                    return true;
                case line_op::mutate:
                    read_mutate(out);
                    return true;
                case line_op::copy: {
                    const name_id src = use(raw_.src, "COPY source");
                    check_definable(raw_.dst, "COPY destination", line);
                    out.op = instr::copy{bind(raw_.dst, line), src};
                    ++stats_.copies;
                    return true;
                }
                case line_op::copy_from: {
                    const name_id dst = use(raw_.dst, "COPY_FROM destination");
                    out.op = instr::copy_from{dst, use(raw_.src, "COPY_FROM source")};
                    ++stats_.copy_froms;
                    return true;
                }
                case line_op::release:
                    if (read_release(out, line)) return true;
                    continue;
                case line_op::memory:
                    fail("MEMORY line outside a CONSTANT or CALL group");
                case line_op::alias:
                    fail("ALIAS line outside a CALL group");
            }
        }
    }

    void read_constant(record& out, std::size_t line) {
        check_definable(raw_.name, "CONSTANT", line);
        pending_.assign(1, std::string(raw_.name));
        expect(line_op::memory, pending_[0], "CONSTANT", line);
        out.op = instr::constant{bind(pending_[0], line), raw_.memory};
        ++stats_.constants;
    }

    void read_call(record& out, std::size_t line) {
        instr::call c;
        c.op = intern_op(raw_.name);
        c.time_ns = raw_.time;
        const auto& args = field(detail::f_args).as_array();
        c.args.reserve(args.size());
        for (const json::value& a : args) c.args.push_back(use(a.as_string(), "argument"));

        const auto& results = field(detail::f_result).as_array();
        pending_.clear();
        for (const json::value& r : results) {
            check_definable(r.as_string(), "CALL result", line);
            pending_.push_back(r.as_string());
        }
        std::vector<std::string_view> sorted(pending_.begin(), pending_.end());
        std::sort(sorted.begin(), sorted.end());
        if (const auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end())
            fail("RESULT lists " + detail::quoted(*dup) + " twice");

        c.results.resize(pending_.size());
        for (std::size_t k = 0; k < pending_.size(); ++k) {
            expect(line_op::memory, pending_[k], "CALL", line);
            c.results[k].bytes = raw_.memory;
            expect(line_op::alias, pending_[k], "CALL", line);
            if (raw_.alias >= static_cast<std::int64_t>(c.args.size()))
                fail("ALIAS " + std::to_string(raw_.alias) + " of " + detail::quoted(pending_[k]) +
                     " is out of range: the CALL at line " + std::to_string(line) + " has " +
                     std::to_string(c.args.size()) + " ARGS");
            c.results[k].alias = static_cast<std::int32_t>(raw_.alias);
            if (raw_.alias >= 0) ++stats_.view_results;
        }
        // Bind only once the whole group is read: a result cannot be its own argument.
        for (std::size_t k = 0; k < pending_.size(); ++k)
            c.results[k].name = bind(pending_[k], line);
        stats_.call_results += pending_.size();
        ++stats_.calls;
        out.op = std::move(c);
    }

    void read_mutate(record& out) {
        instr::mutate m;
        m.op = intern_op(raw_.name);
        m.time_ns = raw_.time;
        const auto& args = field(detail::f_args).as_array();
        m.args.reserve(args.size());
        for (const json::value& a : args) m.args.push_back(use(a.as_string(), "argument"));
        const auto& idx = field(detail::f_mutate).as_array();
        m.mutated.reserve(idx.size());
        for (const json::value& i : idx)
            m.mutated.push_back(static_cast<std::uint32_t>(i.as_int64())); // checked in range
        ++stats_.mutates;
        out.op = std::move(m);
    }

    // False when the RELEASE is tolerated and produces no record.
    bool read_release(record& out, std::size_t line) {
        const auto id = names_.find(raw_.name);
        if (!id) {
            if (options_.strict)
                fail("RELEASE of " + detail::quoted(raw_.name) +
                     ", which was never defined (strict mode)");
            if (stats_.unknown_releases++ == 0) stats_.first_unknown_release_line = line;
            return false;
        }
        if (!bound_[*id])
            fail("RELEASE of " + detail::quoted(raw_.name) + ", which is already released");
        bound_[*id] = false;
        --stats_.bound_names;
        out.op = instr::release{*id};
        ++stats_.releases;
        return true;
    }
};

} // namespace dtr::replay
