#include "dispatch/choices_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

namespace rlgemm::dispatch {

ChoicesFile::ChoicesFile(std::filesystem::path file, std::string header, std::string what)
    : file_(std::move(file)), header_(std::move(header)), what_(std::move(what)) {}

void ChoicesFile::warn_once(const std::string& why) {
  if (warned_) return;
  warned_ = true;
  std::cerr << "rlgemm: warning: " << what_ << " " << file_.string() << ": " << why
            << "; choices made now last only as long as this process\n";
}

std::vector<std::vector<std::string>> ChoicesFile::read() {
  std::lock_guard lock(mutex_);
  std::vector<std::vector<std::string>> rows;
  std::error_code ec;
  if (file_.empty() || !std::filesystem::exists(file_, ec)) return rows;
  std::ifstream in(file_);
  if (!in) {
    warn_once("cannot read it");
    return rows;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line == header_) continue;
    std::vector<std::string> fields;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, ',');) fields.push_back(field);
    rows.push_back(std::move(fields));
  }
  return rows;
}

void ChoicesFile::append(const std::vector<std::string>& fields) {
  std::lock_guard lock(mutex_);
  if (file_.empty()) return;
  std::error_code ec;
  if (file_.has_parent_path()) std::filesystem::create_directories(file_.parent_path(), ec);
  const int fd = ::open(file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    warn_once(std::string("cannot write it (") + std::strerror(errno) + ")");
    return;
  }
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size == 0) text = header_ + "\n";
  for (size_t i = 0; i < fields.size(); ++i) text += (i ? "," : "") + fields[i];
  text += "\n";
  // One write of a short line with O_APPEND: processes appending at once never interleave within it.
  const ssize_t written = ::write(fd, text.data(), text.size());
  if (written != ssize_t(text.size())) warn_once(std::string("cannot write it (") + std::strerror(errno) + ")");
  ::close(fd);
}

}  // namespace rlgemm::dispatch
