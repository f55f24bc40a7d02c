// The argument checks' inline predicates (process_group/shape_check.h): a backend calls the
// throwing check only when its predicate says no, so the two must agree on every input, or a
// bad argument gets past the backend (predicate too lenient) or a good one is refused (too
// strict). Checked over a grid of counts, dtypes, roots and ranks.
#include <catch2/catch.hpp>

#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/shape_check.h"

using namespace fastrun;

namespace {

template <class Check>
bool accepted(Check&& check) {
  try {
    check();
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

std::vector<float> g_data(64);
BufferView view(std::size_t count, DType dtype) { return BufferView{g_data.data(), count, dtype}; }

}  // namespace

TEST_CASE("the shape predicates accept exactly what the shape checks accept", "[group]") {
  const Where where = op_where("op", "world");
  int cases = 0, good = 0;
  for (int size : {1, 2, 3, 4})
    for (std::size_t a : {0, 1, 2, 3, 4, 6, 8, 12})
      for (std::size_t b : {0, 1, 2, 3, 4, 6, 8, 12})
        for (DType da : {DType::float32, DType::int64})
          for (DType db : {DType::float32, DType::int64}) {
            const BufferView x = view(a, da), y = view(b, db);
            CHECK(blocks_ok(x, y, size) == accepted([&] { check_all_gather_shapes(where, y, x, size); }));
            CHECK(blocks_ok(x, y, size) == accepted([&] { check_reduce_scatter_shapes(where, x, y, size); }));
            const bool a2a = all_to_all_shapes_ok(x, y, size);
            CHECK(a2a == accepted([&] { check_all_to_all_shapes(where, x, y, size); }));
            for (int root : {-1, 0, 1, 3, 4}) {
              CHECK(root_ok(root, size) == accepted([&] { check_root(where, root, size); }));
              for (int rank = 0; rank < size; ++rank) {
                const bool gather = gather_shapes_ok(x, y, root, rank, size);
                const bool scatter = scatter_shapes_ok(x, y, root, rank, size);
                CHECK(gather == accepted([&] { check_gather_shapes(where, x, y, root, rank, size); }));
                CHECK(scatter == accepted([&] { check_scatter_shapes(where, x, y, root, rank, size); }));
                cases += 2;
                good += gather + scatter;
              }
            }
            cases += 3;
            good += 2 * blocks_ok(x, y, size) + a2a;
          }
  // The grid holds both kinds of input, so each side of every predicate was exercised.
  CHECK(good > 100);
  CHECK(cases - good > 100);
}
