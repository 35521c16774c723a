// Work split over the machine's cores: contiguous chunks of an index range, one per thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace rlgemm {

// Calls body(begin, end) on contiguous chunks that cover [0, n) exactly once, on up to `threads` threads (0: one
// per core), the calling thread among them. A chunk holds at least `min_chunk` indices (at least 1), so a small
// range runs on the calling thread alone. Returns when every chunk is done; the first exception a body threw (by
// chunk order) is then rethrown. The body must write only what its own chunk owns.
template <class Body>
void parallel_chunks(size_t n, size_t min_chunk, Body&& body, int threads = 0) {
  if (n == 0) return;
  const size_t cores = threads > 0 ? size_t(threads) : std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t parts = std::max<size_t>(1, std::min(cores, n / std::max<size_t>(1, min_chunk)));
  if (parts == 1) {
    body(size_t(0), n);
    return;
  }
  const size_t chunk = (n + parts - 1) / parts;
  std::vector<std::exception_ptr> errors(parts);
  auto run = [&](size_t part) {
    try {
      body(part * chunk, std::min(n, (part + 1) * chunk));
    } catch (...) {
      errors[part] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(parts - 1);
  for (size_t part = 1; part < parts && part * chunk < n; ++part) pool.emplace_back(run, part);
  run(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace rlgemm
