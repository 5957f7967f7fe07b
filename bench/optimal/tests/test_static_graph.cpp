// SPDX-License-Identifier: Apache-2.0
#include <dtr_tools/graph/checkmate_reader.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using dtr::graph::edge;
using dtr::graph::node;
using dtr::graph::static_graph;

namespace {

std::vector<node> nodes(std::size_t n, std::uint64_t bytes = 10, double cost = 1.0) {
    std::vector<node> v;
    for (std::size_t i = 0; i < n; ++i)
        v.push_back({std::string("n").append(std::to_string(i)), cost, bytes, false});
    return v;
}

// The message of the exception `f` throws, or "" when it does not throw `E`.
template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

std::filesystem::path shared_graphs() {
    const char* root = std::getenv("DTR_SHARED");
    if (!root || !*root) return {};
    const auto dir = std::filesystem::path(root) / "checkmate-graphs";
    return std::filesystem::is_directory(dir) ? dir : std::filesystem::path{};
}

} // namespace

TEST_CASE("static_graph keeps nodes, sorted adjacency and a topological order") {
    // 0 -> 2, 1 -> 2, 2 -> 3, 0 -> 3
    const static_graph g(nodes(4), {{2, 3}, {0, 2}, {1, 2}, {0, 3}});
    CHECK(g.size() == 4);
    CHECK(g.edge_count() == 4);
    CHECK(std::vector<std::size_t>(g.predecessors(2).begin(), g.predecessors(2).end()) ==
          std::vector<std::size_t>{0, 1});
    CHECK(std::vector<std::size_t>(g.successors(0).begin(), g.successors(0).end()) ==
          std::vector<std::size_t>{2, 3});
    CHECK(std::vector<std::size_t>(g.topological_order().begin(), g.topological_order().end()) ==
          std::vector<std::size_t>{0, 1, 2, 3});
    CHECK(g.is_topologically_indexed());
    CHECK(g.footprint(2) == 30); // own output + two inputs
    CHECK(g.footprint(3) == 30);
    CHECK(g.max_footprint() == 30);
    CHECK(g.total_compute_cost() == doctest::Approx(4.0));
    CHECK(g.describe(1) == "n1 (#1)");
}

TEST_CASE("static_graph renumbers a graph into topological order") {
    // 2 -> 0 -> 1: not topologically indexed.
    auto ns = nodes(3);
    ns[2].output_bytes = 99;
    const static_graph g(ns, {{2, 0}, {0, 1}});
    CHECK_FALSE(g.is_topologically_indexed());
    CHECK(std::vector<std::size_t>(g.topological_order().begin(), g.topological_order().end()) ==
          std::vector<std::size_t>{2, 0, 1});
    const static_graph h = g.topologically_indexed();
    CHECK(h.is_topologically_indexed());
    CHECK(h[0].name == "n2");
    CHECK(h[0].output_bytes == 99);
    CHECK(h.predecessors(1).size() == 1);
    CHECK(h.predecessors(1)[0] == 0);
    CHECK(h.predecessors(2)[0] == 1);
}

TEST_CASE("static_graph rejects invalid graphs with a message naming the problem") {
    CHECK(contains(message_of<dtr::logic_error>([] {
                       static_graph(nodes(2), {{0, 5}});
                   }),
                   "edge #0 (0 -> 5) names a node outside 0..1"));
    CHECK(contains(message_of<dtr::logic_error>([] {
                       static_graph(nodes(2), {{1, 1}});
                   }),
                   "self loop on node n1 (#1)"));
    CHECK(contains(message_of<dtr::logic_error>([] {
                       static_graph(nodes(2), {{0, 1}, {0, 1}});
                   }),
                   "duplicate edge n0 (#0) -> n1 (#1)"));
    const std::string cycle = message_of<dtr::logic_error>([] {
        static_graph(nodes(4), {{0, 1}, {1, 2}, {2, 3}, {3, 1}});
    });
    CHECK(contains(cycle, "cycle"));
    CHECK(contains(cycle, "n1 (#1) -> n2 (#2) -> n3 (#3) -> n1 (#1)"));
    auto bad = nodes(1);
    bad[0].compute_cost = -1.0;
    CHECK(contains(message_of<dtr::logic_error>([&] { static_graph(bad, {}); }), "negative"));
    CHECK_THROWS_AS((void)static_graph(nodes(2), {}).at(2), dtr::logic_error);
}

