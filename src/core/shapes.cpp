#include "rlgemm/shapes.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "rlgemm/error.h"

namespace rlgemm {

extern const char kCudal2GridCsv[];  // generated from data/cudal2_grid.csv at build time

namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<Shape> parse_shapes(std::istream& in, const std::string& source) {
  std::vector<Shape> shapes;
  std::string line;
  int line_no = 0;
  bool first_row = true;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::string row = line.substr(start);
    if (first_row && lowercase(row).rfind("m,n,k", 0) == 0) {
      first_row = false;
      continue;
    }
    first_row = false;
    try {
      shapes.push_back(parse_shape(row));
    } catch (const Error& e) {
      throw Error(ErrorKind::kInvalidInput, source + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  if (shapes.empty()) fail(source + ": no shapes (expected rows of M,N,K)");
  return shapes;
}

}  // namespace

const std::vector<Shape>& cudal2_grid() {
  static const std::vector<Shape> grid = [] {
    std::istringstream in(kCudal2GridCsv);
    return parse_shapes(in, "built-in cudal2 grid");
  }();
  return grid;
}

std::vector<Shape> load_shapes_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open shapes file '" + path.string() + "'");
  return parse_shapes(in, path.string());
}

std::vector<Shape> resolve_shapes(std::string_view spec) {
  if (spec == "cudal2") return cudal2_grid();
  return load_shapes_csv(std::filesystem::path(std::string(spec)));
}

Shard parse_shard(std::string_view text) {
  const auto bad = [&]() -> Shard {
    throw Error(ErrorKind::kInvalidInput,
                "--shard takes I/N with 0 <= I < N, e.g. 0/4 (got '" + std::string(text) + "')");
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return bad();
  const auto number = [&](std::string_view digits) {
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string_view::npos)
      bad();
    return std::stoi(std::string(digits));
  };
  const Shard shard{number(text.substr(0, slash)), number(text.substr(slash + 1))};
  if (shard.count < 1 || shard.index >= shard.count) return bad();
  return shard;
}

std::vector<Shape> shard_of(const std::vector<Shape>& shapes, Shard shard) {
  std::vector<Shape> part;
  for (size_t i = size_t(shard.index); i < shapes.size(); i += size_t(shard.count)) part.push_back(shapes[i]);
  return part;
}

}  // namespace rlgemm
