#include "compile/cubin_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "compile/sha256.h"

namespace rlgemm {
namespace {

// Entry layout: magic, u64 log size, u64 cubin size, SHA-256 of (log, cubin), log, cubin.
constexpr char kMagic[8] = {'R', 'L', 'G', 'C', 'U', 'B', 'N', '1'};
constexpr size_t kHeaderBytes = 8 + 8 + 8 + 32;

std::array<uint8_t, 32> checksum(const CachedKernel& e) {
  return Sha256().field(e.log).field(std::string_view(e.cubin.data(), e.cubin.size())).digest();
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char(v >> (8 * i)));
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

}  // namespace

CubinCache::CubinCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::filesystem::path CubinCache::entry_path(const std::string& key) const { return dir_ / (key + ".cubin"); }

std::optional<CachedKernel> CubinCache::load(const std::string& key) const {
  const auto path = entry_path(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  auto corrupt = [&]() -> std::optional<CachedKernel> {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return std::nullopt;
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) return corrupt();
  const uint64_t log_size = get_u64(bytes.data() + 8);
  const uint64_t cubin_size = get_u64(bytes.data() + 16);
  if (log_size > bytes.size() || cubin_size > bytes.size() || kHeaderBytes + log_size + cubin_size != bytes.size())
    return corrupt();
  CachedKernel entry;
  entry.log.assign(bytes.data() + kHeaderBytes, log_size);
  entry.cubin.assign(bytes.data() + kHeaderBytes + log_size, bytes.data() + bytes.size());
  const auto sum = checksum(entry);
  if (std::memcmp(sum.data(), bytes.data() + 24, 32) != 0 || entry.cubin.empty()) return corrupt();
  return entry;
}

void CubinCache::store(const std::string& key, const CachedKernel& entry) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return;
  std::string bytes(kMagic, 8);
  put_u64(bytes, entry.log.size());
  put_u64(bytes, entry.cubin.size());
  const auto sum = checksum(entry);
  bytes.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  bytes += entry.log;
  bytes.append(entry.cubin.data(), entry.cubin.size());

  // A name no other writer (process or thread) can pick, in the same directory so rename is atomic.
  static std::atomic<uint64_t> counter{0};
  std::ostringstream tmp_name;
  tmp_name << key << ".tmp." << ::getpid() << "." << counter.fetch_add(1) << "." << std::random_device{}();
  const auto tmp = dir_ / tmp_name.str();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) break;
    written += size_t(n);
  }
  const bool ok = written == bytes.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), entry_path(key).c_str()) != 0) std::filesystem::remove(tmp, ec);
}

std::optional<std::filesystem::path> CubinCache::default_dir() {
  if (const char* dir = std::getenv("RLGEMM_CACHE_DIR")) {
    if (std::string_view(dir) == "off") return std::nullopt;
    if (*dir) return std::filesystem::path(dir);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "rlgemm" / "cubins";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "rlgemm" / "cubins";
  return std::nullopt;
}

}  // namespace rlgemm
