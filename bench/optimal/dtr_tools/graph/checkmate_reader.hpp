// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Reads Checkmate's training graphs (networkx node-link JSON) into a static_graph.
//!
//! Two schemas are understood, both as published with Checkmate-style benchmarks:
//!
//! - **model graphs** (`dfgraph_from_keras`): `nodes[i] = {id, name, backward, cost_cpu,
//!   cost_ram}`, `links[j] = {source, target}` naming node ids. Node ids must be distinct
//!   integers; the graph numbers nodes by ascending id (the files' ids are already 0..n-1 in
//!   topological order, which the graph keeps).
//! - **random layered graphs**: `nodes[i] = {name, out_cost, param_cost, duration}` with
//!   `name` an integer (or string) label, `links[j] = {"0": src, "1": dst}` naming labels, and
//!   `graph.order` a topological order of the labels. Nodes are numbered in `graph.order`, so
//!   the result is topologically indexed; out_cost is the output size and duration the
//!   compute cost. These graphs have no backward pass: every node is marked forward.
//!   `param_cost` (a constant, and zero in the published files) is not modelled.
//!
//! Every problem is a dtr::parse_error naming the file and the JSON path of the bad field
//! ("nodes[3].cost_ram: expected a non-negative integer, got string"). JSON syntax errors
//! carry the line; structural problems (dangling link, cycle, duplicate id) carry line 0
//! because the DOM keeps no positions.
#pragma once

#include <dtr/error.hpp>
#include <dtr_tools/graph/static_graph.hpp>
#include <dtr_tools/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtr::graph {

//! @brief Which of the two published layouts a file used.
enum class checkmate_schema { model, random_layered };

//! @brief A graph read from a Checkmate JSON file.
struct checkmate_file {
    std::string name; //!< `graph.name` when present, else empty
    checkmate_schema schema = checkmate_schema::model;
    static_graph graph;
};

namespace detail {

class checkmate_parser {
public:
    explicit checkmate_parser(std::string source) : source_(std::move(source)) {}

    checkmate_file parse(std::string_view text) const {
        json::value doc;
        try {
            doc = json::parse(text);
        } catch (const json::error& e) {
            throw parse_error(
                source_, e.line(),
                "invalid JSON: " + e.problem() + " (column " + std::to_string(e.column()) + ")");
        }
        if (!doc.is_object())
            fail("", "expected a JSON object at the top level, got " + kind_of(doc));
        const json::value& nodes = member(doc, "", "nodes");
        const json::value& links = member(doc, "", "links");
        if (!nodes.is_array()) fail("nodes", "expected an array, got " + kind_of(nodes));
        if (!links.is_array()) fail("links", "expected an array, got " + kind_of(links));

        checkmate_file out;
        if (const json::value* g = doc.find("graph"); g && g->is_object())
            if (const json::value* name = g->find("name"); name && name->is_string())
                out.name = name->as_string();

        const auto& node_list = nodes.as_array();
        if (node_list.empty()) fail("nodes", "the graph has no nodes");
        if (!node_list.front().is_object())
            fail("nodes[0]", "expected an object, got " + kind_of(node_list.front()));
        if (node_list.front().find("cost_ram")) {
            out.schema = checkmate_schema::model;
            out.graph = parse_model(node_list, links.as_array());
        } else if (node_list.front().find("out_cost")) {
            out.schema = checkmate_schema::random_layered;
            out.graph = parse_random(doc, node_list, links.as_array());
        } else {
            fail("nodes[0]",
                 "unknown schema: the node has neither \"cost_ram\" (model graph) "
                 "nor \"out_cost\" (random layered graph)");
        }
        return out;
    }

private:
    [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
        throw parse_error(source_, 0, path.empty() ? problem : path + ": " + problem);
    }

    static std::string kind_of(const json::value& v) {
        return std::string(json::kind_name(v.type()));
    }
    static std::string at(const std::string& array, std::size_t i) {
        return array + "[" + std::to_string(i) + "]";
    }

    const json::value& member(const json::value& obj, const std::string& path,
                              std::string_view key) const {
        const json::value* v = obj.find(key);
        if (!v) fail(path, "missing field \"" + std::string(key) + "\"");
        return *v;
    }
    std::string field_path(const std::string& path, std::string_view key) const {
        return path + "." + std::string(key);
    }

