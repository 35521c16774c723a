// A CSV file of choices made on this machine (the cuBLASLt algorithm lt_auto picked for a shape, the kernel
// autotuning kept), so that each costs its measurement once per machine: read once, then appended to one
// line per choice, by one write with O_APPEND, so that processes appending at once never interleave within
// a line. A file that cannot be read or written costs nothing but one warning: the choices then last as long
// as the process. Lines a crash cut short fail their reader's parse and are skipped. Thread-safe.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace rlgemm::dispatch {

class ChoicesFile {
 public:
  // `file` empty: nothing is read or written. `header` is the first line of a new file; `what` names the
  // file in warnings ("the cuBLASLt choices cache").
  ChoicesFile(std::filesystem::path file, std::string header, std::string what);

  // Every line but the header, split at commas (no field holds one).
  std::vector<std::vector<std::string>> read();
  // Appends `fields` joined by commas as one line (the header first, into an empty file).
  void append(const std::vector<std::string>& fields);
  const std::filesystem::path& file() const { return file_; }

 private:
  void warn_once(const std::string& why);
  std::filesystem::path file_;
  std::string header_, what_;
  std::mutex mutex_;
  bool warned_ = false;
};

}  // namespace rlgemm::dispatch
