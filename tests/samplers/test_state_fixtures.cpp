// Old checkpoints still load: the states in fixtures/ were written by the code of cc62d9c (the
// hand-written JSON). Each must load into today's sampler, resume with exactly the indices the
// old code gave (fixtures/<case>.next), and today's writer must give the same bytes.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "state_fixture_cases.h"

using namespace fastrun::samplers;

namespace {

const std::string kFixtureDir = FASTRUN_SAMPLER_FIXTURES;

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// A fixture's one line, without its final newline.
std::string read_state(const std::string& path) {
  std::string text;
  REQUIRE(read_file(path, text));
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  text.pop_back();
  return text;
}

std::vector<std::vector<std::uint64_t>> read_rows(const std::string& path) {
  std::string text;
  REQUIRE(read_file(path, text));
  std::vector<std::vector<std::uint64_t>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::uint64_t> row;
    for (std::uint64_t v; words >> v;) row.push_back(v);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("states written by the old code resume exactly as before", "[samplers][state][fixtures]") {
  const auto cases = fixtures::cases();
  REQUIRE(cases.size() == 8);  // every kind with a state
  for (const auto& c : cases) {
    INFO(c.name);
    const std::string base = kFixtureDir + "/" + c.name;
    const std::string saved = read_state(base + ".json");
    const fixtures::Resumed r = c.resume(saved);
    // Loading then saving gives the old code's state again (a bucketed sampler resumed on one
    // rank starts a new layout, which the old code recorded in <case>.reloaded.json).
    std::string reloaded;
    const std::string expected_reload = read_file(base + ".reloaded.json", reloaded) ? read_state(base + ".reloaded.json") : saved;
    CHECK(r.state_after_load == expected_reload);
    CHECK(r.rest == read_rows(base + ".next"));
  }
}

TEST_CASE("today's writer gives the old code's bytes", "[samplers][state][fixtures]") {
  for (const auto& c : fixtures::cases()) {
    INFO(c.name);
    CHECK(c.save() == read_state(kFixtureDir + "/" + std::string(c.name) + ".json"));
  }
}