TEST_CASE("the reader parses a model graph") {
    const auto f = dtr::graph::parse_checkmate_graph(R"({
      "directed": true, "graph": {"name": "tiny"},
      "nodes": [
        {"name": "conv", "backward": false, "cost_cpu": 5, "cost_ram": 100, "id": 0},
        {"name": "loss", "backward": true, "cost_cpu": 1.5, "cost_ram": 4, "id": 1},
        {"name": "conv_backward", "backward": true, "cost_cpu": 7, "cost_ram": 100, "id": 2}],
      "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 0, "target": 2}]
    })",
                                                     "tiny.json");
    CHECK(f.name == "tiny");
    CHECK(f.schema == dtr::graph::checkmate_schema::model);
    const auto& g = f.graph;
    REQUIRE(g.size() == 3);
    CHECK(g[0].name == "conv");
    CHECK_FALSE(g[0].backward);
    CHECK(g[1].backward);
    CHECK(g[1].compute_cost == doctest::Approx(1.5));
    CHECK(g[2].output_bytes == 100);
    CHECK(g.edge_count() == 3);
    CHECK(g.is_topologically_indexed());
    CHECK(g.max_footprint() == 204);
}

TEST_CASE("the reader parses a random layered graph in graph.order") {
    const auto f = dtr::graph::parse_checkmate_graph(R"({
      "graph": {"name": "rl", "order": [0, 7, 3]},
      "nodes": [
        {"out_cost": 10, "param_cost": 0, "duration": 0, "name": 0},
        {"out_cost": 30, "param_cost": 0, "duration": 4, "name": 3},
        {"out_cost": 20, "param_cost": 0, "duration": 2, "name": 7}],
      "links": [{"0": 0, "1": 7}, {"0": 7, "1": 3}, {"0": 0, "1": 3}]
    })");
    CHECK(f.schema == dtr::graph::checkmate_schema::random_layered);
    const auto& g = f.graph;
    REQUIRE(g.size() == 3);
    CHECK(g[0].name == "0");
    CHECK(g[1].name == "7"); // numbered in graph.order
    CHECK(g[1].output_bytes == 20);
    CHECK(g[2].compute_cost == doctest::Approx(4.0));
    CHECK(g.is_topologically_indexed());
    CHECK(g.predecessors(2).size() == 2);
}

