#include "rlgemm/shapes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "rlgemm/error.h"

namespace rlgemm {
namespace {

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("rlgemm_shapes_" + name + ".csv");
  std::ofstream(path) << text;
  return path;
}

TEST(Shapes, ShardsShareAListOutWhole) {
  const auto& grid = cudal2_grid();
  std::vector<Shape> joined;
  for (int i = 0; i < 3; ++i) {
    const Shard shard = parse_shard(std::to_string(i) + "/3");
    EXPECT_EQ(shard.index, i);
    EXPECT_EQ(shard.count, 3);
    const auto part = shard_of(grid, shard);
    EXPECT_EQ(part.size(), i == 0 ? 334u : 333u);
    EXPECT_EQ(part.front(), grid[size_t(i)]);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  EXPECT_EQ(std::set<Shape>(joined.begin(), joined.end()), std::set<Shape>(grid.begin(), grid.end()));
  EXPECT_EQ(joined.size(), grid.size());
  EXPECT_EQ(shard_of(grid, parse_shard("0/1")), grid);
  for (const char* bad : {"3/3", "-1/3", "1/0", "1", "a/b", "1/3x", "/3", "1/", ""}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("--shard takes I/N"), std::string::npos) << e.what();
    }
  }
}

TEST(Shapes, BuiltInGridIsTheFullCube) {
  const auto& grid = cudal2_grid();
  ASSERT_EQ(grid.size(), 1000u);
  std::set<int64_t> values;
  for (const auto& s : grid) values.insert(s.m);
  EXPECT_EQ(values, (std::set<int64_t>{64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384}));
  EXPECT_EQ(std::set<Shape>(grid.begin(), grid.end()).size(), 1000u);
  EXPECT_EQ(grid.front(), (Shape{64, 64, 64}));
}

TEST(Shapes, BuiltInGridMatchesTheDataFile) {
  EXPECT_EQ(load_shapes_csv(std::filesystem::path(RLGEMM_SOURCE_DIR) / "data/cudal2_grid.csv"), cudal2_grid());
}

TEST(Shapes, ReadsHeaderCommentsAndBlankLines) {
  auto path = write_temp("ok", "M,N,K\n# comment\n\n1,8,8\r\n 64, 128 ,256\n");
  auto shapes = load_shapes_csv(path);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[1], (Shape{64, 128, 256}));
}

TEST(Shapes, MalformedLineIsNamed) {
  auto path = write_temp("bad", "M,N,K\n64,64,64\n64,64\n");
  try {
    load_shapes_csv(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":3:"), std::string::npos) << e.what();
  }
}

TEST(Shapes, RuleBreakingShapeIsNamedWithItsLine) {
  auto path = write_temp("rule", "64,64,64\n64,60,64\n");
  try {
    load_shapes_csv(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("N must be a positive multiple of 8"), std::string::npos);
  }
}

TEST(Shapes, MissingOrEmptyFile) {
  EXPECT_THROW(load_shapes_csv("/nonexistent/shapes.csv"), Error);
  EXPECT_THROW(load_shapes_csv(write_temp("empty", "# nothing\n")), Error);
  EXPECT_EQ(resolve_shapes("cudal2").size(), 1000u);
}

}  // namespace
}  // namespace rlgemm