    std::int64_t integer(const json::value& obj, const std::string& path,
                         std::string_view key) const {
        const json::value& v = member(obj, path, key);
        if (!v.is_int64()) fail(field_path(path, key), "expected an integer, got " + describe(v));
        return v.as_int64();
    }
    std::uint64_t bytes(const json::value& obj, const std::string& path,
                        std::string_view key) const {
        const json::value& v = member(obj, path, key);
        if (!v.is_int64() || v.as_int64() < 0)
            fail(field_path(path, key), "expected a non-negative integer, got " + describe(v));
        return static_cast<std::uint64_t>(v.as_int64());
    }
    double cost(const json::value& obj, const std::string& path, std::string_view key) const {
        const json::value& v = member(obj, path, key);
        if (!v.is_number() || !(v.as_number() >= 0.0))
            fail(field_path(path, key), "expected a non-negative number, got " + describe(v));
        return v.as_number();
    }
    static std::string describe(const json::value& v) {
        if (v.is_number()) {
            std::ostringstream os;
            os << "number " << v.as_number();
            return os.str();
        }
        return kind_of(v);
    }

    // Labels in random layered graphs are integers in the published files; strings are
    // accepted too so that relabelled files keep working.
    std::string label(const json::value& v, const std::string& path) const {
        if (v.is_int64()) return std::to_string(v.as_int64());
        if (v.is_string()) return v.as_string();
        fail(path, "expected an integer or string label, got " + describe(v));
    }

    static_graph build(std::vector<node> nodes, std::vector<edge> edges) const {
        try {
            return static_graph(std::move(nodes), std::move(edges));
        } catch (const dtr::logic_error& e) {
            // The graph's own validation (cycle, duplicate edge) words the problem; drop
            // its prefixes and source location, which point into the library, not the file.
            std::string what = e.what();
            for (const std::string_view prefix : {"dtr: ", "static_graph: "})
                if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
            if (const auto pos = what.rfind(" ["); pos != std::string::npos) what.erase(pos);
            fail("links", what);
        }
    }

    static_graph parse_model(const std::vector<json::value>& list,
                             const std::vector<json::value>& links) const {
        std::map<std::int64_t, std::size_t> position; // id -> index in `list`
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string path = at("nodes", i);
            if (!list[i].is_object()) fail(path, "expected an object, got " + kind_of(list[i]));
            const std::int64_t id = integer(list[i], path, "id");
            if (!position.emplace(id, i).second)
                fail(path + ".id", "duplicate node id " + std::to_string(id));
        }
        // Nodes are numbered by ascending id: with the published 0..n-1 ids that is the
        // identity, and it keeps the files' topological numbering.
        std::map<std::int64_t, node_id> index;
        std::vector<node> nodes;
        nodes.reserve(list.size());
        for (const auto& [id, i] : position) {
            const std::string path = at("nodes", i);
            const json::value& obj = list[i];
            node x;
            const json::value& name = member(obj, path, "name");
            if (!name.is_string()) fail(path + ".name", "expected a string, got " + describe(name));
            x.name = name.as_string();
            const json::value& backward = member(obj, path, "backward");
            if (!backward.is_bool())
                fail(path + ".backward", "expected a boolean, got " + describe(backward));
            x.backward = backward.as_bool();
            x.compute_cost = cost(obj, path, "cost_cpu");
            x.output_bytes = bytes(obj, path, "cost_ram");
            index.emplace(id, nodes.size());
            nodes.push_back(std::move(x));
        }
        std::vector<edge> edges;
        edges.reserve(links.size());
        for (std::size_t j = 0; j < links.size(); ++j) {
            const std::string path = at("links", j);
            if (!links[j].is_object()) fail(path, "expected an object, got " + kind_of(links[j]));
            const std::int64_t s = integer(links[j], path, "source");
            const std::int64_t t = integer(links[j], path, "target");
            const auto si = index.find(s);
            const auto ti = index.find(t);
            if (si == index.end())
                fail(path + ".source", "dangling link: no node has id " + std::to_string(s));
            if (ti == index.end())
                fail(path + ".target", "dangling link: no node has id " + std::to_string(t));
            edges.push_back({si->second, ti->second});
        }
        return build(std::move(nodes), std::move(edges));
    }