TEST_CASE("the reader names file and problem in every parse_error") {
    const auto problem = [](const std::string& text) {
        return message_of<dtr::parse_error>(
            [&] { (void)dtr::graph::parse_checkmate_graph(text, "g.json"); });
    };
    const std::string node0 =
        R"({"name": "a", "backward": false, "cost_cpu": 1, "cost_ram": 8, "id": 0})";
    const std::string node1 =
        R"({"name": "b", "backward": false, "cost_cpu": 1, "cost_ram": 8, "id": 1})";
    const auto model = [&](const std::string& ns, const std::string& links) {
        return R"({"nodes": [)" + ns + R"(], "links": [)" + links + "]}";
    };

    const std::string syntax = problem("{\n  \"nodes\": [,]\n}");
    CHECK(contains(syntax, "g.json:2: invalid JSON"));
    CHECK(contains(problem(R"({"links": []})"), "g.json: missing field \"nodes\""));
    CHECK(
        contains(problem(R"({"nodes": {}, "links": []})"), "nodes: expected an array, got object"));
    CHECK(
        contains(problem(model(R"({"name": "a", "backward": false, "cost_cpu": 1, "id": 0})", "")),
                 "unknown schema"));
    CHECK(contains(
        problem(model(
            R"({"name": "a", "backward": false, "cost_cpu": 1, "cost_ram": "8", "id": 0})", "")),
        "nodes[0].cost_ram: expected a non-negative integer, got string"));
    CHECK(contains(
        problem(model(R"({"name": "a", "backward": false, "cost_cpu": 1, "cost_ram": -8, "id": 0})",
                      "")),
        "nodes[0].cost_ram: expected a non-negative integer, got number -8"));
    CHECK(
        contains(problem(model(
                     R"({"name": "a", "backward": 0, "cost_cpu": 1, "cost_ram": 8, "id": 0})", "")),
                 "nodes[0].backward: expected a boolean, got number 0"));
    CHECK(
        contains(problem(model(R"({"name": "a", "backward": false, "cost_ram": 8, "id": 0})", "")),
                 "nodes[0]: missing field \"cost_cpu\""));
    CHECK(contains(problem(model(node0 + "," + node0, "")), "nodes[1].id: duplicate node id 0"));
    CHECK(contains(problem(model(node0 + "," + node1, R"({"source": 0, "target": 9})")),
                   "links[0].target: dangling link: no node has id 9"));
    CHECK(contains(problem(model(node0 + "," + node1, R"({"source": 0})")),
                   "links[0]: missing field \"target\""));
    CHECK(contains(problem(model(node0 + "," + node1,
                                 R"({"source": 0, "target": 1}, {"source": 1, "target": 0})")),
                   "links: the edges form a cycle: a (#0) -> b (#1) -> a (#0)"));
    CHECK(contains(
        problem(R"({"graph": {"order": [0]}, "nodes": [{"out_cost": 1, "duration": 1, "name": 0}],
                               "links": [{"0": 0, "1": 4}]})"),
        "links[0].1: dangling link: no node is labelled 4"));
    CHECK(contains(
        problem(
            R"({"graph": {}, "nodes": [{"out_cost": 1, "duration": 1, "name": 0}], "links": []})"),
        "missing field \"order\""));
    CHECK(contains(message_of<dtr::parse_error>(
                       [] { (void)dtr::graph::read_checkmate_graph("/nonexistent/x.json"); }),
                   "/nonexistent/x.json: cannot open the file"));
}

TEST_CASE("the published Checkmate graphs load (skipped without DTR_SHARED)") {
    const auto dir = shared_graphs();
    if (dir.empty()) {
        MESSAGE("DTR_SHARED unset or without checkmate-graphs/: skipped");
        return;
    }
    struct expect {
        const char* file;
        std::size_t nodes, edges;
    };
    for (const auto& e :
         {expect{"vgg16_b256_train.json", 45, 87}, expect{"vgg19_b256_train.json", 51, 99},
          expect{"vgg_unet_b32_train.json", 71, 148}, expect{"mobilenet_b512_train.json", 185, 367},
          expect{"resnet50_b256_train.json", 353, 751}}) {
        CAPTURE(e.file);
        const auto f = dtr::graph::read_checkmate_graph(dir / e.file);
        CHECK(f.schema == dtr::graph::checkmate_schema::model);
        CHECK(f.graph.size() == e.nodes);
        CHECK(f.graph.edge_count() == e.edges);
        CHECK(f.graph.is_topologically_indexed());
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const auto name = entry.path().filename().string();
        if (name.rfind("random_layered", 0) != 0) continue;
        CAPTURE(name);
        const auto f = dtr::graph::read_checkmate_graph(entry.path());
        CHECK(f.schema == dtr::graph::checkmate_schema::random_layered);
        CHECK(f.graph.is_topologically_indexed());
        CHECK(f.graph.size() >= 100);
    }
}
