// On-disk cache of compiled kernels, content-addressed: the key is a SHA-256 of everything that decides
// the cubin (source, embedded headers, architecture, options, NVRTC version). Entries are written to a
// private temporary file and renamed into place, so concurrent processes never see half an entry; each
// entry carries a checksum of its payload, and an entry that fails it is deleted and reported as a miss.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rlgemm {

struct CachedKernel {
  std::vector<char> cubin;
  std::string log;  // the compiler's log (ptxas -v resource usage)
};

class CubinCache {
 public:
  explicit CubinCache(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }

  // nullopt on a miss, or when the entry is corrupt (then it is removed so the next store replaces it).
  std::optional<CachedKernel> load(const std::string& key) const;
  // Best effort: an I/O failure leaves no entry (and no partial file) and is not an error.
  void store(const std::string& key, const CachedKernel& entry) const;
  std::filesystem::path entry_path(const std::string& key) const;

  // $RLGEMM_CACHE_DIR, else $XDG_CACHE_HOME/rlgemm/cubins, else ~/.cache/rlgemm/cubins; nullopt when
  // RLGEMM_CACHE_DIR is "off" or no home directory is known.
  static std::optional<std::filesystem::path> default_dir();

 private:
  std::filesystem::path dir_;
};

}  // namespace rlgemm