    static_graph parse_random(const json::value& doc, const std::vector<json::value>& list,
                              const std::vector<json::value>& links) const {
        std::map<std::string, std::size_t> position; // label -> index in `list`
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string path = at("nodes", i);
            if (!list[i].is_object()) fail(path, "expected an object, got " + kind_of(list[i]));
            const std::string name = label(member(list[i], path, "name"), path + ".name");
            if (!position.emplace(name, i).second)
                fail(path + ".name", "duplicate node label " + name);
        }
        // Number nodes in graph.order (a topological order) so the planners that need a
        // topologically indexed graph can use the result as is.
        std::vector<std::size_t> order; // positions in `list`, in graph.order
        const json::value* graph = doc.find("graph");
        const json::value* order_v = graph && graph->is_object() ? graph->find("order") : nullptr;
        if (!order_v)
            fail("graph",
                 "missing field \"order\" (the topological order of a random layered graph)");
        if (!order_v->is_array())
            fail("graph.order", "expected an array, got " + kind_of(*order_v));
        std::vector<bool> seen(list.size(), false);
        for (std::size_t k = 0; k < order_v->as_array().size(); ++k) {
            const std::string path = at("graph.order", k);
            const std::string name = label(order_v->as_array()[k], path);
            const auto p = position.find(name);
            if (p == position.end()) fail(path, "no node is labelled " + name);
            if (seen[p->second]) fail(path, "node " + name + " appears twice");
            seen[p->second] = true;
            order.push_back(p->second);
        }
        if (order.size() != list.size())
            fail("graph.order", "lists " + std::to_string(order.size()) + " of the " +
                                    std::to_string(list.size()) + " nodes");
        std::map<std::string, node_id> index;
        std::vector<node> nodes;
        nodes.reserve(list.size());
        for (const std::size_t i : order) {
            const std::string path = at("nodes", i);
            node x;
            x.name = label(member(list[i], path, "name"), path + ".name");
            x.output_bytes = bytes(list[i], path, "out_cost");
            x.compute_cost = cost(list[i], path, "duration");
            x.backward = false;
            index.emplace(x.name, nodes.size());
            nodes.push_back(std::move(x));
        }
        std::vector<edge> edges;
        edges.reserve(links.size());
        for (std::size_t j = 0; j < links.size(); ++j) {
            const std::string path = at("links", j);
            if (!links[j].is_object()) fail(path, "expected an object, got " + kind_of(links[j]));
            const std::string s = label(member(links[j], path, "0"), path + ".0");
            const std::string t = label(member(links[j], path, "1"), path + ".1");
            const auto si = index.find(s);
            const auto ti = index.find(t);
            if (si == index.end()) fail(path + ".0", "dangling link: no node is labelled " + s);
            if (ti == index.end()) fail(path + ".1", "dangling link: no node is labelled " + t);
            if (si->second >= ti->second)
                fail(path, "link " + s + " -> " + t + " goes against graph.order");
            edges.push_back({si->second, ti->second});
        }
        return build(std::move(nodes), std::move(edges));
    }

    std::string source_;
};

} // namespace detail

//! @brief Parses a Checkmate graph from JSON text; `source` names it in error messages.
//! Complexity: O(size of text + E log E).
//! @throws dtr::parse_error naming `source` and the problem (invalid JSON, missing field,
//! wrong type, duplicate id, dangling link, cycle, unknown schema).
[[nodiscard]] inline checkmate_file parse_checkmate_graph(std::string_view text,
                                                          std::string source = "<string>") {
    return detail::checkmate_parser(std::move(source)).parse(text);
}

//! @brief Reads and parses a Checkmate graph file.
//! @throws dtr::parse_error when the file cannot be read or does not parse.
[[nodiscard]] inline checkmate_file read_checkmate_graph(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw parse_error(file.string(), 0, "cannot open the file");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw parse_error(file.string(), 0, "read error");
    return parse_checkmate_graph(text.str(), file.string());
}

} // namespace dtr::graph
